// kiln: the umbrella header.
#pragma once

#include "kiln/autograd.h"
#include "kiln/dispatch.h"
#include "kiln/generator.h"
#include "kiln/init.h"
#include "kiln/nn/functional.h"
#include "kiln/tensor.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/factory.h"
#include "kiln/tensor_ops/layout.h"
#include "kiln/tensor_ops/linalg.h"
#include "kiln/tensor_ops/random.h"
#include "kiln/tensor_ops/reduction.h"
#include "kiln/tensor_ops/view.h"
#include "kiln/thread_pool.h"
