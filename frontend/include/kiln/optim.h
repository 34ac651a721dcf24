// kiln::optim: optimizers (SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta, Adamax, NAdam,
// RAdam, LBFGS) and learning-rate schedulers (StepLR, CosineAnnealingLR, ExponentialLR, LinearLR,
// LambdaLR, OneCycleLR, SequentialLR, ReduceLROnPlateau).
#pragma once

#include "kiln/optim/adadelta.h"
#include "kiln/optim/adagrad.h"
#include "kiln/optim/adam.h"
#include "kiln/optim/adamax.h"
#include "kiln/optim/adamw.h"
#include "kiln/optim/cosine_annealing_lr.h"
#include "kiln/optim/exponential_lr.h"
#include "kiln/optim/lambda_lr.h"
#include "kiln/optim/lbfgs.h"
#include "kiln/optim/linear_lr.h"
#include "kiln/optim/lr_scheduler.h"
#include "kiln/optim/nadam.h"
#include "kiln/optim/one_cycle_lr.h"
#include "kiln/optim/optimizer.h"
#include "kiln/optim/radam.h"
#include "kiln/optim/reduce_lr_on_plateau.h"
#include "kiln/optim/rmsprop.h"
#include "kiln/optim/sequential_lr.h"
#include "kiln/optim/sgd.h"
#include "kiln/optim/step_lr.h"
