// Data-parallel training across processes and machines (docs/distributed.md): process
// groups and collectives, DistributedDataParallel, the launcher. The sampler that shards a
// dataset is kiln/data/distributed_sampler.h.
#pragma once

#include "kiln/data/distributed_sampler.h"
#include "kiln/distributed/ddp.h"
#include "kiln/distributed/init.h"
#include "kiln/distributed/launch.h"
#include "kiln/distributed/process_group.h"
#include "kiln/distributed/store.h"
#include "kiln/distributed/sync_batch_norm.h"
