// kiln: the umbrella header: the public API (tensors and their ops, autograd, nn, optim,
// data, checkpoints, compile/explain, export). Internal seams (kiln/dispatch.h) stay out, and
// the demo model catalog (kiln/models.h) is included on its own by the programs that use it.
#pragma once

#include "kiln/autograd.h"
#include "kiln/compile.h"
#include "kiln/control_flow.h"
#include "kiln/cuda/caching_allocator.h"
#include "kiln/cuda/device.h"
#include "kiln/cuda/fused_kernels.h"
#include "kiln/cuda/stream.h"
#include "kiln/data/idx.h"
#include "kiln/data/loader.h"
#include "kiln/debug_print.h"
#ifdef KILN_WITH_COMPILER  // programs linked with kiln::kiln (not kiln::eager alone)
#include "kiln/export.h"
#endif
#include "kiln/generator.h"
#include "kiln/init.h"
#include "kiln/log.h"
#include "kiln/nn.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/init.h"
#include "kiln/nn/utils.h"
#include "kiln/optim.h"
#include "kiln/serialize/checkpoint.h"
#include "kiln/serialize/json.h"
#include "kiln/serialize/safetensors.h"
#include "kiln/tensor.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/device.h"
#include "kiln/tensor_ops/factory.h"
#include "kiln/tensor_ops/layout.h"
#include "kiln/tensor_ops/linalg.h"
#include "kiln/tensor_ops/random.h"
#include "kiln/tensor_ops/reduction.h"
#include "kiln/tensor_ops/view.h"
#include "kiln/thread_pool.h"
