// Planning an elementwise kernel's reads from the tensors' strides, and writing its CUDA C
// (kiln/cuda/elementwise_kernels.h). Nothing here needs a GPU or NVRTC: tests check the plan
// and compile the source on the host.
#include <algorithm>
#include <sstream>

#include "cuda_c_builder.h"
#include "kernel_source.h"
#include "kiln/cuda/elementwise_kernels.h"
#include "kiln/error.h"
#include "kiln/tensor.h"

namespace kiln::cuda {

namespace {

// A dim of the iteration space and each input's stride along it, then the output's.
struct Dim {
  int64_t size;
  std::array<int64_t, kMaxKernelInputs + 1> strides;
};

// Whether `strides` (of operand k over the merged dims, innermost last) step densely.
bool dense_over(const std::vector<Dim>& dims, size_t k) {
  int64_t expected = 1;
  for (size_t d = dims.size(); d-- > 0;) {
    if (dims[d].strides[k] != expected) return false;
    expected *= dims[d].size;
  }
  return true;
}

const char* access_letter(InputAccess a) {
  switch (a) {
    case InputAccess::Dense:
      return "d";
    case InputAccess::Single:
      return "1";
    case InputAccess::Strided:
      return "s";
    case InputAccess::Value:
      return "v";
  }
  return "?";
}

}  // namespace

ElementwisePlan plan_elementwise(std::span<const Tensor> inputs, IntList out_sizes,
                                 IntList out_strides) {
  KILN_CHECK(inputs.size() <= kMaxKernelInputs, "[cuda] elementwise kernels take at most ",
             kMaxKernelInputs, " inputs, got ", inputs.size(), ".");
  ElementwisePlan plan;
  plan.numel = numel(out_sizes);
  const size_t n = out_sizes.size();
  const Shape contiguous = contiguous_strides(out_sizes);
  if (out_strides.empty()) out_strides = contiguous;
  const size_t out = kMaxKernelInputs;  // the output's column of Dim::strides
  // The output's dims, innermost first, each input's stride along it (0 where it broadcasts)
  // and the output's; dims of size 1 drop out.
  std::vector<Dim> dims;
  for (size_t d = n; d-- > 0;) {
    if (out_sizes[d] == 1) continue;
    Dim dim{out_sizes[d], {}};
    for (size_t k = 0; k < inputs.size(); ++k) {
      const Tensor& t = inputs[k];
      const int64_t j = static_cast<int64_t>(d) - static_cast<int64_t>(n - t.sizes().size());
      dim.strides[k] = (j < 0 || t.sizes()[static_cast<size_t>(j)] == 1) ? 0 : t.strides()[static_cast<size_t>(j)];
    }
    dim.strides[out] = out_strides[d];
    // Merges into the dim inside it when every operand steps over both as over one.
    if (!dims.empty()) {
      Dim& inner = dims.back();
      bool merges = dim.strides[out] == inner.strides[out] * inner.size;
      for (size_t k = 0; k < inputs.size(); ++k)
        merges = merges && dim.strides[k] == inner.strides[k] * inner.size;
      if (merges) {
        inner.size *= dim.size;
        continue;
      }
    }
    dims.push_back(dim);
  }
  std::reverse(dims.begin(), dims.end());  // outermost first, as the kernel indexes

  plan.output_strided = !dense_over(dims, out);
  bool any_strided = plan.output_strided;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const InputAccess access = inputs[k].numel() == 1  ? InputAccess::Single
                               : dense_over(dims, k) ? InputAccess::Dense
                                                     : InputAccess::Strided;
    any_strided = any_strided || access == InputAccess::Strided;
    plan.access.push_back(access);
  }
  plan.strides.resize(inputs.size());
  if (!any_strided) return plan;
  KILN_CHECK(dims.size() <= kMaxKernelDims, "[cuda] expected an elementwise op's operands to "
             "need at most ", kMaxKernelDims, " dims once contiguous dims merge, found ",
             dims.size(), " (output ", shape_str(out_sizes), "). Fix: make the strided inputs "
             "contiguous first (x.contiguous()).");
  plan.rank = static_cast<int>(dims.size());
  for (size_t d = 0; d < dims.size(); ++d) {
    plan.sizes[d] = dims[d].size;
    for (size_t k = 0; k < inputs.size(); ++k) plan.strides[k][d] = dims[d].strides[k];
    plan.output_strides[d] = dims[d].strides[out];
  }
  return plan;
}

void read_host_scalars_by_value(ElementwisePlan& plan, std::span<const Tensor> inputs, Device device) {
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (inputs[k].device() == device) continue;
    KILN_CHECK(inputs[k].dim() == 0, "[cuda] an elementwise kernel on ", device, " reads other "
               "devices' tensors only when they are 0-d scalars, got ", inputs[k].type_str(),
               " on ", inputs[k].device(), ". Fix: move it with .to(", device, ").");
    plan.access[k] = InputAccess::Value;
  }
}

KernelDims kernel_dims(const ElementwisePlan& plan) {
  KernelDims out{};
  for (int d = 0; d < plan.rank; ++d) {
    out.sizes[d] = plan.sizes[static_cast<size_t>(d)];
    for (size_t k = 0; k < plan.strides.size(); ++k)
      out.strides[k][d] = plan.strides[k][static_cast<size_t>(d)];
    out.strides[kMaxKernelInputs][d] = plan.output_strides[static_cast<size_t>(d)];
  }
  return out;
}

std::string elementwise_kernel_key(const OpDef& op, const Attrs& attrs,
                                   std::span<const DType> inputs, DType output,
                                   const ElementwisePlan& plan) {
  std::ostringstream key;
  key << op.name << attrs.str() << "(";
  for (size_t k = 0; k < inputs.size(); ++k)
    key << (k ? "," : "") << dtype_name(inputs[k]) << ":" << access_letter(plan.access[k]);
  key << ")->" << dtype_name(output) << (plan.output_strided ? ":s" : "") << "/rank" << plan.rank
      << (plan.output_aliases_input ? "/aliased" : "");
  return key.str();
}

std::string elementwise_kernel_source(const OpDef& op, const Attrs& attrs,
                                      std::span<const DType> inputs, DType output,
                                      const ElementwisePlan& plan, const std::string& name) {
  KILN_CHECK(op.scalar_body, "[cuda] op ", op.name, " has no scalar body, so no generated "
             "elementwise kernel. Fix: give it a CUDA kernel of its own.");
  CudaCBuilder b;
  std::vector<ScalarValue> operands;
  std::string params;
  for (size_t k = 0; k < inputs.size(); ++k) {
    operands.push_back(b.parameter("a" + std::to_string(k), inputs[k]));
    params += std::string(k ? ", " : "") + CudaCBuilder::compute_type(inputs[k]) + " a" + std::to_string(k);
  }
  const ScalarValue result = op.scalar_body(b, attrs, operands);
  KILN_CHECK(b.dtype(result) == output, "[cuda] ", op.name, "'s scalar body returned ",
             b.dtype(result), " but the op's output is ", output,
             ". Fix: cast the result in the op's scalar_body.");

  std::ostringstream s;
  s << "// kiln eager kernel: " << elementwise_kernel_key(op, attrs, inputs, output, plan) << "\n"
    << kKernelPrelude << "KILN_DEVICE " << CudaCBuilder::compute_type(output) << " " << name << "_body("
    << params << ") {\n"
    << b.statements() << "  return " << b.name(result) << ";\n}\n"
    << "KILN_KERNEL void " << name << "(";
  const char* qualifier = plan.output_aliases_input ? "" : " __restrict__";
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (plan.access[k] == InputAccess::Value)
      s << "const " << storage_type(inputs[k]) << " in" << k << ", ";
    else
      s << "const " << storage_type(inputs[k]) << "*" << qualifier << " in" << k << ", ";
  }
  s << storage_type(output) << "*" << qualifier << " out, long long n, KilnDims dims) {\n"
    << "  KILN_FOR_EACH_ELEMENT(i, n) {\n";
  if (plan.rank > 0) {
    // The strided operands' offsets from the flat index, outermost dim last.
    s << "    long long rest = i;\n";
    for (size_t k = 0; k < inputs.size(); ++k)
      if (plan.access[k] == InputAccess::Strided) s << "    long long o" << k << " = 0;\n";
    if (plan.output_strided) s << "    long long o_out = 0;\n";
    for (int d = plan.rank; d-- > 0;) {
      const std::string index = d == 0 ? "rest" : "rest % dims.sizes[" + std::to_string(d) + "]";
      s << "    {\n      const long long index = " << index << ";\n";
      for (size_t k = 0; k < inputs.size(); ++k)
        if (plan.access[k] == InputAccess::Strided)
          s << "      o" << k << " += index * dims.strides[" << k << "][" << d << "];\n";
      if (plan.output_strided)
        s << "      o_out += index * dims.strides[" << kMaxKernelInputs << "][" << d << "];\n";
      if (d > 0) s << "      rest /= dims.sizes[" << d << "];\n";
      s << "    }\n";
    }
  }
  std::string call = name + "_body(";
  for (size_t k = 0; k < inputs.size(); ++k) {
    const std::string in = "in" + std::to_string(k);
    const std::string element = plan.access[k] == InputAccess::Value    ? in
                                : plan.access[k] == InputAccess::Dense  ? in + "[i]"
                                : plan.access[k] == InputAccess::Single ? in + "[0]"
                                                                        : in + "[o" + std::to_string(k) + "]";
    call += (k ? ", " : "") + load(inputs[k], element);
  }
  s << "    out[" << (plan.output_strided ? "o_out" : "i") << "] = " << store(output, call + ")")
    << ";\n  }\n}\n";
  return s.str();
}

}  // namespace kiln::cuda
