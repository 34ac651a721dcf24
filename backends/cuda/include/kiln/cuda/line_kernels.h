// The ops that work line by line along a dim on CUDA tensors: sort and topk, cumsum and cumprod,
// searchsorted.
//
// sort and topk: each line along the dim is copied into a row padded to a power of two P,
// with its positions; a bitonic network (log2(P)·(log2(P)+1)/2 passes of one compare-exchange
// kernel each, O(n log² n) work, any line length) orders each row by (value, position) under
// kiln/ops/sort.h's total order, padding last; the first n (or k) of each row are the result.
// The position breaks ties, so the result is the stable sort's and the CPU's, exactly.
//
// cumsum and cumprod: one thread per line walks it in order, accumulating floating values in
// double and integers in int64 like the CPU kernel, so both give the same sums. Lines run in
// parallel; a single very long line runs on one thread (a block-parallel scan is the next step
// where one line dominates).
//
// searchsorted: one thread per value binary-searches its line under sort's order.
#pragma once

#include <string>

#include "kiln/dtype.h"

namespace kiln::cuda {

enum class LineKernel {
  SortFill,      // (const T* x, T* keys, long long* positions, long long count, long long n,
                 //  long long padded, long long inner): rows of keys and positions, padding -1
  SortExchange,  // (T* keys, long long* positions, long long count, long long padded,
                 //  long long k, long long j, int descending): one bitonic pass
  SortTake,      // (const T* keys, const long long* positions, T* values, long long* indices,
                 //  long long count, long long m, long long padded, long long inner): the first
                 //  m of each row
  Cumsum,        // (const T* x, O* out, long long lines, long long n, long long inner)
  Cumprod,       // likewise
  SearchSorted,  // (const T* sorted, const T* values, long long* out, long long count, long long m,
                 //  long long n, long long shared, int right): a binary search per value in its
                 //  line of m sorted elements (line e / n, or line 0 when shared)
};

// The CUDA C of `kind`'s kernel for inputs of `dtype`, an entry named `name`.
std::string line_kernel_source(LineKernel kind, DType dtype, const std::string& name);

// Fills the CUDA kernel slots of sort, topk, cumsum, cumprod and searchsorted.
void register_line_kernels();

}  // namespace kiln::cuda
