// Eager factory ops on GPUs: arange, linspace and eye, and the random ones, rand, randn,
// randint, bernoulli and dropout. The random kernels draw the CPU kernels' Philox streams
// (kiln/ops/factory.h, kiln/ops/dropout.h) block for block, so a seed gives the same numbers
// on either device: rand, randint, bernoulli and dropout bit for bit, randn to the last bit
// or two of float64 (its log, sqrt, cos and sin are libdevice's on the GPU).
//
// Each kernel is generated per op and dtype and compiled by NVRTC at its first use, like the
// elementwise ones. The random kernels run one thread per Philox block.
#pragma once

#include <string>

#include "kiln/dtype.h"

namespace kiln::cuda {

enum class FactoryKernel {
  Arange,     // (T* out, long long n, double start, double step)
  Linspace,   // (T* out, long long n, double start, double end, double step)
  Eye,        // (T* out, long long n, long long columns)
  Rand,       // (T* out, long long n, unsigned long long key, unsigned long long first)
  Randn,      // as rand
  Randint,    // as rand, then (long long low, unsigned long long range)
  Bernoulli,  // (const T* p, long long p_step, T* out, long long n, unsigned long long key,
              //  unsigned long long first, long long* bad): bad = the first element whose p
              //  is outside [0, 1] (left alone when none is)
  Dropout,    // (const T* x, T* out, unsigned char* mask, long long n, unsigned long long seed,
              //  unsigned long long offset, float p, double scale)
};

// The CUDA C of `kind`'s kernel for outputs (bernoulli: probabilities; dropout: inputs) of
// `dtype`, an entry named `name`.
std::string factory_kernel_source(FactoryKernel kind, DType dtype, const std::string& name);

// Fills the CUDA kernel slots of arange, linspace, eye, rand, randn, randint, bernoulli and
// dropout.
void register_factory_kernels();

}  // namespace kiln::cuda
