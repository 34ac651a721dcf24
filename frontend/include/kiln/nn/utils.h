// Gradient clipping, as torch.nn.utils.clip_grad_norm_ / clip_grad_value_, and a check that
// a module's weights are finite.
#pragma once

#include <vector>

#include "kiln/tensor.h"

namespace kiln::nn::utils {

// Scales the .grad of every parameter (those without one are skipped) by
// min(1, max_norm / (total_norm + 1e-6)), where total_norm is the norm_type-norm of all
// gradients together (norm_type = inf: the largest |g|). Returns total_norm, computed
// before clipping. A non-finite total norm throws when error_if_nonfinite, else the
// gradients are scaled by it (and become nan), as in PyTorch.
double clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm,
                       double norm_type = 2.0, bool error_if_nonfinite = false);

// Clamps every .grad element into [-clip_value, clip_value].
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);

}  // namespace kiln::nn::utils

namespace kiln::nn {

class Module;

// Throws kiln::Error naming the first parameter or buffer of `module` (by its path) that
// holds NaN or an infinity, with how many elements do and the first one's index: a loaded
// checkpoint whose weights diverged, or were damaged, fails here instead of producing
// NaN outputs (`kiln eval --check-finite`). Integer and bool tensors are skipped.
void check_finite(const Module& module);

}  // namespace kiln::nn
