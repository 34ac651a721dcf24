// kiln::models: the seed model families (config structs + build), the catalog by name,
// checkpoints that carry their config, and the shared classifier training loop.
#pragma once

#include "kiln/models/batch_norm_cnn.h"
#include "kiln/models/config.h"
#include "kiln/models/fashion_mlp.h"
#include "kiln/models/halving_mlp.h"
#include "kiln/models/lazy_cnn.h"
#include "kiln/models/registry.h"
#include "kiln/models/residual_mlp.h"
#include "kiln/models/saved_model.h"
#include "kiln/models/training.h"
#include "kiln/models/transformer_classifier.h"
