// Eager scaled_dot_product_attention on GPUs, composed of kiln's other CUDA kernels: the
// scores (q · scale) kᵀ by cuBLASLt, the causal and given masks, a "safe" softmax (a query
// that may attend to no key gets zeros and a logsumexp of -inf, as on the CPU) and the
// weights times v by cuBLASLt. The [..., L, S] score matrix is materialized; a flash-style
// kernel (key blocks with an online softmax, as the CPU's float32 kernel) is the next step.
#pragma once

namespace kiln::cuda {

// Fills scaled_dot_product_attention's CUDA kernel slot.
void register_attention_kernels();

}  // namespace kiln::cuda
