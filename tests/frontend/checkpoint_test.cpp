// kiln::save / kiln::load / load_checkpoint / save_training / load_training: round trips of
// models, metadata, configs and optimizer state; bit-exact training resume; tied weights;
// files written by PyTorch (and a file for PyTorch to read); every refusal (reserved keys,
// newer or malformed format entries, the wrong kind of file, symbolic tensors) and that a
// refused save leaves the file system untouched.
#include "kiln/serialize/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/version.h"
#include "test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using nn::Linear;
using nn::Module;
using nn::ModulePtr;
using nn::NamedTensors;
using Bytes = std::vector<uint8_t>;

std::string test_data(const std::string& rel) {
  const char* dir = std::getenv("KILN_TEST_DATA");
  return std::string(dir ? dir : "tests/data") + "/" + rel;
}

Bytes read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::vector<std::string> keys(const NamedTensors& named) {
  std::vector<std::string> out;
  for (const auto& [k, v] : named) out.push_back(k);
  return out;
}

// The bytes of a tensor: bit-exact comparisons (NaN-safe, -0.0 distinct).
Bytes bytes_of(const Tensor& t) {
  Tensor c = t.contiguous();
  Bytes out(c.nbytes());
  if (!out.empty()) std::memcpy(out.data(), c.raw_data(), out.size());
  return out;
}

void expect_same_state(const NamedTensors& a, const NamedTensors& b) {
  ASSERT_EQ(keys(a), keys(b));
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].second.dtype(), b[i].second.dtype()) << a[i].first;
    EXPECT_EQ(a[i].second.shape(), b[i].second.shape()) << a[i].first;
    EXPECT_EQ(bytes_of(a[i].second), bytes_of(b[i].second)) << a[i].first;
  }
}

NamedTensors as_named(const optim::OptimizerStateDict& sd) {
  return NamedTensors(sd.begin(), sd.end());
}

// ---- models ----

struct Net : Module {
  ModulePtr<Linear> fc1 = register_module("fc1", std::make_shared<Linear>(4, 8));
  ModulePtr<nn::BatchNorm1d> bn = register_module("bn", std::make_shared<nn::BatchNorm1d>(8));
  ModulePtr<Linear> fc2 = register_module("fc2", std::make_shared<Linear>(8, 3));
  Tensor forward(const Tensor& x) override { return fc2(bn(fc1(x)).relu()); }
};

struct OtherNet : Module {  // fc1 has other sizes
  ModulePtr<Linear> fc1 = register_module("fc1", std::make_shared<Linear>(4, 5));
  ModulePtr<nn::BatchNorm1d> bn = register_module("bn", std::make_shared<nn::BatchNorm1d>(8));
  ModulePtr<Linear> fc2 = register_module("fc2", std::make_shared<Linear>(8, 3));
};

struct TiedHead : Module {
  Tensor weight;
  explicit TiedHead(Tensor w) { weight = register_parameter("weight", std::move(w)); }
};

struct TiedLm : Module {
  ModulePtr<nn::Embedding> emb = register_module("emb", std::make_shared<nn::Embedding>(5, 4));
  ModulePtr<TiedHead> head = register_module("head", std::make_shared<TiedHead>(emb->weight));
};

// A parameter that stands for a value not computed yet (what a lazy layer holds before its
// first call): no storage.
Tensor symbolic_tensor(Shape sizes) {
  auto impl = std::make_shared<TensorImpl>();
  impl->strides = Shape(sizes.size(), 1);
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 2; d >= 0; --d)
    impl->strides[d] = impl->strides[d + 1] * sizes[d + 1];
  impl->sizes = std::move(sizes);
  impl->symbolic = std::make_shared<SymbolicInfo>();
  return Tensor(std::move(impl));
}

struct Unbuilt : Module {
  ModulePtr<Linear> fc = register_module("fc", std::make_shared<Linear>(2, 2));
  Tensor w = register_parameter("w", symbolic_tensor({3, 4}));
};

// Deterministic training data for step `step`.
Tensor batch(int step) {
  Generator g(1000 + step);
  return randn({6, 4}, {}, &g);
}
Tensor target(int step) {
  Generator g(2000 + step);
  return randn({6, 3}, {}, &g);
}

void train(Module& model, optim::Optimizer& opt, int from, int to) {
  for (int step = from; step < to; ++step) {
    Tensor loss = nn::functional::mse_loss(model(batch(step)), target(step));
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ = fs::temp_directory_path() /
           ("kiln_checkpoint_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  size_t files_in_dir() const {
    return static_cast<size_t>(std::distance(fs::directory_iterator(dir_), {}));
  }
  // A file whose "__metadata__" has "kiln" = `kiln_entry`.
  std::string with_kiln_entry(const std::string& name, const std::string& kiln_entry) {
    std::string p = path(name);
    save_safetensors(p, {{"w", zeros({2})}}, {{"kiln", kiln_entry}});
    return p;
  }
  fs::path dir_;
};

// ---- models ----

TEST_F(CheckpointTest, RoundTripIntoAFreshModelGivesIdenticalOutputs) {
  manual_seed(3);
  Net a;
  a(randn({16, 4}) * 2);  // training mode: the running statistics move
  a.eval();
  save(a, path("net.safetensors"));

  Net b;
  b.eval();
  Tensor x = randn({5, 4});
  EXPECT_NE(a(x).to_vector<float>(), b(x).to_vector<float>());
  nn::LoadStateDictResult r = load(b, path("net.safetensors"));
  EXPECT_TRUE(r.missing_keys.empty() && r.unexpected_keys.empty());
  EXPECT_EQ(bytes_of(a(x)), bytes_of(b(x)));
  expect_same_state(a.state_dict(), b.state_dict());
  EXPECT_EQ(b.bn->num_batches_tracked.item<int64_t>(), 1);
}

TEST_F(CheckpointTest, WriterAndReaderFunctionsCarryTheSameBytesAsAFile) {
  manual_seed(4);
  Net a;
  a(randn({8, 4}));
  json::Value config = json::Object{};
  config["width"] = 8;
  // A writer that takes at most 1000 bytes a call, as a socket might.
  Bytes written;
  save(a, [&](const void* data, size_t n) {
    const size_t take = std::min<size_t>(n, 1000);
    written.insert(written.end(), static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + take);
    return take;
  }, config);
  save(a, path("net.safetensors"), config);
  EXPECT_EQ(written, read_file(path("net.safetensors")));
  // A reader that gives at most 777 bytes a call.
  auto reader = [&](const Bytes& bytes) {
    return [&bytes](uint64_t at, void* buffer, size_t n) {
      const size_t give = std::min<size_t>(n, 777);
      std::memcpy(buffer, bytes.data() + at, give);
      return give;
    };
  };
  Net b;
  load(b, reader(written), written.size());
  expect_same_state(a.state_dict(), b.state_dict());

  expect_error([&] { save(a, [](const void*, size_t) { return size_t{0}; }); },
               {"[kiln::save] the writer took 0 of the", "Fix: return how many bytes it wrote"});
  expect_error([&] { load(b, [](uint64_t, void*, size_t) { return size_t{0}; }, written.size()); },
               {"[kiln::load] the reader gave 0 bytes at position 0 of"});
  Bytes damaged = written;
  damaged.back() ^= 1;
  expect_error([&] { load(b, reader(damaged), damaged.size()); },
               {"'<reader>'", "does not match the digest saved with it"});
  expect_error([&] { load(b, reader(written), 16); }, {"<reader>"});
}

TEST_F(CheckpointTest, MetadataAndConfigRoundTrip) {
  Net net;
  json::Value config = json::Object{};
  config["hidden"] = 8;
  config["activation"] = "relu";
  config["dims"] = json::Array{4, 8, 3};
  config["momentum"] = 0.1;
  config["extra"] = json::Object{{"none", nullptr}, {"flag", true}, {"name", "h\u00e9"}};
  std::map<std::string, std::string> extra = {{"epoch", "3"}, {"note", "\u00fcn\u00ef"}};
  save(net, path("net.safetensors"), config, extra);

  Checkpoint ck = load_checkpoint(path("net.safetensors"));
  EXPECT_EQ(ck.format_version, 1);
  EXPECT_EQ(ck.kiln_version, std::string(kVersion));
  EXPECT_EQ(ck.kiln_version, KILN_VERSION_STRING);
  EXPECT_EQ(ck.contents, "model");
  EXPECT_EQ(ck.optimizer, "");
  EXPECT_EQ(ck.config, config);
  EXPECT_EQ(ck.metadata, (std::map<std::string, std::string>{
                             {"epoch", "3"}, {"format", "pt"}, {"note", "\u00fcn\u00ef"}}));
  EXPECT_EQ(keys(ck.tensors), keys(net.state_dict()));
  ASSERT_NE(ck.find("bn.num_batches_tracked"), nullptr);
  EXPECT_EQ(ck.find("bn.num_batches_tracked")->dtype(), kInt64);
  EXPECT_EQ(ck.find("nope"), nullptr);

  // The raw entries, as any safetensors reader sees them.
  SafetensorsFile raw = load_safetensors(path("net.safetensors"));
  EXPECT_EQ(raw.metadata.at("format"), "pt");
  json::Value info = json::parse(raw.metadata.at("kiln"));
  EXPECT_EQ(*info.find("format_version"), json::Value(1));
  EXPECT_EQ(*info.find("kiln_version"), json::Value(kVersion));
  EXPECT_EQ(*info.find("contents"), json::Value("model"));
  EXPECT_EQ(*info.find("config"), config);
}

TEST_F(CheckpointTest, WithoutConfigTheConfigIsNull) {
  Net net;
  save(net, path("net.safetensors"));
  Checkpoint ck = load_checkpoint(path("net.safetensors"));
  EXPECT_TRUE(ck.config.is_null());
  EXPECT_EQ(ck.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
}

TEST_F(CheckpointTest, SavesNamedTensors) {
  Net a, b;
  save(a.state_dict(), path("sd.safetensors"), json::Value("cfg"));
  Checkpoint ck = load_checkpoint(path("sd.safetensors"));
  EXPECT_EQ(ck.contents, "tensors");
  EXPECT_EQ(ck.config, json::Value("cfg"));
  load(b, path("sd.safetensors"));
  expect_same_state(a.state_dict(), b.state_dict());
}

TEST_F(CheckpointTest, NonStrictLoadReturnsTheKeys) {
  Net net;
  save({{"fc1.weight", zeros({8, 4})}, {"head.bias", zeros({2})}}, path("part.safetensors"));
  nn::LoadStateDictResult r = load(net, path("part.safetensors"), /*strict=*/false);
  EXPECT_EQ(r.unexpected_keys, (std::vector<std::string>{"head.bias"}));
  EXPECT_EQ(r.missing_keys.size(), net.state_dict().size() - 1);
  EXPECT_EQ(net.fc1->weight.to_vector<float>(), std::vector<float>(32, 0.f));
}

TEST_F(CheckpointTest, LoadErrorsNameTheFile) {
  Net net;
  save(net, path("net.safetensors"));
  OtherNet other;
  expect_error([&] { load(other, path("net.safetensors")); },
               {"[kiln::load] loading '" + path("net.safetensors") + "'", "[load_state_dict]",
                "shape mismatch for \"fc1.weight\": the model has [5, 4], the state dict [8, 4]",
                "nothing was loaded"});
  expect_error([&] { load(net, path("missing.safetensors")); }, {path("missing.safetensors")});
}

TEST_F(CheckpointTest, ReservedMetadataKeysAndBadConfigsWriteNothing) {
  Net net;
  expect_error(
      [&] {
        save(net, path("a.safetensors"), {}, {{"kiln", "x"}});
      },
      {"[kiln::save] the metadata key \"kiln\" is reserved", "Fix: use another key"});
  expect_error(
      [&] {
        save(net, path("a.safetensors"), {}, {{"format", "np"}});
      },
      {"the metadata key \"format\" is reserved"});
  json::Value nan_config = json::Object{{"lr", std::nan("")}};
  expect_error([&] { save(net, path("a.safetensors"), nan_config); },
               {"[kiln::save] the config cannot be stored as JSON", "Fix:"});
  EXPECT_EQ(files_in_dir(), 0u);
}

// ---- tied weights ----

TEST_F(CheckpointTest, TiedWeightsAreStoredUnderBothPathsAndStayTied) {
  manual_seed(5);
  TiedLm a;
  save(a, path("lm.safetensors"));
  SafetensorsFile raw = load_safetensors(path("lm.safetensors"));
  ASSERT_EQ(raw.tensors.size(), 2u);  // each path has its own bytes, as PyTorch needs
  EXPECT_EQ(bytes_of(*raw.find("emb.weight")), bytes_of(a.emb->weight));
  EXPECT_EQ(bytes_of(*raw.find("head.weight")), bytes_of(a.emb->weight));

  TiedLm b;
  load(b, path("lm.safetensors"));
  EXPECT_TRUE(b.emb->weight.is_same(b.head->weight));
  EXPECT_EQ(bytes_of(b.head->weight), bytes_of(a.emb->weight));
  {
    NoGradGuard g;
    b.head->weight.fill_(-1);
  }
  EXPECT_EQ(b.emb->weight.to_vector<float>(), std::vector<float>(20, -1.f));
}

// ---- files from elsewhere ----

TEST_F(CheckpointTest, ReadsAPlainSafetensorsFile) {
  Net a, b;
  save_safetensors(path("plain.safetensors"), a.state_dict());
  Checkpoint ck = load_checkpoint(path("plain.safetensors"));
  EXPECT_EQ(ck.format_version, 0);
  EXPECT_EQ(ck.kiln_version, "");
  EXPECT_EQ(ck.contents, "");
  EXPECT_TRUE(ck.config.is_null());
  EXPECT_TRUE(ck.metadata.empty());
  load(b, path("plain.safetensors"));
  expect_same_state(a.state_dict(), b.state_dict());

  Checkpoint numpy = load_checkpoint(test_data("safetensors/reference_numpy.safetensors"));
  EXPECT_EQ(numpy.format_version, 0);
  EXPECT_EQ(numpy.metadata.at("framework"), "numpy");
  EXPECT_EQ(numpy.tensors.size(), 10u);
}

// kiln's equivalent of nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.ReLU(),
// nn.Linear(3, 2)).
std::shared_ptr<nn::Sequential> torch_mlp() {
  return std::make_shared<nn::Sequential>(
      std::make_shared<Linear>(4, 3), std::make_shared<nn::BatchNorm1d>(3),
      std::make_shared<nn::ReLU>(), std::make_shared<Linear>(3, 2));
}

TEST_F(CheckpointTest, LoadsModuleWrittenByPyTorch) {
  // tests/data/checkpoint/make_checkpoint.py wrote these with torch + safetensors.
  std::string model_file = test_data("checkpoint/torch_mlp.safetensors");
  Checkpoint ck = load_checkpoint(model_file);
  EXPECT_EQ(ck.format_version, 0);
  EXPECT_TRUE(ck.config.is_null());
  EXPECT_EQ(ck.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));

  auto model = torch_mlp();
  nn::LoadStateDictResult r = load(*model, model_file);
  EXPECT_TRUE(r.missing_keys.empty() && r.unexpected_keys.empty());
  EXPECT_EQ(model->find_child("1")->find_buffer("num_batches_tracked")->item<int64_t>(), 3);
  model->eval();
  Checkpoint io = load_checkpoint(test_data("checkpoint/torch_mlp_io.safetensors"));
  Tensor out = (*model)(*io.find("input"));
  std::vector<float> got = out.to_vector<float>();
  std::vector<float> want = io.find("output")->to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  ASSERT_EQ(out.shape(), (Shape{5, 2}));
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
}

// Writes what tests/data/checkpoint/read_kiln_checkpoint.py checks with PyTorch's reader
// (into $KILN_CHECKPOINT_OUT when set): the model above, trained a little, and its output.
TEST_F(CheckpointTest, WritesCheckpointForPyTorch) {
  std::string out_dir = dir_.string();
  if (const char* out = std::getenv("KILN_CHECKPOINT_OUT")) out_dir = out;
  manual_seed(11);
  auto model = torch_mlp();
  (*model)(randn({8, 4}) * 2 + 0.5);
  (*model)(randn({8, 4}) * 2 + 0.5);
  {
    NoGradGuard g;  // affine parameters away from (1, 0)
    auto bn = model->at<nn::BatchNorm1d>(1);
    bn->weight.copy_(rand({3}) + 0.5);
    bn->bias.copy_(randn({3}) * 0.5);
  }
  model->eval();
  Tensor x = randn({5, 4});
  Tensor y = (*model)(x);
  json::Value config = json::Object{{"layers", json::Array{4, 3, 2}}, {"norm", "batch"}};
  std::string model_file = out_dir + "/kiln_model.safetensors";
  save(*model, model_file, config, {{"written_by", "CheckpointTest.WritesCheckpointForPyTorch"}});
  save({{"input", x}, {"output", y}}, out_dir + "/kiln_io.safetensors");

  auto back = torch_mlp();
  load(*back, model_file);
  back->eval();
  EXPECT_EQ(bytes_of((*back)(x)), bytes_of(y));
  EXPECT_EQ(load_checkpoint(model_file).config, config);
}

// ---- format entry ----

// Each tensor's SHA-256 (with its dtype and shape) is stored at save and checked at load.
TEST_F(CheckpointTest, AFlippedBitOrARelabelledDtypeIsRefusedNamingTheTensor) {
  manual_seed(1);
  Net net;
  const std::string good = path("net.safetensors");
  save(net, good);
  EXPECT_EQ(load_checkpoint(good).tensor_sha256.size(), net.state_dict().size());
  Bytes bytes = read_file(good);
  auto write = [&](const std::string& name, const Bytes& b) {
    std::ofstream(path(name), std::ios::binary)
        .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    return path(name);
  };
  // The last byte belongs to the last tensor's data.
  Bytes flipped = bytes;
  flipped.back() ^= 0x10;
  std::string p = write("flipped.safetensors", flipped);
  expect_error([&] { load_checkpoint(p); }, {"[load_checkpoint] '" + p + "'", "the tensor '",
                                             "does not match the digest", "damaged or edited"});
  Net into;
  expect_error([&] { load(into, p); }, {"does not match the digest"});
  // The header says I32 instead of F32 (same length, the bytes unchanged).
  uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data(), 8);
  std::string header(bytes.begin() + 8,
                     bytes.begin() + 8 + static_cast<std::ptrdiff_t>(header_size));
  Bytes relabelled = bytes;
  const size_t at = header.find("\"F32\"");
  ASSERT_NE(at, std::string::npos);
  relabelled[8 + at + 1] = 'I';
  p = write("relabelled.safetensors", relabelled);
  expect_error([&] { load_checkpoint(p); }, {"(int32[", "does not match the digest"});
}

TEST_F(CheckpointTest, CheckFiniteNamesTheFirstNonFiniteWeight) {
  manual_seed(1);
  Net net;
  EXPECT_NO_THROW(nn::check_finite(net));
  {
    NoGradGuard no_grad;
    Tensor w = net.named_parameters().back().second;
    w.view({-1}).narrow(0, 1, 2).fill_(std::numeric_limits<double>::quiet_NaN());
  }
  const std::string name = net.named_parameters().back().first;
  expect_error([&] { nn::check_finite(net); },
               {"[check_finite] the parameter '" + name + "'", "holds 2 non-finite values",
                "first at flat index 1", "Fix:"});
}

TEST_F(CheckpointTest, FilesWithoutDigestsStillLoad) {
  // Written by PyTorch, another tool or an older kiln: nothing to verify against.
  std::string p =
      with_kiln_entry("old.safetensors", R"({"format_version":1,"kiln_version":"0.1.0"})");
  EXPECT_TRUE(load_checkpoint(p).tensor_sha256.empty());
  EXPECT_EQ(load_checkpoint(p).tensors.size(), 1u);
}

TEST_F(CheckpointTest, RefusesANewerFormat) {
  std::string p =
      with_kiln_entry("new.safetensors", R"({"format_version":2,"kiln_version":"9.1.0"})");
  expect_error([&] { load_checkpoint(p); },
               {"[load_checkpoint] '" + p + "'", "format version 2 (written by kiln 9.1.0)",
                "reads format versions up to 1", "Fix: read it with kiln 9.1.0 or later"});
  Net net;
  expect_error([&] { load(net, p); }, {"format version 2"});
}

TEST_F(CheckpointTest, RefusesAMalformedFormatEntry) {
  struct Case {
    std::string entry;
    std::string message;
  };
  std::vector<Case> cases = {
      {"{format_version: 1}", "the \"kiln\" metadata entry is not valid JSON"},
      {"[1]", "expected the \"kiln\" metadata entry to be a JSON object, got JSON array"},
      {R"({"kiln_version":"0.1.0"})",
       "expected \"format_version\" in the \"kiln\" metadata entry to be an integer >= 1, got "
       "nothing (the field is absent)"},
      {R"({"format_version":"1","kiln_version":"0.1.0"})", "got string \"1\""},
      {R"({"format_version":0,"kiln_version":"0.1.0"})", "got integer 0"},
      {R"({"format_version":1.0,"kiln_version":"0.1.0"})", "got number 1"},
      {R"({"format_version":1})",
       "expected \"kiln_version\" in the \"kiln\" metadata entry to be a string, got nothing"},
      {R"({"format_version":1,"kiln_version":"0.1.0","contents":"weights"})",
       "expected \"contents\" in the \"kiln\" metadata entry to be \"model\", \"tensors\", "
       "\"optimizer\" or \"training\", got string \"weights\""},
      {R"({"format_version":1,"kiln_version":"0.1.0","optimizer":3})",
       "expected \"optimizer\" in the \"kiln\" metadata entry to be a string, got integer 3"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].entry);
    std::string p = with_kiln_entry("bad" + std::to_string(i) + ".safetensors", cases[i].entry);
    expect_error([&] { load_checkpoint(p); },
                 {"[load_checkpoint] '" + p + "'", cases[i].message,
                  "Fix: the file is damaged or was written by another tool"});
  }
  // Unknown members are ignored (room for additions within format 1); config may be absent.
  std::string p = with_kiln_entry("ok.safetensors",
                                  R"({"format_version":1,"kiln_version":"0.1.0","later":[1]})");
  Checkpoint ck = load_checkpoint(p);
  EXPECT_EQ(ck.format_version, 1);
  EXPECT_TRUE(ck.config.is_null());
}

// ---- a model that is not built ----

TEST_F(CheckpointTest, SavingAnUnbuiltModelTouchesNoFile) {
  Unbuilt model;
  std::string p = path("unbuilt.safetensors");
  expect_error([&] { save(model, p); }, {"tensor \"w\" is symbolic", "has no data"});
  EXPECT_FALSE(fs::exists(p));
  EXPECT_EQ(files_in_dir(), 0u);  // no temporary file either

  // An existing checkpoint stays as it was.
  Net net;
  optim::Adam opt(net.parameters());
  save(net, p);
  Bytes before = read_file(p);
  expect_error([&] { save(model, p); }, {"symbolic"});
  optim::Adam model_opt(model.fc->parameters());
  expect_error([&] { save_training(p, model, model_opt); }, {"tensor \"model.w\" is symbolic"});
  EXPECT_EQ(read_file(p), before);
  EXPECT_EQ(files_in_dir(), 1u);
}

// ---- optimizer state ----

TEST_F(CheckpointTest, OptimizerStateRoundTrip) {
  manual_seed(8);
  Net net;
  optim::Adam opt(net.parameters(), {.lr = 0.02, .betas = {0.8, 0.95}, .amsgrad = true});
  train(net, opt, 0, 3);
  save(opt, path("opt.safetensors"));
  Checkpoint ck = load_checkpoint(path("opt.safetensors"));
  EXPECT_EQ(ck.contents, "optimizer");
  EXPECT_EQ(ck.optimizer, "Adam");

  optim::Adam fresh(net.parameters(), {.lr = 1.0});
  load(fresh, path("opt.safetensors"));
  expect_same_state(as_named(fresh.state_dict()), as_named(opt.state_dict()));
  EXPECT_EQ(fresh.lr(0), 0.02);
  EXPECT_EQ(fresh.param_groups()[0].options.betas.first, 0.8);
  EXPECT_TRUE(fresh.param_groups()[0].options.amsgrad);
  ASSERT_NE(fresh.state(net.fc1->weight), nullptr);
  EXPECT_EQ(fresh.state(net.fc1->weight)->step, 3);
}

TEST_F(CheckpointTest, OptimizerLoadRefusesOtherOptimizersAndModelFiles) {
  Net net;
  optim::Adam adam(net.parameters());
  train(net, adam, 0, 1);
  save(adam, path("adam.safetensors"));
  optim::SGD sgd(net.parameters(), {.lr = 0.1});
  expect_error([&] { load(sgd, path("adam.safetensors")); },
               {"holds the state of the optimizer Adam, but it is being loaded into the "
                "optimizer SGD",
                "Fix: build the Adam"});
  save(net, path("net.safetensors"));
  expect_error([&] { load(adam, path("net.safetensors")); },
               {"holds model tensors (contents \"model\"), not optimizer state"});
  expect_error(
      [&] { load(net, path("adam.safetensors")); },
      {"holds the state of the optimizer Adam, not a model", "kiln::load(optimizer, path)"});
  // An optimizer over other parameter groups: Optimizer::load_state_dict's own check.
  optim::Adam partial(net.fc1->parameters());
  expect_error(
      [&] { load(partial, path("adam.safetensors")); },
      {"[kiln::load] loading '" + path("adam.safetensors") + "'", "[Adam.load_state_dict]"});
}

// ---- training checkpoints ----

TEST_F(CheckpointTest, ResumingTrainingIsBitExact) {
  manual_seed(21);
  Net uninterrupted;
  optim::Adam opt_u(uninterrupted.parameters(), {.lr = 0.01});
  Net resumed_from;
  resumed_from.load_state_dict(uninterrupted.state_dict());
  optim::Adam opt_r(resumed_from.parameters(), {.lr = 0.01});

  train(uninterrupted, opt_u, 0, 6);
  train(resumed_from, opt_r, 0, 3);
  json::Value config = json::Object{{"lr", 0.01}};
  save_training(path("train.safetensors"), resumed_from, opt_r, config, {{"step", "3"}});
  NamedTensors halfway = resumed_from.state_dict();
  for (auto& [k, t] : halfway) t = t.clone();

  // A new process: other initial weights, other options, no optimizer state.
  manual_seed(99);
  Net restarted;
  optim::Adam opt_s(restarted.parameters(), {.lr = 0.5});
  CheckpointInfo info = load_training(path("train.safetensors"), restarted, opt_s);
  EXPECT_EQ(info.contents, "training");
  EXPECT_EQ(info.optimizer, "Adam");
  EXPECT_EQ(info.config, config);
  EXPECT_EQ(info.metadata.at("step"), "3");
  EXPECT_EQ(opt_s.lr(0), 0.01);
  train(restarted, opt_s, 3, 6);

  expect_same_state(restarted.state_dict(), uninterrupted.state_dict());
  expect_same_state(as_named(opt_s.state_dict()), as_named(opt_u.state_dict()));
  // The comparison has teeth: the last three steps changed the weights.
  EXPECT_NE(bytes_of(halfway[0].second), bytes_of(uninterrupted.fc1->weight));
}

TEST_F(CheckpointTest, TrainingFileLayout) {
  Net net;
  optim::Adam opt(net.parameters());
  train(net, opt, 0, 1);
  save_training(path("train.safetensors"), net, opt);
  Checkpoint ck = load_checkpoint(path("train.safetensors"));
  std::vector<std::string> names = keys(ck.tensors);
  std::vector<std::string> model_keys;
  for (const auto& k : keys(net.state_dict())) model_keys.push_back("model." + k);
  ASSERT_GT(names.size(), model_keys.size());
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + model_keys.size()), model_keys);
  for (size_t i = model_keys.size(); i < names.size(); ++i)
    EXPECT_EQ(names[i].rfind("optimizer.", 0), 0u) << names[i];
  EXPECT_NE(ck.find("optimizer.state.0.exp_avg"), nullptr);
  EXPECT_NE(ck.find("optimizer.param_groups.0.lr"), nullptr);

  // Either half loads on its own.
  Net model_only;
  load(model_only, path("train.safetensors"));
  expect_same_state(model_only.state_dict(), net.state_dict());
  optim::Adam opt_only(net.parameters());
  load(opt_only, path("train.safetensors"));
  expect_same_state(as_named(opt_only.state_dict()), as_named(opt.state_dict()));
}

TEST_F(CheckpointTest, LoadTrainingIsAllOrNothing) {
  Net net;
  optim::Adam opt(net.parameters());
  train(net, opt, 0, 2);
  save_training(path("train.safetensors"), net, opt);

  // The optimizer state fits (same parameter count and shapes), the model does not (its
  // keys have another prefix): the optimizer loads first and is put back.
  struct Renamed : Module {
    ModulePtr<Net> inner = register_module("inner", std::make_shared<Net>());
  } renamed;
  optim::Adam renamed_opt(renamed.parameters(), {.lr = 0.5});
  NamedTensors opt_before = as_named(renamed_opt.state_dict());
  expect_error([&] { load_training(path("train.safetensors"), renamed, renamed_opt); },
               {"[kiln::load] loading '" + path("train.safetensors") + "'",
                "the state dict's keys are this model's without the prefix \"inner.\""});
  expect_same_state(as_named(renamed_opt.state_dict()), opt_before);
  EXPECT_EQ(renamed_opt.lr(0), 0.5);
  EXPECT_EQ(renamed_opt.state(renamed.inner->fc1->weight), nullptr);

  // The model fits, the optimizer does not (other groups): the model does not change.
  Net target;
  NamedTensors model_before = target.state_dict();
  for (auto& [k, t] : model_before) t = t.clone();
  optim::Adam half_opt(target.fc1->parameters(), {.lr = 0.5});
  expect_error([&] { load_training(path("train.safetensors"), target, half_opt); },
               {"[Adam.load_state_dict]"});
  expect_same_state(target.state_dict(), model_before);
  EXPECT_EQ(half_opt.lr(0), 0.5);
}

TEST_F(CheckpointTest, LoadTrainingRefusesOtherFiles) {
  Net net;
  optim::Adam opt(net.parameters());
  save(net, path("net.safetensors"));
  expect_error(
      [&] { load_training(path("net.safetensors"), net, opt); },
      {"[kiln::load_training]", "is not a training checkpoint: it holds only model tensors",
       "Fix: load it with kiln::load(model, path)"});
  save(opt, path("opt.safetensors"));
  expect_error([&] { load_training(path("opt.safetensors"), net, opt); },
               {"it holds only optimizer state", "kiln::load(optimizer, path)"});
  save_safetensors(path("plain.safetensors"), net.state_dict());
  expect_error([&] { load_training(path("plain.safetensors"), net, opt); },
               {"tensor(s) outside \"model.\" and \"optimizer.\" (the first is \"fc1.weight\")"});
  optim::SGD sgd(net.parameters());
  save_training(path("train.safetensors"), net, opt);
  expect_error([&] { load_training(path("train.safetensors"), net, sgd); },
               {"holds the state of the optimizer Adam"});
}

}  // namespace
}  // namespace kiln
