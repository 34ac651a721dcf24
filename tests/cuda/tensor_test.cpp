// Tensors on a GPU: device memory, copies between devices (views included), host reads of
// device tensors, modules moved with to() and their checkpoints, gradients across devices,
// and the errors for devices that do not fit. None of this launches a kernel, so besides a
// real GPU (tests/gpu/device_check.sh) it runs on the fake driver (the ctest
// cuda_on_fake_driver), whose memory sits at addresses the host cannot read: a host read of
// device memory crashes the test instead of passing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "cuda/requirements.h"
#include "kiln/cuda/caching_allocator.h"
#include "kiln/cuda/conv_kernels.h"
#include "kiln/cuda/fused_kernels.h"
#include "kiln/dispatch.h"
#include "kiln/kiln.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/norm.h"
#include "kiln/ops/pool.h"
#include "test_util.h"
#include "values_close.h"

namespace kiln {
namespace {

using cuda::is_available;
using cuda::unavailable_reason;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// 0, 1, ..., n-1 shaped `sizes`, as `dtype` (booleans alternate).
Tensor counting(IntList sizes, DType dtype) {
  Tensor t = arange(numel(sizes)).reshape(sizes);
  const Tensor f = t.to(kFloat32);
  return dtype == kBool ? (f - kiln::floor(f / 2) * 2) == 1 : t.to(dtype);
}

TEST(CudaTensor, WithoutAGpuMovingATensorSaysWhy) {
  if (is_available()) GTEST_SKIP() << "a CUDA device is present";
  for (auto make : {+[] { ones({2, 3}).to(kCUDA); }, +[] { Tensor::empty({2}, kFloat32, kCUDA); },
                    +[] { to_device(ones({2}), cuda::device(1)); }}) {
    std::string m = error_of(make);
    EXPECT_TRUE(contains(m, "no CUDA device: " + unavailable_reason())) << m;
  }
}

TEST(CudaTensor, EveryDtypeRoundTripsAndReadsOnTheHost) {
  REQUIRE_GPU();
  for (DType dtype : {kBool, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor host = counting({3, 5}, dtype);
    Tensor gpu = host.to(kCUDA);
    EXPECT_EQ(gpu.device(), kCUDA);
    EXPECT_EQ(gpu.dtype(), dtype);
    EXPECT_EQ(gpu.sizes(), host.sizes());
    // Host reads of the device tensor copy what they read.
    EXPECT_EQ(gpu.to_vector<double>(), host.to_vector<double>());
    EXPECT_EQ(gpu.select(0, 2).select(0, 4).item<double>(), host.to_vector<double>()[14]);
    Tensor back = gpu.to(kCPU);
    EXPECT_EQ(back.device(), kCPU);
    EXPECT_EQ(back.to_vector<double>(), host.to_vector<double>());
    EXPECT_FALSE(back.shares_storage(host));
  }
}

TEST(CudaTensor, PrintsItsValuesAndItsDevice) {
  REQUIRE_GPU();
  Tensor gpu = Tensor::from_vector<float>({1.5f, -2, 3}).to(kCUDA);
  EXPECT_EQ(gpu.str(), "tensor([ 1.5000, -2.0000,  3.0000], device='cuda:0')");
  EXPECT_EQ(Tensor::scalar(7, kInt64, kCUDA).item<int64_t>(), 7);
}

TEST(CudaTensor, ViewsMoveAsTheElementsTheyShow) {
  REQUIRE_GPU();
  Tensor base = counting({4, 6}, kFloat32);
  std::vector<Tensor> views = {base.transpose(0, 1), base.slice(1, 1, 6, 2), base.narrow(0, 1, 2),
                               base.select(1, 3).unsqueeze(1).expand({4, 5})};
  for (const Tensor& view : views) {
    SCOPED_TRACE(view.type_str());
    Tensor gpu = view.to(kCUDA);
    EXPECT_TRUE(gpu.is_contiguous());
    EXPECT_EQ(gpu.to_vector<float>(), view.to_vector<float>());
  }
  // Views of a device tensor (made without a kernel) read and move as their elements too.
  Tensor gpu = base.to(kCUDA);
  for (const Tensor& view : {gpu.transpose(0, 1), gpu.slice(1, 1, 6, 2), gpu.narrow(0, 1, 2)}) {
    SCOPED_TRACE(view.type_str());
    EXPECT_EQ(view.device(), kCUDA);
    Tensor expected = base.as_strided(view.sizes(), view.strides(), view.storage_offset());
    EXPECT_EQ(view.to_vector<float>(), expected.to_vector<float>());
    EXPECT_EQ(view.to(kCPU).to_vector<float>(), expected.to_vector<float>());
  }
}

TEST(CudaTensor, CopiesOutOfStridedViewsOfDeviceTensors) {
  REQUIRE_GPU();
  Tensor gpu = counting({3, 4}, kFloat32).to(kCUDA);
  // From a device view into a host tensor, with a dtype change on the way.
  Tensor host = zeros({4, 3}, kFloat64);
  host.copy_(gpu.t());
  EXPECT_EQ(host.to_vector<double>(), (std::vector<double>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  host.narrow(0, 1, 2).copy_(gpu.narrow(1, 2, 2).t());  // into a host view
  EXPECT_EQ(host.to_vector<double>(), (std::vector<double>{0, 4, 8, 2, 6, 10, 3, 7, 11, 3, 7, 11}));
}

TEST(CudaTensor, CopiesFillsAndContiguousRunOnTheGpu) {
  REQUIRE_KERNELS();
  Tensor gpu = zeros({3, 4}).to(kCUDA);
  gpu.copy_(counting({3, 4}, kFloat32));
  EXPECT_EQ(gpu.to_vector<float>(), counting({3, 4}, kFloat32).to_vector<float>());
  gpu.select(0, 2).fill_(9);
  EXPECT_EQ(gpu.t().contiguous().to_vector<float>(),
            (std::vector<float>{0, 4, 9, 1, 5, 9, 2, 6, 9, 3, 7, 9}));
  gpu.zero_();
  EXPECT_EQ(gpu.to_vector<float>(), std::vector<float>(12, 0.f));
  // Into a strided view, by a kernel that writes through the view's strides: the elements
  // outside it stay.
  gpu.copy_(counting({3, 4}, kFloat32));
  gpu.transpose(0, 1).narrow(0, 1, 2).copy_(full({2, 3}, -1.0));
  EXPECT_EQ(gpu.to_vector<float>(), (std::vector<float>{0, -1, -1, 3, 4, -1, -1, 7, 8, -1, -1, 11}));
}

TEST(CudaTensor, DeviceTensorsTakeTheirMemoryFromTheCachingAllocator) {
  REQUIRE_GPU();
  const AllocatorStats before = cuda::memory_stats();
  {
    Tensor gpu = ones({1024, 256}).to(kCUDA);  // 1 MiB
    EXPECT_GE(cuda::memory_stats().allocated_bytes, before.allocated_bytes + (1u << 20));
  }
  const AllocatorStats after = cuda::memory_stats();
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_GE(after.cached_bytes, 1u << 20);  // kept for the next tensor of that size
  Tensor again = ones({1024, 256}).to(kCUDA);
  EXPECT_EQ(cuda::memory_stats().cache_hits, after.cache_hits + 1);
}

TEST(CudaTensor, OutOfDeviceMemorySaysWhatWasAskedWhatIsFreeAndTheFix) {
  REQUIRE_GPU();
  std::string m = error_of([] { Tensor::empty({int64_t{1} << 48}, kFloat32, kCUDA); });
  EXPECT_TRUE(contains(m, "out of memory on cuda:0")) << m;
  EXPECT_TRUE(contains(m, "tried to allocate 1048576.00 GiB")) << m;
  EXPECT_TRUE(contains(m, "free")) << m;
  EXPECT_TRUE(contains(m, "Fix:")) << m;
}

struct Block : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(4, 3));
  nn::ModulePtr<nn::BatchNorm1d> norm = register_module("norm", std::make_shared<nn::BatchNorm1d>(3));
  Tensor forward(const Tensor& x) override { return norm(fc(x)); }
};

std::vector<std::vector<float>> values_of(const nn::NamedTensors& named) {
  std::vector<std::vector<float>> out;
  for (const auto& [name, t] : named) out.push_back(t.to_vector<float>());
  return out;
}

TEST(CudaTensor, ModuleToMovesParametersBuffersAndGradsAndBack) {
  REQUIRE_GPU();
  manual_seed(3);
  Block block;
  block(randn({5, 4})).sum().backward();
  const auto params = values_of(block.named_parameters());
  const auto buffers = values_of(block.named_buffers());
  const Tensor weight = block.fc->weight;
  const std::vector<float> weight_grad = weight.grad().to_vector<float>();

  block.to(kCUDA);
  for (const auto& [name, t] : block.named_parameters()) EXPECT_EQ(t.device(), kCUDA) << name;
  for (const auto& [name, t] : block.named_buffers()) EXPECT_EQ(t.device(), kCUDA) << name;
  EXPECT_TRUE(block.fc->weight.is_same(weight)) << "to() keeps each parameter's identity";
  EXPECT_EQ(weight.grad().device(), kCUDA);
  EXPECT_EQ(weight.grad().to_vector<float>(), weight_grad);
  EXPECT_EQ(values_of(block.named_parameters()), params);
  EXPECT_EQ(values_of(block.named_buffers()), buffers);

  block.to(kCPU);
  EXPECT_EQ(weight.device(), kCPU);
  EXPECT_EQ(values_of(block.named_parameters()), params);
  EXPECT_EQ(values_of(block.named_buffers()), buffers);
}

TEST(CudaTensor, ADeviceModulesCheckpointSavesAndLoadsAcrossDevices) {
  REQUIRE_GPU();
  manual_seed(4);
  Block trained;
  trained.to(kCUDA);
  const auto params = values_of(trained.named_parameters());
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("kiln_cuda_block_" + std::to_string(::getpid()) + ".safetensors"))
                               .string();
  save_safetensors(path, trained.state_dict());
  // Loaded into a module on the cpu, and (copying into device tensors needs kernels) into one
  // already on the GPU.
  manual_seed(5);
  Block on_cpu;
  on_cpu.load_state_dict(load_safetensors(path).tensors);
  EXPECT_EQ(values_of(on_cpu.named_parameters()), params);
  if (!cuda::on_fake_driver()) {
    Block on_gpu;
    on_gpu.to(kCUDA);
    on_gpu.load_state_dict(load_safetensors(path).tensors);
    for (const auto& [name, t] : on_gpu.named_parameters()) EXPECT_EQ(t.device(), kCUDA) << name;
    EXPECT_EQ(values_of(on_gpu.named_parameters()), params);
  }
  std::filesystem::remove(path);
}

TEST(CudaTensor, OptimizerStateFollowsItsParameterToTheGpu) {
  REQUIRE_KERNELS();
  manual_seed(6);
  Block block, reference;
  reference.load_state_dict(block.state_dict());
  optim::SGD sgd(block.parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::SGD reference_sgd(reference.parameters(), {.lr = 0.1, .momentum = 0.9});
  for (int step = 0; step < 3; ++step) {
    const Tensor x = randn({5, 4});
    for (auto [model, opt] : {std::pair<Block*, optim::SGD*>{&block, &sgd}, {&reference, &reference_sgd}}) {
      opt->zero_grad();
      (*model)(x).sum().backward();
      if (step < 2) opt->step();
    }
  }
  // The third step runs on the GPU for `block`: parameters, gradients and (at the step) the
  // momentum buffers move there.
  block.to(kCUDA);
  reference_sgd.step();
  sgd.step();
  // The same elementwise updates on both devices: equal up to rounding (no reductions).
  count_mismatches(block.fc->weight.to_vector<double>(), reference.fc->weight.to_vector<double>(),
                   1e-6, 1e-7, "fc.weight");
  EXPECT_EQ(sgd.state_dict().at("state.0.momentum_buffer").device(), kCUDA);
}

// No batch norm here: it cancels the first layer's bias gradient to rounding noise, which
// Adam-like updates (g / sqrt(v)) blow up to full steps of either sign on either device.
struct TwoLayers : nn::Module {
  nn::ModulePtr<nn::Linear> fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 8));
  nn::ModulePtr<nn::Linear> fc2 = register_module("fc2", std::make_shared<nn::Linear>(8, 3));
  Tensor forward(const Tensor& x) override { return fc2(kiln::tanh(fc1(x))); }
};

// A few training steps of `TwoLayers` with the optimizer `make` builds, on the CPU or on the
// GPU (with a cosine schedule and gradient clipping), from the same weights and data; the
// parameters after them.
std::vector<std::vector<float>> trained(bool on_gpu,
                                        const std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>& make) {
  manual_seed(21);
  TwoLayers block;
  if (on_gpu) block.to(kCUDA);
  std::unique_ptr<optim::Optimizer> optimizer = make(block.parameters());
  optim::CosineAnnealingLR schedule(*optimizer, 4);
  for (int step = 0; step < 4; ++step) {
    const Tensor x = randn({6, 4}), target = randn({6, 3});
    optimizer->zero_grad();
    nn::functional::mse_loss(block(on_gpu ? x.to(kCUDA) : x), on_gpu ? target.to(kCUDA) : target).backward();
    nn::utils::clip_grad_norm_(block.parameters(), 0.5);
    optimizer->step();
    schedule.step();
  }
  return values_of(block.named_parameters());
}

TEST(CudaTensor, EveryOptimizerTrainsAlikeOnBothDevices) {
  REQUIRE_KERNELS();
  using Make = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;
  const std::vector<std::pair<std::string, Make>> optimizers = {
      {"SGD", [](auto p) { return std::make_unique<optim::SGD>(p, optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true}); }},
      {"Adam", [](auto p) { return std::make_unique<optim::Adam>(p, optim::AdamOptions{.lr = 0.05, .weight_decay = 0.01, .amsgrad = true}); }},
      {"AdamW", [](auto p) { return std::make_unique<optim::AdamW>(p, optim::AdamWOptions{.lr = 0.05, .weight_decay = 0.1}); }},
      {"RMSprop", [](auto p) { return std::make_unique<optim::RMSprop>(p, optim::RMSpropOptions{.lr = 0.01, .momentum = 0.5, .centered = true}); }},
      {"Adagrad", [](auto p) { return std::make_unique<optim::Adagrad>(p, optim::AdagradOptions{.lr = 0.05, .lr_decay = 0.01, .initial_accumulator_value = 0.1}); }},
      {"Adadelta", [](auto p) { return std::make_unique<optim::Adadelta>(p, optim::AdadeltaOptions{.weight_decay = 0.01}); }},
      {"Adamax", [](auto p) { return std::make_unique<optim::Adamax>(p, optim::AdamaxOptions{.lr = 0.02}); }},
      {"NAdam", [](auto p) { return std::make_unique<optim::NAdam>(p, optim::NAdamOptions{.lr = 0.02, .weight_decay = 0.01, .decoupled_weight_decay = true}); }},
      {"RAdam", [](auto p) { return std::make_unique<optim::RAdam>(p, optim::RAdamOptions{.lr = 0.02, .betas = {0.9, 0.9}}); }},
  };
  for (const auto& [name, make] : optimizers) {
    const auto on_cpu = trained(false, make), on_gpu = trained(true, make);
    ASSERT_EQ(on_cpu.size(), on_gpu.size()) << name;
    for (size_t k = 0; k < on_cpu.size(); ++k)
      count_mismatches(std::vector<double>(on_gpu[k].begin(), on_gpu[k].end()),
                       std::vector<double>(on_cpu[k].begin(), on_cpu[k].end()), 1e-4, 1e-5,
                       name + " parameter " + std::to_string(k));
  }
}

TEST(CudaTensor, GradientsFlowBackToTheInputsDevice) {
  REQUIRE_GPU();
  Tensor x = Tensor::from_vector<float>({1, 2, 3}).requires_grad_();
  Tensor w = Tensor::from_vector<float>({4, 5, 6});
  Tensor through_gpu = x.to(kCUDA).transpose(0, 0).to(kCPU);
  (through_gpu * w).sum().backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().device(), kCPU);
  EXPECT_EQ(x.grad().to_vector<float>(), w.to_vector<float>());
}

TEST(CudaTensor, MixingDevicesNamesTheOpBothDevicesTheModuleAndTheFix) {
  REQUIRE_GPU();
  std::string m = error_of([] { ones({2}).to(kCUDA) + ones({2}); });
  EXPECT_TRUE(contains(m, "expected all inputs on one device, found cuda:0 (input 0) and cpu (input 1)"))
      << m;
  EXPECT_TRUE(contains(m, "Fix: move them to one device")) << m;
  Block block;  // on the cpu
  m = error_of([&] { block(ones({2, 4}).to(kCUDA)); });
  EXPECT_TRUE(contains(m, "cuda:0 (input 0) and cpu (input 1)")) << m;
  EXPECT_TRUE(contains(m, "in module fc, Linear")) << m;
  EXPECT_TRUE(contains(m, "model.to(device)")) << m;
  // A 0-d host tensor joins a GPU's elementwise ops (tested with kernels below), unless its
  // gradient is wanted (it would arrive on the GPU), or the op is no elementwise one.
  const Tensor host_first[] = {Tensor::scalar(2.0f), ones({2}).to(kCUDA)};
  EXPECT_EQ(infer_types(ops::sub, host_first, no_attrs())[0].device, kCUDA);
  const Tensor weight = Tensor::scalar(2.0f).requires_grad_();
  m = error_of([&] { ones({2}).to(kCUDA) * weight; });
  EXPECT_TRUE(contains(m, "[mul] expected all inputs on one device, found cuda:0 (input 0) and cpu (input 1)"))
      << m;
  m = error_of([&] { nn::functional::embedding(Tensor::scalar(int64_t{1}), ones({4, 3}).to(kCUDA)); });
  EXPECT_TRUE(contains(m, "[embedding] expected all inputs on one device")) << m;
}

TEST(CudaTensor, AnOutOfRangeTargetIsNamedAsOnTheCpu) {
  REQUIRE_KERNELS();  // the targets are checked by a kernel
  const Tensor log_probs = zeros({3, 4}).to(kCUDA);
  const Tensor labels = Tensor::from_vector<int64_t>({1, 7, 0}).to(kCUDA);
  std::string m = error_of([&] { nn::functional::nll_loss(log_probs, labels); });
  EXPECT_TRUE(contains(m, "[nll_loss] index 7 (element 1 of the target) is out of range for 4 entries"))
      << m;
}

TEST(CudaTensor, AnOpWithoutACudaKernelSaysSoAndTheWayAround) {
  REQUIRE_GPU();
  init();
  // layer_norm made an op without one for this test (every op gets one in the end).
  KernelFn& slot = ops::layer_norm.kernels[static_cast<size_t>(DeviceType::CUDA)];
  const KernelFn kept = slot;
  slot = nullptr;
  std::string m = error_of([] { nn::functional::layer_norm(ones({2, 3}).to(kCUDA), {3}); });
  slot = kept;
  EXPECT_TRUE(contains(m, "[layer_norm] has no kernel for cuda:0 yet (it has kernels for: cpu)")) << m;
  EXPECT_TRUE(contains(m, "Fix: move its inputs with .to(cpu)")) << m;
}

// ---- with a GPU that runs kernels ----

// `f` on CPU tensors and on their copies on the GPU give the same values (`rtol` for ops whose
// GPU math is libdevice's).
void expect_same_on_gpu(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                        const std::vector<Tensor>& inputs, double rtol = 0) {
  std::vector<Tensor> on_gpu;
  for (const Tensor& t : inputs) on_gpu.push_back(t.to(kCUDA));
  const Tensor want = f(inputs), got = f(on_gpu);
  EXPECT_EQ(got.device(), kCUDA);
  EXPECT_EQ(got.dtype(), want.dtype());
  EXPECT_EQ(got.sizes(), want.sizes());
  count_mismatches(got.to_vector<double>(), want.to_vector<double>(), rtol, rtol,
                   "on the gpu");
}

TEST(CudaTensor, ElementwiseOpsReductionsViewsAndInPlaceWritesMatchTheCpu) {
  REQUIRE_KERNELS();
  manual_seed(7);
  const Tensor x = randn({64, 33}), bias = randn({33}), mask = randn({64, 1}) > 0;
  expect_same_on_gpu([](const auto& in) { return in[0] * in[1] + 2.5; }, {x, bias});
  // Host scalars are kernel parameters: numbers, 0-d host tensors, either side, in place.
  const Tensor on_host = Tensor::scalar(0.5f);
  for (const Tensor& gpu : {x.to(kCUDA), x.to(kCUDA).to(kFloat64), x.to(kCUDA).to(kInt32)}) {
    Tensor y = (3 - gpu) * on_host;
    y.mul_(2);
    EXPECT_EQ(y.device(), kCUDA);
    count_mismatches(y.to_vector<double>(), ((3 - gpu.to(kCPU)) * on_host * 2).to_vector<double>(), 0, 0,
                     "host scalars on " + gpu.type_str());
    const Tensor filled = where(gpu > 0, gpu, -1);
    EXPECT_EQ(filled.to_vector<double>(), where(gpu.to(kCPU) > 0, gpu.to(kCPU), -1).to_vector<double>());
  }
  expect_same_on_gpu([](const auto& in) { return where(in[2], relu(in[0]), in[1].exp()); },
                     {x, bias, mask}, 1e-6);
  expect_same_on_gpu([](const auto& in) { return gelu(in[0].t()) - in[0].t().tanh(); }, {x},
                     1e-6);
  expect_same_on_gpu([](const auto& in) { return (in[0] > 0.5).to(kFloat16).to(kInt64); }, {x});
  expect_same_on_gpu([](const auto& in) { return in[0].to(kBFloat16).to(kFloat32); }, {x});
  expect_same_on_gpu(
      [](const auto& in) {
        Tensor y = in[0].clone();
        y.slice(1, 1, 30, 2).mul_(in[0].slice(1, 0, 29, 2));  // in place, into a strided view
        return y;
      },
      {x});
  // Reductions over some dims, all dims, and through a view; mean and var are composites.
  expect_same_on_gpu([](const auto& in) { return in[0].sum({1}) + in[0].amax({1}); }, {x}, 1e-5);
  expect_same_on_gpu([](const auto& in) { return in[0].t().mean({0}, true) * in[0].t().prod({0}).abs(); },
                     {x}, 1e-5);
  expect_same_on_gpu([](const auto& in) { return logical_or((in[0] > 0).all({0}), (in[0] < -2).any({0})); },
                     {x});
  expect_same_on_gpu([](const auto& in) { return in[0].sum() + in[0].amin(); }, {x}, 1e-5);
  // GEMMs through cuBLASLt: transposed views, batches, broadcasts, float64.
  const Tensor w = randn({33, 17}), batch = randn({3, 64, 33});
  expect_same_on_gpu([](const auto& in) { return matmul(in[0], in[1]); }, {x, w}, 1e-5);
  expect_same_on_gpu([](const auto& in) { return matmul(in[1].t(), in[0].t()); }, {x, w}, 1e-5);
  expect_same_on_gpu([](const auto& in) { return matmul(in[0], in[1]); }, {batch, w}, 1e-5);
  expect_same_on_gpu([](const auto& in) { return matmul(in[0].to(kFloat64), in[1].to(kFloat64)); },
                     {x, w}, 1e-12);
  // var and the p-norms.
  expect_same_on_gpu([](const auto& in) { return in[0].var({1}) + in[0].t().std({0}, 0); }, {x}, 1e-5);
  expect_same_on_gpu([](const auto& in) { return in[0].norm(2, {1}) + in[0].norm(INFINITY, {1}); }, {x},
                     1e-5);
  // max/argmax along a dim (the first of equal values wins, as on the cpu).
  const Tensor ties = Tensor::from_vector<float>({1, 3, 3, 0, 2, 2, 5, 5, 1}, {3, 3});
  expect_same_on_gpu([](const auto& in) { return std::get<1>(max(in[0], 1)); }, {ties});
  expect_same_on_gpu([](const auto& in) { return std::get<0>(min(in[0], 0)) + in[0].argmax(0).to(kFloat32); },
                     {x});
  // Row kernels: softmax and log_softmax over any dim.
  expect_same_on_gpu([](const auto& in) { return nn::functional::softmax(in[0], 0); }, {x}, 1e-5);
  expect_same_on_gpu([](const auto& in) { return nn::functional::log_softmax(in[0].t(), 1); }, {x},
                     1e-5);
  // Cross-entropy (log_softmax, then nll_loss) and its gradient, with ignored targets.
  const Tensor logits = randn({16, 5});
  const Tensor labels = Tensor::from_vector<int64_t>({0, 4, 2, -100, 1, 1, 3, 0, 2, 4, -100, 3, 0, 1, 2, 4});
  for (const Tensor& weight : {Tensor(), rand({5}) + 0.5}) {
    Tensor cpu_logits = logits.clone().requires_grad_();
    Tensor gpu_logits = logits.to(kCUDA).requires_grad_();
    nn::functional::CrossEntropyOptions on_cpu, on_gpu;
    on_cpu.weight = weight;
    on_gpu.weight = weight.defined() ? weight.to(kCUDA) : Tensor();
    const Tensor cpu_loss = nn::functional::cross_entropy(cpu_logits, labels, on_cpu);
    const Tensor gpu_loss = nn::functional::cross_entropy(gpu_logits, labels.to(kCUDA), on_gpu);
    EXPECT_NEAR(gpu_loss.item<double>(), cpu_loss.item<double>(), 1e-5);
    cpu_loss.backward();
    gpu_loss.backward();
    count_mismatches(gpu_logits.grad().to_vector<double>(), cpu_logits.grad().to_vector<double>(),
                     1e-5, 1e-7, "cross-entropy's gradient on the gpu");
  }
  // Factories on the GPU.
  const Tensor filled = full({3, 4}, -2.5, TensorOptions(kFloat64).with_device(kCUDA));
  EXPECT_EQ(filled.to_vector<double>(), std::vector<double>(12, -2.5));
  EXPECT_EQ(zeros_like(x.to(kCUDA).to(kInt32)).sum().item<int64_t>(), 0);
  // Backward through elementwise ops and a reduction runs on the GPU (the seed is a full).
  Tensor leaf = x.to(kCUDA).requires_grad_();
  (leaf.sigmoid() * leaf).sum().backward();
  EXPECT_EQ(leaf.grad().device(), kCUDA);
  const Tensor s = x.sigmoid();
  count_mismatches(leaf.grad().to_vector<double>(), (s + x * s * (1 - s)).to_vector<double>(), 1e-5,
                   1e-6, "silu's gradient on the gpu");
}

// float16 and bfloat16 are storage-only types but for GEMMs on the GPU, which multiply them on
// tensor cores with float32 accumulation: the product of the rounded inputs, rounded once.
TEST(CudaTensor, HalfPrecisionGemmsAccumulateInFloat32) {
  REQUIRE_KERNELS();
  manual_seed(12);
  const Tensor a = randn({37, 65}), b = randn({65, 29}), batch = randn({3, 37, 65});
  for (DType dt : {kFloat16, kBFloat16}) {
    const std::string name(dtype_name(dt));
    // Half the rounding step of a value near 1 (8 significant bits for bfloat16, 11 for float16).
    const double rtol = dt == kBFloat16 ? 1.0 / 256 : 1.0 / 2048;
    auto check = [&](const Tensor& x, const Tensor& y, const std::string& what) {
      const Tensor rx = x.to(dt), ry = y.to(dt);  // the inputs as stored
      const Tensor want = matmul(rx.to(kFloat32), ry.to(kFloat32));
      const Tensor got = matmul(rx.to(kCUDA), ry.to(kCUDA));
      EXPECT_EQ(got.dtype(), dt) << what;
      EXPECT_EQ(got.device(), kCUDA) << what;
      EXPECT_EQ(count_mismatches(got.to(kCPU).to(kFloat32).to_vector<double>(), want.to_vector<double>(),
                                 rtol, 1e-3, name + " " + what),
                0);
    };
    check(a, b, "2-d");
    check(batch, b, "batched");
    check(b.t(), a.t(), "transposed views");
    check(a.slice(1, 0, 0), b.slice(0, 0, 0), "an empty sum");
    // The CPU keeps them storage-only, and says where they multiply.
    const std::string m = error_of([&] { matmul(a.to(dt), b.to(dt)); });
    EXPECT_TRUE(contains(m, "[matmul] " + name + " is a storage-only type on cpu")) << m;
    EXPECT_TRUE(contains(m, "Fix: convert with .to(kiln::kFloat32) first, or multiply on a GPU")) << m;
  }
}

TEST(CudaTensor, LayoutAndIndexOpsAndTheirGradientsMatchTheCpu) {
  REQUIRE_KERNELS();
  manual_seed(8);
  const Tensor x = randn({4, 6}), y = randn({4, 2});
  const Tensor rows = Tensor::from_vector<int64_t>({3, 0, 3, 1}), picks = randint(0, 4, {3, 6});
  expect_same_on_gpu([](const auto& in) { return cat({in[0], in[1].t().t()}, 1); }, {x, y});
  expect_same_on_gpu([](const auto& in) { return stack({in[0], in[0] * 2}, 1); }, {x});
  expect_same_on_gpu([](const auto& in) { return index_select(in[0], 0, in[1]); }, {x, rows});
  expect_same_on_gpu([](const auto& in) { return index_add(in[0].t(), 1, in[1], in[2].t()); },
                     {x, rows, randn({4, 6})}, 1e-6);
  expect_same_on_gpu([](const auto& in) { return gather(in[0], 0, in[1]); }, {x, picks});
  expect_same_on_gpu([](const auto& in) { return scatter_add(in[0], 0, in[1], in[0].slice(0, 0, 3)); },
                     {x, picks}, 1e-6);
  expect_same_on_gpu([](const auto& in) { return nn::functional::one_hot(in[0], 5).to(kFloat32); }, {rows});
  for (const char* mode : {"constant", "reflect", "replicate", "circular"}) {
    const double fill = std::string(mode) == "constant" ? 0.5 : 0;
    expect_same_on_gpu([&](const auto& in) { return nn::functional::pad(in[0].t(), {2, 1, 1, 2}, mode, fill); },
                       {x});
  }
  // Gradients: embedding's (a scatter of rows), pad's, cat's (slices), slicing's
  // (slice_scatter), gather's (scatter_add).
  const Tensor table = randn({5, 3}), tokens = Tensor::from_vector<int64_t>({4, 1, 1, 0}, {2, 2});
  auto gradients = [&](Device device) {
    Tensor w = table.detach().to(device).requires_grad_(), v = x.detach().to(device).requires_grad_();
    Tensor loss = (nn::functional::embedding(tokens.to(device), w) * 3).sum() +
                  square(nn::functional::pad(v, {1, 1}, "reflect")).sum() + cat({v, v.slice(1, 2, 5)}, 1).sum() +
                  gather(v, 1, picks.to(device)).sum();
    loss.backward();
    EXPECT_EQ(w.grad().device(), device);
    return std::vector<Tensor>{w.grad(), v.grad()};
  };
  const std::vector<Tensor> on_cpu = gradients(kCPU), on_gpu = gradients(kCUDA);
  count_mismatches(on_gpu[0].to_vector<double>(), on_cpu[0].to_vector<double>(), 1e-6, 1e-6, "embedding's gradient");
  count_mismatches(on_gpu[1].to_vector<double>(), on_cpu[1].to_vector<double>(), 1e-5, 1e-6,
                   "pad's, cat's and gather's gradients");
  // An index out of range is named, as on the cpu.
  std::string m = error_of([&] { nn::functional::embedding(Tensor::from_vector<int64_t>({1, 9}).to(kCUDA), table.to(kCUDA)); });
  EXPECT_TRUE(contains(m, "[embedding] index 9 (element 1 of indices int64[2]) is out of range for an embedding "
                          "table of 5 rows")) << m;
  m = error_of([&] { index_select(x.to(kCUDA), 1, Tensor::from_vector<int64_t>({0, -1}).to(kCUDA)); });
  EXPECT_TRUE(contains(m, "[index_select] index -1 is out of range for dim 1 of size 6")) << m;
}

// `loss(inputs)` and the gradients of its inputs on the GPU match those on the CPU.
void expect_same_gradients_on_gpu(const std::function<Tensor(const std::vector<Tensor>&)>& loss,
                                  const std::vector<Tensor>& inputs, double rtol) {
  std::vector<std::vector<double>> want;
  for (bool on_gpu : {false, true}) {
    std::vector<Tensor> leaves;
    for (const Tensor& t : inputs) leaves.push_back(t.detach().to(on_gpu ? kCUDA : kCPU).requires_grad_());
    const Tensor value = loss(leaves);
    value.backward();
    std::vector<std::vector<double>> got = {value.to_vector<double>()};
    for (const Tensor& leaf : leaves) got.push_back(leaf.grad().to_vector<double>());
    if (!on_gpu) {
      want = got;
      continue;
    }
    for (size_t k = 0; k < got.size(); ++k)
      count_mismatches(got[k], want[k], rtol, rtol, k == 0 ? "the loss" : "gradient " + std::to_string(k - 1));
  }
}

TEST(CudaTensor, NormsAndTheirGradientsMatchTheCpu) {
  REQUIRE_KERNELS();
  manual_seed(9);
  const Tensor x = randn({6, 5, 8}) * 3 + 1, w = randn({8}), b = randn({8}), g = randn({6, 5, 8});
  // layer_norm with and without its affine part, over one and two dims; its backward.
  expect_same_gradients_on_gpu(
      [&](const auto& in) {
        return (nn::functional::layer_norm(in[0], {8}, in[1], in[2]) * g.to(in[0].device())).sum() +
               square(nn::functional::layer_norm(in[0], {5, 8})).sum();
      },
      {x, w, b}, 1e-4);
  expect_same_on_gpu([](const auto& in) { return nn::functional::layer_norm(in[0].to(kFloat64), {8}); }, {x}, 1e-12);
  // batch_norm in training (batch statistics, running ones updated) and in eval, over
  // [N, C] and [N, C, S]; its backward.
  for (const Shape& shape : {Shape{16, 5}, Shape{4, 5, 6}}) {
    SCOPED_TRACE(shape_str(shape));
    const Tensor input = randn(shape) * 2 + 0.5;
    nn::BatchNorm1d on_cpu(5), on_gpu(5);
    on_gpu.to(kCUDA);
    on_cpu.train();
    on_gpu.train();
    const Tensor want = on_cpu(input), got = on_gpu(input.to(kCUDA));
    count_mismatches(got.to_vector<double>(), want.to_vector<double>(), 1e-5, 1e-5, "training");
    count_mismatches(on_gpu.running_var.to_vector<double>(), on_cpu.running_var.to_vector<double>(), 1e-6, 1e-6,
                     "running_var");
    count_mismatches(on_gpu.running_mean.to_vector<double>(), on_cpu.running_mean.to_vector<double>(), 1e-6, 1e-6,
                     "running_mean");
    on_cpu.eval();
    on_gpu.eval();
    count_mismatches(on_gpu(input.to(kCUDA)).to_vector<double>(), on_cpu(input).to_vector<double>(), 1e-5, 1e-5,
                     "eval");
    expect_same_gradients_on_gpu(
        [](const auto& in) {
          return (nn::functional::batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true) * in[0]).sum();
        },
        {input, randn({5}), randn({5})}, 1e-4);
  }
}

TEST(CudaTensor, BinaryCrossEntropiesAndTheirGradientsMatchTheCpu) {
  REQUIRE_KERNELS();
  manual_seed(10);
  const Tensor logits = randn({7, 4}) * 3, target = (rand({7, 4}) > 0.5).to(kFloat32), pos_weight = rand({4}) + 0.5;
  // Probabilities that reach 0 and 1 exactly: each log clamps at -100.
  const Tensor probs = where(rand({7, 4}) > 0.9, Tensor::scalar(1.0f), rand({7, 4}));
  for (const char* reduction : {"mean", "sum", "none"}) {
    SCOPED_TRACE(reduction);
    expect_same_gradients_on_gpu(
        [&](const auto& in) {
          return nn::functional::binary_cross_entropy(in[0], in[1], Tensor(), reduction).sum() +
                 nn::functional::binary_cross_entropy_with_logits(in[2], in[1], Tensor(), reduction, in[3]).sum() +
                 nn::functional::binary_cross_entropy_with_logits(in[2], in[1], in[3], reduction).sum();
        },
        {probs, target, logits, pos_weight}, 1e-5);
  }
  const std::string m = error_of([] {
    nn::functional::binary_cross_entropy(Tensor::from_vector<float>({0.5f, 1.5f, -2.0f}).to(kCUDA),
                                         zeros({3}).to(kCUDA));
  });
  EXPECT_TRUE(contains(m, "[binary_cross_entropy] expected every input in [0, 1] (probabilities), got 1.5")) << m;
}

TEST(CudaTensor, PoolingAndItsGradientsMatchTheCpu) {
  REQUIRE_KERNELS();
  manual_seed(11);
  namespace F = nn::functional;
  // Ties (rounded values) and a NaN reach max pooling's tie and NaN rules.
  Tensor x = kiln::round(randn({2, 3, 9, 8}) * 2);
  x.select(0, 1).select(0, 2).select(0, 4).select(0, 5).fill_(NAN);
  expect_same_on_gpu([](const auto& in) { return F::max_pool2d(in[0], {3, 3}, {2, 2}, {1, 1}, {1, 1}, true); }, {x});
  expect_same_on_gpu(
      [](const auto& in) {
        auto [values, indices] = F::max_pool2d_with_indices(in[0], {2, 3}, {1, 2}, {1, 1}, {2, 1});
        return indices.to(kFloat64) + values.to(kFloat64) * 1000;
      },
      {x});
  const Tensor y = randn({2, 3, 9, 8});
  expect_same_on_gpu([](const auto& in) { return F::avg_pool2d(in[0], {3, 2}, {2, 2}, {1, 1}, true, false); }, {y},
                     1e-6);
  expect_same_on_gpu([](const auto& in) { return F::avg_pool2d(in[0], {3, 3}, {2, 1}, {1, 0}, false, true, 5); },
                     {y}, 1e-6);
  expect_same_on_gpu([](const auto& in) { return F::adaptive_avg_pool2d(in[0], {4, 3}); }, {y}, 1e-6);
  // Gradients: max pooling's (overlapping windows), average's (padding, ceil_mode), adaptive's.
  expect_same_gradients_on_gpu(
      [](const auto& in) {
        const Tensor w = in[1].reshape({1, 1, 1, 8});
        return (F::max_pool2d(in[0] * w, {3, 3}, {2, 2}, {1, 1}) * 2).sum() +
               square(F::avg_pool2d(in[0], {3, 3}, {2, 2}, {1, 1}, true, false)).sum() +
               square(F::adaptive_avg_pool2d(in[0], {4, 5})).sum();
      },
      {y, randn({8})}, 1e-5);
}

TEST(CudaTensor, ConvolutionsAndTheirGradientsMatchTheCpu) {
  REQUIRE_KERNELS();
  manual_seed(12);
  namespace F = nn::functional;
  const Tensor x = randn({3, 4, 9, 7}), w = randn({6, 4, 3, 2}), b = randn({6}), grouped = randn({6, 2, 3, 3});
  // Strides, padding, dilation and groups; the bias; and the gradients of all three (and of
  // the gradient ops, through a second backward).
  expect_same_gradients_on_gpu(
      [](const auto& in) {
        return square(F::conv2d(in[0], in[1], in[2], {2, 1}, {1, 2}, {1, 2})).sum() +
               (F::conv2d(in[0], in[3], Tensor(), {1, 2}, {2, 1}, {2, 1}, 2) * 0.5).sum();
      },
      {x, w, b, grouped}, 1e-4);
  expect_same_on_gpu([](const auto& in) { return F::conv2d(in[0].to(kFloat64), in[1].to(kFloat64)); }, {x, w},
                     1e-12);
  // Second order: the gradient ops' own vjps are convolutions again.
  expect_same_gradients_on_gpu(
      [](const auto& in) {
        const Tensor y = F::conv2d(in[0], in[1], Tensor(), {1}, {1});
        GradOptions keep_graph;
        keep_graph.create_graph = true;
        const Tensor gx = kiln::grad({square(y).sum()}, {in[0]}, {}, keep_graph)[0];
        return square(gx).sum();
      },
      {x, w}, 1e-4);
}

// Where cuDNN is loaded, a convolution and each of its gradients is one cuDNN call; with cuDNN
// turned off they run as im2col + cuBLASLt. Both give the CPU's results (the test above runs
// with the default).
TEST(CudaTensor, ConvolutionsGoThroughCudnnOrIm2ColAlike) {
  REQUIRE_KERNELS();
  if (const std::string why = cuda::cudnn_unavailable_reason(); !why.empty())
    GTEST_SKIP() << "no cuDNN: " << why;
  namespace F = nn::functional;
  manual_seed(13);
  const Tensor x = randn({2, 4, 9, 7}), w = randn({6, 2, 3, 3}), b = randn({6});
  struct Run {
    Tensor y, gx, gw, gb;
    cuda::LaunchCounts forward, backward;
  };
  auto run = [&](DType dtype) {
    Run r;
    Tensor xg = x.to(dtype).to(kCUDA).requires_grad_(), wg = w.to(dtype).to(kCUDA).requires_grad_();
    Tensor bg = b.to(dtype).to(kCUDA).requires_grad_();
    const cuda::LaunchCounts start = cuda::launches_on_this_thread();
    r.y = F::conv2d(xg, wg, bg, {2, 1}, {1, 2}, {1, 2}, 2);
    const cuda::LaunchCounts middle = cuda::launches_on_this_thread();
    r.y.backward(full(r.y.sizes(), 0.5, TensorOptions(dtype).with_device(kCUDA)));
    const cuda::LaunchCounts end = cuda::launches_on_this_thread();
    r.forward = {middle.kernels - start.kernels, middle.library_calls - start.library_calls, 0, 0};
    r.backward = {end.kernels - middle.kernels, end.library_calls - middle.library_calls, 0, 0};
    r.gx = xg.grad(), r.gw = wg.grad(), r.gb = bg.grad();
    return r;
  };
  for (DType dtype : {kFloat32, kFloat64}) {
    const std::string name(dtype_name(dtype));
    const Run with = run(dtype);
    // The convolution is one cuDNN call (the bias is added by a kernel); so is each gradient.
    EXPECT_EQ(with.forward.library_calls, 1u) << name;
    EXPECT_EQ(with.forward.kernels, 1u) << name;
    EXPECT_EQ(with.backward.library_calls, 2u) << name;
    cuda::set_cudnn_enabled(false);
    EXPECT_EQ(cuda::cudnn_unavailable_reason(), "cuDNN is off (kiln::cuda::set_cudnn_enabled(false))");
    const Run without = run(dtype);
    cuda::set_cudnn_enabled(true);
    EXPECT_GT(without.forward.kernels, 1u) << name << ": im2col and the bias";
    const double tol = dtype == kFloat32 ? 1e-5 : 1e-12;
    const std::pair<const Tensor*, const Tensor*> pairs[] = {
        {&with.y, &without.y}, {&with.gx, &without.gx}, {&with.gw, &without.gw}, {&with.gb, &without.gb}};
    for (const auto& [a, c] : pairs)
      EXPECT_EQ(count_mismatches(a->to(kCPU).to_vector<double>(), c->to(kCPU).to_vector<double>(), tol, tol,
                                 name + ": cuDNN against im2col"),
                0);
  }
}

TEST(CudaTensor, AttentionAndItsGradientsMatchTheCpu) {
  REQUIRE_KERNELS();
  manual_seed(13);
  namespace F = nn::functional;
  const Tensor q = randn({2, 3, 5, 4}), k = randn({2, 3, 6, 4}), v = randn({2, 3, 6, 7});
  // A bool mask whose last query may attend to no key (zeros out, as on the cpu), an additive
  // mask, causality, heads read through a transposed view.
  Tensor allowed = rand({5, 6}) > 0.3;
  allowed.select(0, 4).fill_(false);
  const Tensor additive = randn({1, 3, 5, 6});
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    expect_same_gradients_on_gpu(
        [&](const auto& in) {
          const Tensor mask = variant == 0 ? allowed.to(in[0].device()) : variant == 1 ? additive.to(in[0].device()) : Tensor();
          const Tensor out = F::scaled_dot_product_attention(in[0], in[1].transpose(1, 2).transpose(1, 2), in[2], mask,
                                                             0.0, variant == 2);
          return (out * kiln::sin(out.detach())).sum();
        },
        {q, k, v}, 1e-4);
  }
}

TEST(CudaTensor, KernelsNameBadIndicesAndShapesTheyCannotTake) {
  REQUIRE_KERNELS();
  // max pooling's gradient scatters to indices max_pool2d returned; others are named.
  ops::PoolBackwardSizeAttrs size;
  size.input_size = {2, 2};
  const Tensor grad = ones({1, 1, 1, 2}).to(kCUDA);
  const Tensor indices = Tensor::from_vector<int64_t>({3, 4}, {1, 1, 1, 2}).to(kCUDA);
  std::string m = error_of([&] { dispatch(ops::max_pool2d_backward, std::vector<Tensor>{grad, indices}, size); });
  EXPECT_TRUE(contains(m, "[max_pool2d_backward] index 4 is outside the input plane of 4 elements. Fix: pass "
                          "the indices max_pool2d returned.")) << m;
  // gather's kernel addresses up to 8 dims.
  const Shape nine(9, 1);
  m = error_of([&] { gather(zeros(nine).to(kCUDA), 0, zeros(nine, kInt64).to(kCUDA)); });
  EXPECT_TRUE(contains(m, "[gather] the CUDA kernel takes tensors of up to 8 dims, got 9")) << m;
}

TEST(CudaTensor, ASeedDrawsTheSameNumbersOnTheGpuAsOnTheCpu) {
  REQUIRE_KERNELS();
  const TensorOptions gpu = TensorOptions(kFloat32).with_device(kCUDA);
  for (DType d : {kFloat32, kFloat64}) {
    Generator on_cpu(2024), on_gpu(2024);
    EXPECT_EQ(rand({1001}, gpu.with_dtype(d), &on_gpu).to_vector<double>(),
              rand({1001}, d, &on_cpu).to_vector<double>());
    count_mismatches(randn({333}, gpu.with_dtype(d), &on_gpu).to_vector<double>(),
                     randn({333}, d, &on_cpu).to_vector<double>(), 1e-14, 1e-15, "randn");
    EXPECT_EQ(on_gpu.offset(), on_cpu.offset());
    const Tensor p = rand({257}, d);
    EXPECT_EQ(bernoulli(p.to(kCUDA), &on_gpu).to_vector<double>(), bernoulli(p, &on_cpu).to_vector<double>());
  }
  Generator on_cpu(7), on_gpu(7);
  EXPECT_EQ(randint(-5, 1 << 30, {99}, TensorOptions(kInt64).with_device(kCUDA), &on_gpu).to_vector<int64_t>(),
            randint(-5, 1 << 30, {99}, kInt64, &on_cpu).to_vector<int64_t>());
  // dropout in training, seeded alike, drops the same elements.
  const Tensor x = randn({64, 33});
  manual_seed(5);
  const Tensor dropped_on_cpu = nn::functional::dropout(x, 0.25, true);
  manual_seed(5);
  EXPECT_EQ(nn::functional::dropout(x.to(kCUDA), 0.25, true).to_vector<float>(), dropped_on_cpu.to_vector<float>());
  // The factories.
  EXPECT_EQ(arange(0, 10, 3, TensorOptions(kInt64).with_device(kCUDA)).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(linspace(0, 1, 5, gpu).to_vector<float>(), linspace(0, 1, 5).to_vector<float>());
  EXPECT_EQ(eye(3, gpu).to_vector<float>(), eye(3).to_vector<float>());
  EXPECT_EQ(tril(x.to(kCUDA)).to_vector<float>(), tril(x).to_vector<float>());
  // An out-of-range probability is named, as on the cpu.
  const std::string m = error_of([] { bernoulli(Tensor::from_vector<float>({0.5f, 1.5f}).to(kCUDA)); });
  EXPECT_TRUE(contains(m, "[bernoulli] expected every probability in [0, 1], got 1.5 at element 1")) << m;
}

}  // namespace
}  // namespace kiln
