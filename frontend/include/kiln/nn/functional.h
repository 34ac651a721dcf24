// kiln::nn::functional: the neural-network functions (softmax, losses, convolution,
// pooling, normalization, dropout, embedding, pad, one_hot).
#pragma once

#include "kiln/tensor.h"

namespace kiln::nn::functional {}  // namespace kiln::nn::functional
