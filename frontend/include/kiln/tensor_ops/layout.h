// Layout functions: cat, stack, split, chunk, gather, scatter_add, index_select,
// masked_fill, tril, triu.
#pragma once

#include <vector>

#include "kiln/tensor.h"

namespace kiln {}  // namespace kiln
