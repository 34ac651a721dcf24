// Starting the processes of a data-parallel job, like torchrun:
//
//   kiln launch --nproc 2 -- kiln train --model fashion_mlp
//
// starts `nproc` copies of the command on this machine with the rendezvous environment set
// (KILN_RANK, KILN_LOCAL_RANK, KILN_WORLD_SIZE, KILN_LOCAL_WORLD_SIZE, KILN_MASTER_ADDR,
// KILN_MASTER_PORT), prefixes every line each one prints with its rank, and watches them:
// when one rank fails, the others are ended (SIGTERM, then SIGKILL after a grace period) and
// the launch fails naming the rank and how it ended. A job never hangs on a dead rank.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace kiln::distributed {

struct LaunchOptions {
  std::vector<std::string> command;  // argv of every rank; command[0] is looked up in PATH
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free port on this machine (single-node jobs only)
  // Extra environment for every rank (name, value), after the rendezvous variables.
  std::vector<std::pair<std::string, std::string>> env;
  bool prefix_output = true;  // "[rank 1] " before every line
  // After the first failure, how long the other ranks get between SIGTERM and SIGKILL.
  std::chrono::milliseconds grace{std::chrono::seconds(5)};
  // Where the ranks' stdout and stderr lines go, and the launcher's own messages (stderr_fd).
  // Tests and embedders redirect them; the descriptors stay open and owned by the caller.
  int stdout_fd = 1;
  int stderr_fd = 2;
};

// How one rank ended.
struct RankExit {
  int rank = -1;
  int pid = -1;
  int exit_code = 0;  // valid when signal == 0
  int signal = 0;     // the signal that killed it, or 0
  // Signalled by the launcher while running: another rank failed first, or the launcher
  // itself got SIGINT/SIGTERM.
  bool ended_by_launcher = false;
  bool ok() const { return signal == 0 && exit_code == 0; }
  std::string describe() const;  // "exited with status 3", "was killed by signal 9 (SIGKILL)"
};

struct LaunchResult {
  // 0 when every rank succeeded; else the first failed rank's status (128 + the signal when
  // one killed it), or 128 + the signal that interrupted the launcher.
  int exit_code = 0;
  std::vector<RankExit> ranks;  // by local rank
  int first_failed_rank = -1;   // global rank of the first failure, -1 when none
  std::string message;          // one line: what failed, empty on success
};

// Runs the job to the end. Throws kiln::Error for bad options (nproc < 1, empty command, a
// command that cannot be started, ...); ranks already started are ended first.
//
// While it runs, SIGINT and SIGTERM sent to this process end the job (SIGTERM to every rank,
// SIGKILL after the grace; a second one kills at once) and launch() returns exit code 128 +
// the signal; the previous handlers are restored on return. Every rank is a child of the
// calling thread (it gets SIGKILL when that thread ends) in a process group of its own, whose
// leftover processes are killed when the job ends; its stdin is /dev/null. One launch at a time
// per process: a second concurrent call waits for the first.
LaunchResult launch(const LaunchOptions& options);

}  // namespace kiln::distributed
