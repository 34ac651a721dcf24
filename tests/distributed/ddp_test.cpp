// DistributedDataParallel and the fault behaviour of a real job: this test binary re-runs
// itself as the ranks of a job (kiln::distributed::launch, 2 or 4 processes over loopback
// TCP), each rank running one worker scenario below and checking its own results; a rank
// writes what it measured to KILN_TEST_OUT for the test to read.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <sstream>
#include <map>
#include <thread>

#include "cuda/requirements.h"
#include "kiln/cuda/nccl.h"
#include "kiln/distributed.h"
#include "kiln/kiln.h"
#include "kiln/models.h"

namespace kiln::distributed {
namespace {

using namespace std::chrono_literals;
using testing::HasSubstr;
namespace F = kiln::nn::functional;

// ---- the worker side: runs inside each rank ----

// Appends a line to this rank's report file (KILN_TEST_OUT/rank<R>.txt).
void report(const std::string& line) {
  const char* dir = std::getenv("KILN_TEST_OUT");
  if (!dir) return;
  std::ofstream(std::string(dir) + "/rank" + std::to_string(rank()) + ".txt", std::ios::app) << line << "\n";
}

// A checksum of every parameter's bits, for "identical on every rank".
int64_t bits_checksum(nn::Module& m) {
  uint64_t h = 1469598103934665603ull;
  for (const Tensor& p : m.parameters()) {
    Tensor c = p.contiguous().to(kCPU);
    auto* bytes = static_cast<const unsigned char*>(c.raw_data());
    for (size_t i = 0; i < c.nbytes(); ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  }
  return static_cast<int64_t>(h >> 1);
}

void expect_identical_across_ranks(nn::Module& m, int step) {
  const Device device = m.parameters().front().device();  // the group's: nccl's on the GPU
  Tensor mine = tensor({bits_checksum(m)}, kInt64).to(device);
  Tensor all = zeros({world_size()}, TensorOptions(kInt64).with_device(device));
  all_gather_into_tensor(all, mine);
  std::vector<int64_t> sums = all.to(kCPU).to_vector<int64_t>();
  for (int r = 1; r < world_size(); ++r)
    ASSERT_EQ(sums[r], sums[0]) << "parameters of rank " << r << " differ from rank 0's after step " << step;
}

float max_abs_difference(nn::Module& a, nn::Module& b) {
  auto pa = a.parameters(), pb = b.parameters();
  float worst = 0;
  for (size_t i = 0; i < pa.size(); ++i) worst = std::max(worst, (pa[i] - pb[i]).abs().max().item<float>());
  return worst;
}

// Synthetic classification data, the same on every rank: labels from a fixed projection so
// that the loss goes down.
struct Data {
  Tensor x, y;
};
Data make_data(std::vector<int64_t> sample_shape, int64_t n) {
  manual_seed(1234);
  std::vector<int64_t> shape = {n};
  shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
  Tensor x = randn(shape);
  Tensor w = randn({x.numel() / n, 10});
  Tensor y = argmax(x.reshape({n, -1}).matmul(w), 1);
  return {x, y};
}

// DDP with global batch B split over the ranks against one process with batch B, on the same
// initial weights. `ghost_batches`: the reference runs BatchNorm per rank-sized slice (what
// DDP without SyncBatchNorm computes) and keeps rank 0's running statistics.
// `reference`: the single-process model (a clone of `model` when null); it gets rank 0's
// initial state.
template <class M>
void train_against_single_process(std::shared_ptr<M> model, Data data, int64_t global_batch, int steps,
                                  bool ghost_batches, std::shared_ptr<nn::Module> reference = nullptr) {
  const int world = world_size(), me = rank();
  DistributedDataParallel ddp(model);
  if (reference) {
    reference->load_state_dict(model->state_dict());  // after the broadcast: rank 0's
  } else {
    reference = nn::clone(model);
  }
  optim::SGD opt(model->parameters(), {.lr = 0.05, .momentum = 0.9});
  optim::SGD ref_opt(reference->parameters(), {.lr = 0.05, .momentum = 0.9});
  const int64_t local = global_batch / world;
  const int64_t n = data.x.size(0);
  double worst_loss = 0;
  float first_loss = 0, last_loss = 0;
  for (int step = 0; step < steps; ++step) {
    int64_t start = (step * global_batch) % (n - global_batch + 1);
    Tensor xb = data.x.narrow(0, start, global_batch), yb = data.y.narrow(0, start, global_batch);
    // Data parallel: this rank's slice.
    Tensor loss = F::cross_entropy(ddp(xb.narrow(0, me * local, local)), yb.narrow(0, me * local, local));
    opt.zero_grad();
    loss.backward();
    opt.step();
    Tensor global_loss = loss.detach().clone();
    all_reduce(global_loss, ReduceOp::Avg);
    // One process, the whole batch.
    ref_opt.zero_grad();
    Tensor ref_loss;
    if (!ghost_batches) {
      ref_loss = F::cross_entropy((*reference)(xb), yb);
      ref_loss.backward();
    } else {
      std::vector<Tensor> kept;
      ref_loss = zeros({});
      for (int r = 0; r < world; ++r) {
        Tensor part = F::cross_entropy((*reference)(xb.narrow(0, r * local, local)), yb.narrow(0, r * local, local));
        (part / world).backward();
        ref_loss = ref_loss + part.detach() / world;
        if (r == 0) {
          for (const Tensor& b : reference->buffers()) kept.push_back(b.clone());
        }
        if (r == world - 1) {
          NoGradGuard no_grad;
          auto buffers = reference->buffers();
          for (size_t i = 0; i < buffers.size(); ++i) buffers[i].copy_(kept[i]);
        }
      }
    }
    ref_opt.step();
    float a = global_loss.item<float>(), b = ref_loss.item<float>();
    worst_loss = std::max(worst_loss, std::abs(double(a) - b) / std::max(1.0, std::abs(double(b))));
    if (step == 0) first_loss = a;
    last_loss = a;
    expect_identical_across_ranks(*model, step);
    if (testing::Test::HasFailure()) return;
  }
  float weights = max_abs_difference(*model, *reference);
  std::ostringstream line;
  line << std::setprecision(3) << "max loss relative difference " << worst_loss
       << ", max weight difference " << weights << " after " << steps << " steps; loss " << first_loss << " -> "
       << last_loss;
  report(line.str());
  EXPECT_LT(worst_loss, 1e-5);
  EXPECT_LT(weights, 1e-4);
  EXPECT_LT(last_loss, first_loss * 0.8) << "training did not progress";
}

void scenario_mlp() {
  models::FashionMLPConfig config{.d_in = 48, .d_hidden = 32, .d_out = 10, .dropout = 0.0};
  manual_seed(100 + rank());  // different initial weights per rank: DDP must broadcast rank 0's
  auto model = models::build(config);
  train_against_single_process(model, make_data({48}, 512), 32, 200, false);
}

void scenario_bn_cnn() {
  models::BatchNormCNNConfig config{.in_channels = 1, .image_size = 8, .channels1 = 4, .channels2 = 8,
                                    .d_hidden = 16, .num_classes = 10, .dropout = 0.0};
  manual_seed(200 + rank());
  auto model = models::build(config);
  train_against_single_process(model, make_data({1, 8, 8}, 256), 16, 100, true);
}

// SyncBatchNorm: the statistics of the whole global batch, so DDP matches one process with
// plain BatchNorm on the global batch, running statistics included.
void scenario_sync_bn() {
  models::BatchNormCNNConfig config{.in_channels = 1, .image_size = 8, .channels1 = 4, .channels2 = 8,
                                    .d_hidden = 16, .num_classes = 10, .dropout = 0.0};
  manual_seed(300 + rank());
  auto model = models::build(config);
  std::shared_ptr<nn::Module> reference = nn::clone(model);  // plain BatchNorm, for the one process
  std::shared_ptr<nn::Module> synced = convert_sync_batchnorm(model);
  EXPECT_EQ(synced.get(), model.get());
  int sync_layers = 0;
  for (nn::Module* m : model->modules()) sync_layers += dynamic_cast<SyncBatchNorm*>(m) != nullptr;
  EXPECT_EQ(sync_layers, 2);
  train_against_single_process(model, make_data({1, 8, 8}, 256), 16, 100, false, reference);
  // The running statistics are the global batch's, as in the one process.
  auto mine = model->named_buffers(), theirs = reference->named_buffers();
  for (size_t i = 0; i < mine.size(); ++i) {
    if (!is_floating(mine[i].second.dtype())) continue;
    EXPECT_LT((mine[i].second - theirs[i].second).abs().max().item<float>(), 1e-4) << mine[i].first;
  }
}

// Gradient accumulation: two micro-batches under no_sync, then one synchronized, equal one
// step over all three.
void scenario_no_sync() {
  manual_seed(7);
  auto model = std::make_shared<nn::Linear>(6, 10);
  DistributedDataParallel ddp(model);
  auto reference = nn::clone(model);
  Data d = make_data({6}, 24);
  const int world = world_size(), me = rank();
  const int64_t local = 8 / world;
  for (int micro = 0; micro < 3; ++micro) {
    Tensor xb = d.x.narrow(0, micro * 8, 8), yb = d.y.narrow(0, micro * 8, 8);
    Tensor loss = F::cross_entropy(ddp(xb.narrow(0, me * local, local)), yb.narrow(0, me * local, local));
    if (micro < 2) {
      auto guard = ddp.no_sync();
      loss.backward();
      EXPECT_TRUE(ddp.last_timeline().buckets.empty()) << "no_sync() communicated";
    } else {
      loss.backward();
    }
    F::cross_entropy((*reference)(xb), yb).backward();
  }
  for (size_t i = 0; i < model->parameters().size(); ++i) {
    float diff = (model->parameters()[i].grad() - reference->parameters()[i].grad()).abs().max().item<float>();
    EXPECT_LT(diff, 1e-5) << "parameter " << i;
  }
  expect_identical_across_ranks(*model, 0);
  report("no_sync ok");
}

// A parameter the forward skips: an error naming it by default; with find_unused_parameters
// the others train and the skipped one keeps no gradient.
struct Skips : nn::Module {
  Skips() {
    used = register_module("used", std::make_shared<nn::Linear>(4, 2));
    unused = register_module("unused", std::make_shared<nn::Linear>(4, 2));
  }
  Tensor forward(const Tensor& x) override { return used(x); }
  nn::ModulePtr<nn::Linear> used, unused;
};

void scenario_unused() {
  auto model = std::make_shared<Skips>();
  {
    DistributedDataParallel ddp(model);
    Tensor loss = ddp(ones({2, 4})).sum();
    try {
      loss.backward();
      ADD_FAILURE() << "no error for the unused parameter";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("'unused.weight'"));
      EXPECT_THAT(e.what(), HasSubstr("find_unused_parameters"));
      report(std::string("unused error: ") + e.what());
    }
  }
  model->zero_grad();
  DistributedDataParallel ddp(model, {.find_unused_parameters = true});
  for (int step = 0; step < 3; ++step) {
    Tensor loss = ddp(full({2, 4}, rank() + 1.0)).sum();
    loss.backward();
  }
  EXPECT_FALSE(model->unused->weight.grad().defined());
  // Each rank's gradient of used.weight is 3 steps x 2 rows x (rank + 1); the average over
  // ranks is what every rank holds.
  double mean_factor = 0;
  for (int r = 0; r < world_size(); ++r) mean_factor += (r + 1.0) / world_size();
  EXPECT_NEAR(model->used->weight.grad().narrow(0, 0, 1).sum().item<float>(),
              3 * 2 * 4 * mean_factor, 1e-4);
  report("find_unused ok");
}

void scenario_mismatch() {
  auto model = std::make_shared<nn::Linear>(4, 4 + rank());
  try {
    DistributedDataParallel ddp(model);
    ADD_FAILURE() << "no error for different parameters";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("rank 0 and rank 1 have different parameters"));
    EXPECT_THAT(e.what(), HasSubstr("weight float32[4, 4]"));
    report(std::string("mismatch error: ") + e.what());
  }
}

// Communication overlaps backward: the first bucket's all-reduce starts before the last
// gradient of the backward exists.
void scenario_overlap() {
  manual_seed(3);
  auto model = std::make_shared<nn::Sequential>();
  for (int i = 0; i < 8; ++i) {
    model->push_back(std::make_shared<nn::Linear>(256, 256));
    model->push_back(std::make_shared<nn::Tanh>());
  }
  DistributedDataParallel ddp(model, {.bucket_cap_mb = 0.3, .first_bucket_cap_mb = 0.3});
  EXPECT_GE(ddp.bucket_parameter_names().size(), 4u);
  EXPECT_EQ(ddp.bucket_parameter_names().front().front(), "14.bias") << "buckets start at the last layer";
  int overlapped = 0;
  for (int step = 0; step < 5; ++step) {
    Tensor y = ddp(randn({512, 256}));
    (y * y).mean().backward();
    BackwardTimeline t = ddp.last_timeline();
    EXPECT_EQ(t.buckets.size(), ddp.bucket_parameter_names().size());
    if (t.buckets.front().started < t.last_gradient) ++overlapped;
    EXPECT_LE(t.buckets.back().finished, t.backward_end);
  }
  // Most steps, not all: on a loaded machine the communication thread may wait for a core.
  EXPECT_GE(overlapped, 3) << "the first bucket's all-reduce did not start before backward ended";
  report("overlapped " + std::to_string(overlapped) + " of 5");
}

// A compiled forward: kiln::compile of the wrapped module, DDP around the same module. The
// gradient hooks sit on the parameters' accumulators, which the compiled backward reaches.
void scenario_compiled() {
  const int world = world_size(), me = rank();
  manual_seed(5);
  auto model = models::build(models::FashionMLPConfig{.d_in = 48, .d_hidden = 32, .d_out = 10, .dropout = 0.0});
  DistributedDataParallel ddp(model);
  auto reference = nn::clone(model);
  auto compiled = kiln::compile(model);
  optim::SGD opt(model->parameters(), {.lr = 0.05});
  optim::SGD ref_opt(reference->parameters(), {.lr = 0.05});
  Data d = make_data({48}, 256);
  const int64_t local = 32 / world;
  for (int step = 0; step < 20; ++step) {
    Tensor xb = d.x.narrow(0, (step * 32) % 224, 32), yb = d.y.narrow(0, (step * 32) % 224, 32);
    Tensor loss = F::cross_entropy(compiled(xb.narrow(0, me * local, local)), yb.narrow(0, me * local, local));
    opt.zero_grad();
    loss.backward();
    EXPECT_EQ(ddp.last_timeline().buckets.size(), ddp.bucket_parameter_names().size()) << "step " << step;
    opt.step();
    ref_opt.zero_grad();
    F::cross_entropy((*reference)(xb), yb).backward();
    ref_opt.step();
    expect_identical_across_ranks(*model, step);
  }
  float diff = max_abs_difference(*model, *reference);
  EXPECT_LT(diff, 1e-4);
  report("compiled max weight difference " + std::to_string(diff));
}

// Faults. The surviving rank checks its error and reports it; SIGTERM from the launcher is
// ignored so that the check finishes (the launcher's SIGKILL after the grace ends it anyway).
void scenario_killed_peer() {
  std::signal(SIGTERM, SIG_IGN);
  Tensor t = ones({1000});
  for (int step = 0; step < 1000; ++step) {
    if (rank() == 1 && step == 5) raise(SIGKILL);
    try {
      all_reduce(t);
    } catch (const Error& e) {
      report(std::string("error at step ") + std::to_string(step) + ": " + e.what());
      std::_Exit(0);
    }
    t.fill_(1);
  }
  report("no error");
}

void scenario_hung_peer() {
  Tensor t = ones({10});
  if (rank() == 1) {
    std::this_thread::sleep_for(4s);  // alive, but never calls the collective
    std::_Exit(0);
  }
  auto start = std::chrono::steady_clock::now();
  try {
    all_reduce(t, ReduceOp::Sum, {.timeout = 1000ms});
    report("no error");
  } catch (const Error& e) {
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    report("error after " + std::to_string(s) + " s: " + e.what());
  }
  std::_Exit(0);
}

// On the nccl group (the fake NCCL between processes, tests/cuda/fake_driver): the model, the
// data and every collective on the GPU.
void scenario_nccl_mlp() {
  models::FashionMLPConfig config{.d_in = 48, .d_hidden = 32, .d_out = 10, .dropout = 0.0};
  manual_seed(100 + rank());
  auto model = models::build(config);
  model->to(kCUDA);
  Data data = make_data({48}, 256);
  train_against_single_process(model, Data{data.x.to(kCUDA), data.y.to(kCUDA)}, 32, 150, false);
}

void scenario_nccl_killed_peer() {
  std::signal(SIGTERM, SIG_IGN);
  Tensor t = ones({1000}, TensorOptions().with_device(kCUDA));
  for (int step = 0; step < 1000; ++step) {
    if (rank() == 1 && step == 5) raise(SIGKILL);
    try {
      all_reduce(t);
      t.fill_(1);
    } catch (const Error& e) {
      report(std::string("error at step ") + std::to_string(step) + ": " + e.what());
      std::_Exit(0);
    }
  }
  report("no error");
}

const std::map<std::string, std::function<void()>>& scenarios() {
  static const std::map<std::string, std::function<void()>> all = {
      {"mlp", scenario_mlp},           {"bn_cnn", scenario_bn_cnn},         {"no_sync", scenario_no_sync},
      {"unused", scenario_unused},     {"mismatch", scenario_mismatch},     {"overlap", scenario_overlap},
      {"killed", scenario_killed_peer}, {"hung", scenario_hung_peer},     {"compiled", scenario_compiled},
      {"sync_bn", scenario_sync_bn},   {"nccl_mlp", scenario_nccl_mlp}, {"nccl_killed", scenario_nccl_killed_peer},
  };
  return all;
}

TEST(DistributedWorker, Run) {
  const char* name = std::getenv("KILN_TEST_WORKER");
  if (!name) GTEST_SKIP() << "a rank of the jobs the DistributedJob tests start";
  if (std::string(name) == "never_joins") {
    // Rank 1 leaves before meeting; rank 0 must name it at the deadline.
    if (std::atoi(std::getenv("KILN_RANK")) == 1) std::_Exit(0);
    try {
      init();
      report("no error");
    } catch (const Error& e) {
      std::ofstream(std::string(std::getenv("KILN_TEST_OUT")) + "/rank0.txt") << e.what() << "\n";
    }
    return;
  }
  init({.backend = std::string(name).rfind("nccl_", 0) == 0 ? "nccl" : "gloo"});
  scenarios().at(name)();
  destroy();
}

// ---- the test side: starts the jobs ----

struct JobResult {
  LaunchResult launch;
  std::vector<std::string> reports;  // per rank
};

JobResult run_job(const std::string& scenario, int nproc, int timeout_ms = 30000) {
  static int job = 0;
  std::string out = testing::TempDir() + "kiln_ddp_" + std::to_string(getpid()) + "_" + std::to_string(job++);
  std::filesystem::remove_all(out);
  std::filesystem::create_directories(out);
  LaunchOptions o;
  o.command = {std::filesystem::read_symlink("/proc/self/exe").string(), "--gtest_filter=DistributedWorker.Run",
               "--gtest_brief=1"};
  o.nproc_per_node = nproc;
  o.env = {{"KILN_TEST_WORKER", scenario}, {"KILN_TEST_OUT", out},
           {"KILN_DIST_TIMEOUT_MS", std::to_string(timeout_ms)}, {"KILN_NUM_THREADS", "1"}};
  o.grace = 3s;
  JobResult result;
  result.launch = launch(o);
  for (int r = 0; r < nproc; ++r) {
    std::ifstream in(out + "/rank" + std::to_string(r) + ".txt");
    result.reports.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::filesystem::remove_all(out);
  return result;
}

class DistributedJob : public testing::TestWithParam<int> {};

TEST_P(DistributedJob, FashionMLPMatchesOneProcessWithTheGlobalBatch) {
  JobResult r = run_job("mlp", GetParam());
  ASSERT_EQ(r.launch.exit_code, 0) << r.launch.message;
  EXPECT_THAT(r.reports[0], HasSubstr("max weight difference"));
  std::cout << "rank 0 measured:\n" << r.reports[0];
}

TEST_P(DistributedJob, BatchNormCNNMatchesOneProcessWithGhostBatches) {
  JobResult r = run_job("bn_cnn", GetParam());
  ASSERT_EQ(r.launch.exit_code, 0) << r.launch.message;
  std::cout << "rank 0 measured:\n" << r.reports[0];
}

TEST_P(DistributedJob, SyncBatchNormCNNMatchesOneProcessWithTheGlobalBatch) {
  JobResult r = run_job("sync_bn", GetParam());
  ASSERT_EQ(r.launch.exit_code, 0) << r.launch.message;
  std::cout << "rank 0 measured:\n" << r.reports[0];
}

INSTANTIATE_TEST_SUITE_P(Ranks, DistributedJob, testing::Values(2, 4));

TEST(DistributedDataParallel, NoSyncAccumulatesLocally) {
  JobResult r = run_job("no_sync", 2);
  ASSERT_EQ(r.launch.exit_code, 0) << r.launch.message;
  EXPECT_THAT(r.reports[1], HasSubstr("no_sync ok"));
}

TEST(DistributedDataParallel, UnusedParametersAreNamedOrFound) {
  JobResult r = run_job("unused", 2);
  ASSERT_EQ(r.launch.exit_code, 0) << r.launch.message;
  EXPECT_THAT(r.reports[0], HasSubstr("find_unused ok"));
}

TEST(DistributedDataParallel, DifferentModelsAreAnErrorNamingTheParameter) {
  JobResult r = run_job("mismatch", 2);
  ASSERT_EQ(r.launch.exit_code, 0) << r.launch.message;
  EXPECT_THAT(r.reports[0], HasSubstr("mismatch error"));
  EXPECT_THAT(r.reports[1], HasSubstr("mismatch error"));
}

TEST(DistributedDataParallel, BucketAllReduceStartsBeforeBackwardEnds) {
  JobResult r = run_job("overlap", 2);
  ASSERT_EQ(r.launch.exit_code, 0) << r.launch.message;
  std::cout << r.reports[0];
}

TEST(DistributedDataParallel, ACompiledForwardIsAveragedToo) {
  JobResult r = run_job("compiled", 2);
  ASSERT_EQ(r.launch.exit_code, 0) << r.launch.message;
  EXPECT_THAT(r.reports[0], HasSubstr("compiled max weight difference"));
}

TEST(DistributedFaults, AKilledRankIsNamedToTheSurvivor) {
  auto start = std::chrono::steady_clock::now();
  JobResult r = run_job("killed", 2);
  EXPECT_NE(r.launch.exit_code, 0);
  EXPECT_EQ(r.launch.first_failed_rank, 1);
  EXPECT_THAT(r.launch.message, HasSubstr("rank 1"));
  EXPECT_THAT(r.reports[0], testing::AllOf(HasSubstr("error at step 5"), HasSubstr("all_reduce"),
                                           HasSubstr("rank 1 closed its connection")));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
}

TEST(DistributedFaults, AHungRankTimesOutTheCollective) {
  JobResult r = run_job("hung", 2);
  EXPECT_EQ(r.launch.exit_code, 0) << r.launch.message;
  EXPECT_THAT(r.reports[0], testing::AllOf(HasSubstr("error after 1."), HasSubstr("all_reduce"),
                                           HasSubstr("within 1000 ms"),
                                           HasSubstr("rank 1 is not inside any collective")));
}

TEST(DistributedFaults, ARankThatNeverJoinsIsNamed) {
  JobResult r = run_job("never_joins", 2, 1500);
  EXPECT_EQ(r.launch.exit_code, 0) << r.launch.message;
  EXPECT_THAT(r.reports[0], testing::AllOf(HasSubstr("rank 1 never joined"), HasSubstr("1500 ms")));
}

// Jobs on the nccl backend: on the fake driver and NCCL (ctest's cuda_on_fake_driver) every
// process is a rank with "its own GPU"; a GPU machine has one GPU, and NCCL one rank per GPU.
#define REQUIRE_FAKE_NCCL()                                                                    \
  do {                                                                                         \
    if (!cuda::on_fake_driver() || !cuda::nccl::available())                                   \
      GTEST_SKIP() << "runs on the fake driver and NCCL (ctest cuda_on_fake_driver); one GPU " \
                      "holds one NCCL rank";                                                   \
  } while (0)

TEST(CudaNcclJob, FashionMLPOnTheGpuMatchesOneProcessWithTheGlobalBatch) {
  REQUIRE_FAKE_NCCL();
  JobResult r = run_job("nccl_mlp", 2, 60000);
  ASSERT_EQ(r.launch.exit_code, 0) << r.launch.message;
  EXPECT_THAT(r.reports[0], HasSubstr("max weight difference"));
  std::cout << "rank 0 measured:\n" << r.reports[0];
}

TEST(CudaNcclJob, AKilledRankIsNamedToTheSurvivor) {
  REQUIRE_FAKE_NCCL();
  auto start = std::chrono::steady_clock::now();
  JobResult r = run_job("nccl_killed", 2, 10000);
  EXPECT_NE(r.launch.exit_code, 0);
  EXPECT_EQ(r.launch.first_failed_rank, 1);
  EXPECT_THAT(r.reports[0], testing::AllOf(HasSubstr("error at step 5"), HasSubstr("all_reduce"),
                                           HasSubstr("(nccl, cuda:0)"), HasSubstr("the process of rank 1 has ended")));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
}

}  // namespace
}  // namespace kiln::distributed
