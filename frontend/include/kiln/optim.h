// kiln::optim: optimizers (SGD, Adam, AdamW, RMSprop) and learning-rate schedulers.
#pragma once

#include "kiln/optim/adam.h"
#include "kiln/optim/adamw.h"
#include "kiln/optim/cosine_annealing_lr.h"
#include "kiln/optim/lr_scheduler.h"
#include "kiln/optim/optimizer.h"
#include "kiln/optim/rmsprop.h"
#include "kiln/optim/sgd.h"
#include "kiln/optim/step_lr.h"
