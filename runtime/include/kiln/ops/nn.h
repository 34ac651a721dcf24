// The neural-network ops, one header per concept; include this for all of them.
#pragma once

#include "kiln/ops/attention.h"
#include "kiln/ops/conv.h"
#include "kiln/ops/dropout.h"
#include "kiln/ops/embedding.h"
#include "kiln/ops/loss.h"
#include "kiln/ops/norm.h"
#include "kiln/ops/one_hot.h"
#include "kiln/ops/pad.h"
#include "kiln/ops/pool.h"
#include "kiln/ops/softmax.h"
