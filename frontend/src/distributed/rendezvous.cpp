// The store-side steps every process group shares (rendezvous.h): the join, and the peers' processes.
#include "distributed/rendezvous.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "kiln/error.h"

namespace kiln::distributed {

void wait_for_every_rank(Store& store, const std::string& prefix, int rank, int size, Milliseconds timeout) {
  store.set(prefix + "/joined/" + std::to_string(rank), "1");
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(prefix + "/joined/" + std::to_string(r));
  std::vector<std::string> missing = store.wait(keys, timeout);
  if (missing.empty()) return;
  std::string absent;
  for (const std::string& key : missing) absent += (absent.empty() ? "" : ", ") + key.substr(key.rfind('/') + 1);
  KILN_FAIL("kiln::distributed::init: rank ", rank, " of ", size, " waited ", timeout.count(), " ms in ",
            store.describe(), " but rank", missing.size() > 1 ? "s " : " ", absent, " never joined. Fix: start every "
            "rank (kiln launch --nproc ", size, " ...), check that KILN_WORLD_SIZE and KILN_RANK are right on each, "
            "or raise the timeout if ranks start slowly.");
}

namespace {

// Whether process `pid` (on this machine) still runs: a zombie, waiting for its parent (kiln
// launch keeps exited ranks until the job ends), has ended.
bool process_alive(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  size_t paren = line.rfind(')');  // the command name may hold spaces and parentheses
  return paren == std::string::npos || paren + 2 >= line.size() || (line[paren + 2] != 'Z' && line[paren + 2] != 'X');
}

}  // namespace

PeerProcesses::PeerProcesses(Store& store, const std::string& prefix, int rank, int size, Milliseconds timeout) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  store.set(prefix + "/pid/" + std::to_string(rank), std::string(host) + " " + std::to_string(getpid()));
  pid_.assign(static_cast<size_t>(size), 0);
  for (int r = 0; r < size; ++r) {
    std::istringstream entry(store.get(prefix + "/pid/" + std::to_string(r), timeout));
    std::string peer_host;
    int pid = 0;
    entry >> peer_host >> pid;
    if (r != rank && peer_host == host && pid != getpid()) pid_[r] = pid;
  }
}

std::string PeerProcesses::gone() const {
  std::string names;
  for (size_t r = 0; r < pid_.size(); ++r) {
    if (pid_[r] <= 0 || process_alive(pid_[r])) continue;
    names += std::string(names.empty() ? "rank " : ", rank ") + std::to_string(r);
  }
  return names;
}

}  // namespace kiln::distributed
