// Definition of matmul (the contraction primitive).
#include "kiln/ops/linalg.h"

#include "kiln/ops/infer_util.h"

namespace kiln::ops {

namespace {

// a: [..., M, K], b: [..., K, N] -> [broadcast(...), M, N]. Both operands have rank >= 2.
void infer_matmul(InferCall& c) {
  infer::check_arity(c, 2);
  infer::check_same_dtype(c);
  const Tensor& a = c.inputs[0];
  const Tensor& b = c.inputs[1];
  // float16 and bfloat16 are storage-only types, except for GEMMs on GPUs: tensor cores multiply
  // them with float32 accumulation (cuBLASLt), as torch.matmul does in half precision.
  const bool half = a.dtype() == DType::Float16 || a.dtype() == DType::BFloat16;
  KILN_CHECK(!half || a.device().is_cuda(), "[matmul] ", a.dtype(), " is a storage-only type on ",
             a.device(), "; kiln computes in float32 there (GPUs multiply float16 and bfloat16 "
             "on tensor cores). Fix: convert with .to(kiln::kFloat32) first, or multiply on a GPU.");
  if (!half) infer::check_compute_dtype(c, 0);
  KILN_CHECK(a.dtype() != DType::Bool, "[matmul] does not accept bool tensors. Fix: convert with .to().");
  KILN_CHECK(a.dim() >= 2 && b.dim() >= 2, "[matmul] the primitive expects operands of rank >= 2, got ",
             a.type_str(), " and ", b.type_str(), ". Fix: call kiln::matmul, which handles 1-D operands.");
  int64_t m = a.size(-2), k = a.size(-1), k2 = b.size(-2), n = b.size(-1);
  KILN_CHECK(k == k2, "[matmul] inner dims differ: ", a.type_str(), " @ ", b.type_str(), " multiplies ", m, "x", k,
             " by ", k2, "x", n, ". Fix: the last dim of the first operand must equal the second-to-last "
             "dim of the second (transpose one of them?).");
  IntList ab = a.sizes().subspan(0, static_cast<size_t>(a.dim() - 2));
  IntList bb = b.sizes().subspan(0, static_cast<size_t>(b.dim() - 2));
  Shape out = broadcast_shapes(ab, bb, "matmul");
  out.push_back(m);
  out.push_back(n);
  c.outputs.push_back({a.dtype(), out, a.device()});
}

}  // namespace

OpDef matmul("matmul", {"a", "b"}, infer_matmul, LoweringClass::Contraction);

}  // namespace kiln::ops
