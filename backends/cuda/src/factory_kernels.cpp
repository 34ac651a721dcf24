// arange, linspace, eye and the random ops on CUDA tensors (kiln/cuda/factory_kernels.h).
#include "kiln/cuda/factory_kernels.h"

#include <sstream>

#include "cuda_c_builder.h"
#include "failure_flag.h"
#include "kernel_cache.h"
#include "kernel_source.h"
#include "tensor_views.h"
#include "kiln/cuda/elementwise_kernels.h"
#include "kiln/error.h"
#include "kiln/generator.h"
#include "kiln/ops/dropout.h"
#include "kiln/ops/factory.h"
#include "kiln/tensor.h"

namespace kiln::cuda {

namespace {

// Generator::philox and its float conversions, as device functions (once per source, which
// tests fill with many kernels).
constexpr const char* kPhiloxSource = R"(#ifndef KILN_PHILOX
#define KILN_PHILOX
KILN_DEVICE void kiln_philox(unsigned long long key, unsigned long long counter,
                              unsigned int w[4]) {
  unsigned int c0 = (unsigned int)counter, c1 = (unsigned int)(counter >> 32), c2 = 0, c3 = 0;
  unsigned int k0 = (unsigned int)key, k1 = (unsigned int)(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const unsigned long long p0 = 0xD2511F53ull * c0, p1 = 0xCD9E8D57ull * c2;
    const unsigned int n0 = (unsigned int)(p1 >> 32) ^ c1 ^ k0;
    const unsigned int n2 = (unsigned int)(p0 >> 32) ^ c3 ^ k1;
    c1 = (unsigned int)p1;
    c3 = (unsigned int)p0;
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  w[0] = c0, w[1] = c1, w[2] = c2, w[3] = c3;
}
KILN_DEVICE float kiln_unit_float(unsigned int x) { return (float)(x >> 8) * 0x1.0p-24f; }
KILN_DEVICE double kiln_unit_double(unsigned int hi, unsigned int lo) {
  return (double)(((unsigned long long)hi << 21) | (lo >> 11)) * 0x1.0p-53;
}
#endif
)";

// The statement storing `value` (a float64 expression) as element `index` of `out`, converted
// as the CPU kernels convert (through float for float16 and bfloat16).
std::string store_double(DType dtype, const std::string& index, const std::string& value) {
  return "out[" + index + "] = " +
         store(dtype, "(" + std::string(CudaCBuilder::compute_type(dtype)) + ")(" + value + ")") + ";";
}

// How many elements one Philox block gives a random kernel.
int per_block(FactoryKernel kind, DType dtype) {
  switch (kind) {
    case FactoryKernel::Rand:
    case FactoryKernel::Bernoulli:
      return dtype == kFloat32 ? 4 : 2;
    case FactoryKernel::Dropout:
      return 4;
    default:
      return 2;
  }
}

// Element i0 + j of a random kernel, from the block's words w.
std::string random_element(FactoryKernel kind, DType dtype) {
  const std::string t = storage_type(dtype);
  const bool single = dtype == kFloat32;
  const std::string unit = single ? "kiln_unit_float(w[j])" : "kiln_unit_double(w[2 * j], w[2 * j + 1])";
  switch (kind) {
    case FactoryKernel::Rand:
      return "      " + store_double(dtype, "i", unit) + "\n";
    case FactoryKernel::Randn:
      // Box-Muller over the block: element 2j is r cos(theta), 2j + 1 is r sin(theta).
      return "      const double u1 = 1.0 - kiln_unit_double(w[0], w[1]);\n"
             "      const double u2 = kiln_unit_double(w[2], w[3]);\n"
             "      const double r = sqrt(-2.0 * log(u1)), theta = 2.0 * 3.14159265358979323846 * u2;\n"
             "      " + store_double(dtype, "i", "j == 0 ? r * cos(theta) : r * sin(theta)") + "\n";
    case FactoryKernel::Randint:
      return "      const unsigned long long r = ((unsigned long long)w[2 * j] << 32) | w[2 * j + 1];\n"
             "      const long long v = (long long)((unsigned long long)low + r % range);\n"
             "      " + store_double(dtype, "i", "(double)v") + "\n";
    case FactoryKernel::Bernoulli:
      return "      const " + std::string(CudaCBuilder::compute_type(dtype)) + " q = p[i * p_step];\n"
             "      if (!(q >= 0 && q <= 1)) kiln_atomic_min(bad, i);\n"
             "      out[i] = " + unit + " < q ? 1 : 0;\n";
    case FactoryKernel::Dropout:
      return "      const bool keep = kiln_unit_float(w[j]) >= p;\n"
             "      mask[i] = keep;\n"
             "      out[i] = x[i] * (keep ? (" + t + ")scale : (" + t + ")0);\n";
    default:
      KILN_FAIL("[cuda] expected a random kernel, got kind ", static_cast<int>(kind), ".");
  }
}

std::string random_source(FactoryKernel kind, DType dtype, const std::string& name) {
  const bool floating_only = kind != FactoryKernel::Randint;
  KILN_CHECK(!floating_only || dtype == kFloat32 || dtype == kFloat64, "[cuda] the ",
             kind == FactoryKernel::Dropout ? "dropout" : "random", " kernels take float32 or "
             "float64, got ", dtype, ". Fix: draw in float32 and convert with .to().");
  const std::string t = storage_type(dtype);
  std::ostringstream s;
  s << "KILN_KERNEL void " << name << "(";
  if (kind == FactoryKernel::Bernoulli) s << "const " << t << "* __restrict__ p, long long p_step, ";
  if (kind == FactoryKernel::Dropout) s << "const " << t << "* __restrict__ x, ";
  s << t << "* __restrict__ out, ";
  if (kind == FactoryKernel::Dropout) s << "unsigned char* __restrict__ mask, ";
  s << "long long n, unsigned long long key, unsigned long long first";
  if (kind == FactoryKernel::Randint) s << ", long long low, unsigned long long range";
  if (kind == FactoryKernel::Bernoulli) s << ", long long* bad";
  if (kind == FactoryKernel::Dropout) s << ", float p, double scale";
  const int per = per_block(kind, dtype);
  s << ") {\n"
    << "  const long long blocks = (n + " << per - 1 << ") / " << per << ";\n"
    << "  KILN_FOR_EACH_ELEMENT(b, blocks) {\n"
    << "    unsigned int w[4];\n"
    << "    kiln_philox(key, first + (unsigned long long)b, w);\n"
    << "    for (int j = 0; j < " << per << "; ++j) {\n"
    << "      const long long i = b * " << per << " + j;\n"
    << "      if (i >= n) break;\n"
    << random_element(kind, dtype) << "    }\n  }\n}\n";
  return s.str();
}

// ---- the kernels ----

const GeneratedKernel& kernel_for(FactoryKernel kind, const char* op, const Tensor& out) {
  return kernel_of_kind(out.device().index, op, kind, out.dtype(), factory_kernel_source);
}

void arange_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::ArangeAttrs&>(c.attrs);
  const Tensor& out = c.outputs[0];
  long long n = out.numel();
  if (n == 0) return;
  void* out_pointer = out.raw_data();
  double start = a.start, step = a.step;
  void* params[] = {&out_pointer, &n, &start, &step};
  launch_over_elements(kernel_for(FactoryKernel::Arange, "arange", out), n, params);
}

void linspace_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::LinspaceAttrs&>(c.attrs);
  const Tensor& out = c.outputs[0];
  long long n = out.numel();
  if (n == 0) return;
  void* out_pointer = out.raw_data();
  double start = a.start, end = a.end, step = n > 1 ? (a.end - a.start) / static_cast<double>(n - 1) : 0;
  void* params[] = {&out_pointer, &n, &start, &end, &step};
  launch_over_elements(kernel_for(FactoryKernel::Linspace, "linspace", out), n, params);
}

void eye_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::EyeAttrs&>(c.attrs);
  const Tensor& out = c.outputs[0];
  long long n = out.numel(), columns = a.m;
  if (n == 0) return;
  void* out_pointer = out.raw_data();
  void* params[] = {&out_pointer, &n, &columns};
  launch_over_elements(kernel_for(FactoryKernel::Eye, "eye", out), n, params);
}

// Reserves the Philox blocks for `out` (as the CPU kernels do) and launches `kind` with
// `head` (the parameters before out's pointer), out, n, key, first and `tail`.
void launch_random(FactoryKernel kind, const char* op, const Tensor& out, Generator& generator,
                   std::vector<void*> head, std::vector<void*> tail) {
  long long n = out.numel();
  if (n == 0) return;
  const int per = per_block(kind, out.dtype());
  const long long blocks = (n + per - 1) / per;
  unsigned long long key = generator.seed();
  unsigned long long first = generator.reserve(static_cast<uint64_t>(blocks));
  void* out_pointer = out.raw_data();
  std::vector<void*> params = std::move(head);
  for (void* p : {static_cast<void*>(&out_pointer), static_cast<void*>(&n), static_cast<void*>(&key),
                  static_cast<void*>(&first)})
    params.push_back(p);
  params.insert(params.end(), tail.begin(), tail.end());
  launch_over_elements(kernel_for(kind, op, out), blocks, params.data());
}

void rand_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::RandomAttrs&>(c.attrs);
  launch_random(FactoryKernel::Rand, "rand", c.outputs[0], a.generator.get(), {}, {});
}

void randn_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::RandomAttrs&>(c.attrs);
  launch_random(FactoryKernel::Randn, "randn", c.outputs[0], a.generator.get(), {}, {});
}

void randint_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::RandintAttrs&>(c.attrs);
  long long low = a.low;
  unsigned long long range = static_cast<uint64_t>(a.high) - static_cast<uint64_t>(a.low);
  launch_random(FactoryKernel::Randint, "randint", c.outputs[0], a.generator.get(), {}, {&low, &range});
}

// p is read in row-major order, as on the CPU: a broadcast scalar directly, anything else
// dense. An out-of-range p is reported after the kernel (one synchronization per call, where
// PyTorch asserts on the device) with the CPU kernel's message.
void bernoulli_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::BernoulliAttrs&>(c.attrs);
  const Tensor& p_in = c.inputs[0];
  const Tensor& out = c.outputs[0];
  bool scalar = true;
  for (int64_t d = 0; d < p_in.dim(); ++d) scalar &= p_in.stride(d) == 0 || p_in.size(d) == 1;
  const Tensor p = scalar || p_in.is_contiguous() ? p_in : contiguous_on_gpu(p_in);
  if (out.numel() == 0) return;
  const Tensor bad = failure_flag(out.device());
  const void* p_pointer = p.raw_data();
  long long p_step = scalar ? 0 : 1;
  void* bad_pointer = bad.raw_data();
  launch_random(FactoryKernel::Bernoulli, "bernoulli", out, a.generator.get(), {&p_pointer, &p_step},
                {&bad_pointer});
  check_failure(bad, [p, scalar](int64_t i) {
    const Tensor bad_p = element(p, scalar ? 0 : i);  // a broadcast scalar's one element
    std::ostringstream value;  // printed in p's dtype, as the CPU kernel prints it
    if (p.dtype() == kFloat32)
      value << bad_p.item<float>();
    else
      value << bad_p.item<double>();
    KILN_FAIL("[bernoulli] expected every probability in [0, 1], got ", value.str(), " at element ", i,
              ". Fix: clamp p with kiln::clamp(p, 0, 1), or pass probabilities rather than logits.");
  });
}

void dropout_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::DropoutAttrs&>(c.attrs);
  const Tensor x = c.inputs[0].is_contiguous() ? c.inputs[0] : contiguous_on_gpu(c.inputs[0]);
  const Tensor &out = c.outputs[0], &mask = c.outputs[1];
  long long n = x.numel();
  if (n == 0) return;
  const GeneratedKernel& kernel = kernel_for(FactoryKernel::Dropout, "dropout", out);
  const void* x_pointer = x.raw_data();
  void* out_pointer = out.raw_data();
  void* mask_pointer = mask.raw_data();
  unsigned long long seed = a.seed, offset = a.offset;
  float p = static_cast<float>(a.p);
  double scale = a.p < 1 ? 1.0 / (1.0 - a.p) : 0;  // p = 1 keeps nothing; its scale is unused
  void* params[] = {&x_pointer, &out_pointer, &mask_pointer, &n, &seed, &offset, &p, &scale};
  launch_over_elements(kernel, (n + 3) / 4, params);
}

}  // namespace

std::string factory_kernel_source(FactoryKernel kind, DType dtype, const std::string& name) {
  const std::string t = storage_type(dtype);
  std::ostringstream s;
  s << "// kiln eager kernel: " << name << "(" << dtype_name(dtype) << ")\n" << kKernelPrelude;
  switch (kind) {
    case FactoryKernel::Arange:
      s << "KILN_KERNEL void " << name << "(" << t << "* __restrict__ out, long long n, double start, "
        << "double step) {\n  KILN_FOR_EACH_ELEMENT(i, n) " << store_double(dtype, "i", "start + (double)i * step")
        << "\n}\n";
      break;
    case FactoryKernel::Linspace:
      // Counting down from `end` in the second half makes the last value exactly `end`.
      s << "KILN_KERNEL void " << name << "(" << t << "* __restrict__ out, long long n, double start, "
        << "double end, double step) {\n  KILN_FOR_EACH_ELEMENT(i, n) "
        << store_double(dtype, "i",
                        "n == 1 || i < n / 2 ? start + step * (double)i : end - step * (double)(n - 1 - i)")
        << "\n}\n";
      break;
    case FactoryKernel::Eye:
      s << "KILN_KERNEL void " << name << "(" << t << "* __restrict__ out, long long n, long long columns) {\n"
        << "  KILN_FOR_EACH_ELEMENT(i, n) " << store_double(dtype, "i", "i / columns == i % columns ? 1.0 : 0.0")
        << "\n}\n";
      break;
    default:
      s << kPhiloxSource << random_source(kind, dtype, name);
  }
  return s.str();
}

void register_factory_kernels() {
  auto set = [](OpDef& op, KernelFn kernel) { op.kernels[static_cast<size_t>(DeviceType::CUDA)] = kernel; };
  set(ops::arange, arange_kernel);
  set(ops::linspace, linspace_kernel);
  set(ops::eye, eye_kernel);
  set(ops::rand, rand_kernel);
  set(ops::randn, randn_kernel);
  set(ops::randint, randint_kernel);
  set(ops::bernoulli, bernoulli_kernel);
  set(ops::dropout, dropout_kernel);
}

}  // namespace kiln::cuda
