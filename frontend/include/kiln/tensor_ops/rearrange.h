// Rearranging elements, as compositions of the table's ops (so they run on every device, are
// differentiated through their parts and trace into graphs the compiler already fuses):
// flip, roll, repeat, tile, repeat_interleave, diagonal, diag, diag_embed. PyTorch's names
// and conventions.
#pragma once

#include <optional>

#include "kiln/tensor.h"

namespace kiln {

// x with the order of its elements reversed along each of `dims` (a copy: kiln's views have no
// negative strides).
Tensor flip(const Tensor& x, IntList dims);
// x shifted circularly by shifts[i] along dims[i] (elements leaving one end enter at the
// other); with no dims, x is flattened, rolled, and given its shape back.
Tensor roll(const Tensor& x, IntList shifts, IntList dims = {});
// x copied repeats[i] times along each dim; repeats may have more entries than x has dims
// (x gains leading dims of size 1 first), not fewer.
Tensor repeat(const Tensor& x, IntList repeats);
// repeat() that also takes fewer entries than x has dims (the missing leading ones are 1).
Tensor tile(const Tensor& x, IntList reps);
// Each element (slice along `dim`) repeated `repeats` times in place: [a, b] -> [a, a, b, b].
// Without a dim, x is flattened first.
Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim = std::nullopt);

// The diagonal of dims dim1 and dim2 at `offset` (above the main one when positive), as the
// last dim (a view when x's layout allows, else a copy).
Tensor diagonal(const Tensor& x, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1);
// 1-D x: the square matrix with x on diagonal `offset`; 2-D x: that diagonal, a copy.
Tensor diag(const Tensor& x, int64_t offset = 0);
// The last dim of x spread on diagonal `offset` of new last two dims (batched diag).
Tensor diag_embed(const Tensor& x, int64_t offset = 0);

}  // namespace kiln
