// Every rank announced before a group connects (rendezvous.h).
#include "distributed/rendezvous.h"

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

}  // namespace kiln::distributed
