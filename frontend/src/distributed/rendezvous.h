// What every process group does in the store around its engine, whatever the engine: each
// rank announces itself and waits for the others, so that a rank that never came is named
// instead of the engine's own connect hanging or failing without a name; and each rank
// publishes its host and process id, so that a failure can name the peers on this machine
// whose process is gone.
#pragma once

#include <string>
#include <vector>

#include "kiln/distributed/store.h"

namespace kiln::distributed {

// Returns once ranks 0..size-1 all announced themselves under "<prefix>/joined/"; throws a
// kiln::Error naming the ranks still missing after `timeout`.
void wait_for_every_rank(Store& store, const std::string& prefix, int rank, int size, Milliseconds timeout);

// The processes of the group's ranks that run on this machine.
class PeerProcesses {
 public:
  PeerProcesses() = default;
  // Publishes this rank's "host pid" under "<prefix>/pid/" and reads every rank's (waiting up
  // to `timeout`); ranks on other hosts, and threads of this process, are not watched.
  PeerProcesses(Store& store, const std::string& prefix, int rank, int size, Milliseconds timeout);
  // "rank 1, rank 3": the watched peers whose process has ended (a zombie has); "" if none.
  std::string gone() const;

 private:
  std::vector<int> pid_;  // by rank: a watched peer's process id, else 0
};

}  // namespace kiln::distributed
