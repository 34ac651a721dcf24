// Random factories (rand, randn, randint, bernoulli) and linspace/eye.
#pragma once

#include "kiln/generator.h"
#include "kiln/tensor.h"
#include "kiln/tensor_ops/factory.h"

namespace kiln {}  // namespace kiln
