// kiln::distributed::launch: the ranks' environment, their prefixed whole lines on the right
// stream, and the job's end when one rank fails (a status, a signal, SIGTERM ignored, processes
// a rank left behind, the launcher interrupted), with /bin/sh scripts as the ranks.
#include "kiln/distributed/launch.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace kiln::distributed {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// What a launch printed on its two streams (in-memory files), and how long it took.
struct JobOutput {
  LaunchResult result;
  std::string out, err;
  double seconds = 0;
};

std::string contents(int fd) {
  std::string text;
  char buf[65536];
  ssize_t n;
  for (off_t at = 0; (n = ::pread(fd, buf, sizeof buf, at)) > 0; at += n) text.append(buf, n);
  return text;
}

JobOutput run_job(LaunchOptions options) {
  const int out = ::memfd_create("launch_out", MFD_CLOEXEC);
  const int err = ::memfd_create("launch_err", MFD_CLOEXEC);
  options.stdout_fd = out;
  options.stderr_fd = err;
  JobOutput run;
  const auto start = Clock::now();
  try {
    run.result = launch(options);
  } catch (...) {
    ::close(out);
    ::close(err);
    throw;
  }
  run.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  run.out = contents(out);
  run.err = contents(err);
  ::close(out);
  ::close(err);
  return run;
}

// Every rank runs `script` with /bin/sh.
LaunchOptions sh(const std::string& script, int nproc) {
  LaunchOptions o;
  o.command = {"/bin/sh", "-c", script};
  o.nproc_per_node = nproc;
  return o;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A folder for the files ranks signal each other with, removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "kiln-launch-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Whether process `pid` is gone (or only a zombie left for init) within a second.
bool ends_soon(pid_t pid) {
  for (int i = 0; i < 100; ++i) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    if (!std::getline(stat, text)) return true;
    const size_t close = text.rfind(')');
    if (close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'Z')
      return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

// The pid a rank printed as "child PID".
pid_t printed_child(const std::string& out) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(out, m, std::regex("child (\\d+)"))) << out;
  return m.empty() ? -1 : static_cast<pid_t>(std::stol(m[1]));
}

TEST(Launch, EveryRankSeesItsRendezvousEnvironment) {
  for (int nproc : {2, 4}) {
    JobOutput run =
        run_job(sh("echo \"r=$KILN_RANK l=$KILN_LOCAL_RANK w=$KILN_WORLD_SIZE "
                   "lw=$KILN_LOCAL_WORLD_SIZE a=$KILN_MASTER_ADDR p=$KILN_MASTER_PORT\"",
                   nproc));
    EXPECT_EQ(run.result.exit_code, 0) << run.err;
    EXPECT_EQ(run.result.message, "");
    EXPECT_EQ(run.result.first_failed_rank, -1);
    EXPECT_EQ(run.err, "");
    ASSERT_EQ(run.result.ranks.size(), static_cast<size_t>(nproc));
    std::set<std::string> ports;
    std::set<int> seen;
    for (const std::string& line : lines(run.out)) {
      std::smatch m;
      ASSERT_TRUE(std::regex_match(line, m,
                                   std::regex("\\[rank (\\d)\\] r=(\\d) l=(\\d) w=(\\d) "
                                              "lw=(\\d) a=127\\.0\\.0\\.1 p=(\\d+)")))
          << line;
      EXPECT_EQ(m[1], m[2]);
      EXPECT_EQ(m[2], m[3]);
      EXPECT_EQ(std::stoi(m[4]), nproc);
      EXPECT_EQ(std::stoi(m[5]), nproc);
      seen.insert(std::stoi(m[1]));
      ports.insert(m[6]);
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(nproc)) << run.out;
    ASSERT_EQ(ports.size(), 1u) << "every rank meets at one port: " << run.out;
    EXPECT_GT(std::stoi(*ports.begin()), 0);
    for (int i = 0; i < nproc; ++i) {
      const RankExit& r = run.result.ranks[i];
      EXPECT_EQ(r.rank, i);
      EXPECT_GT(r.pid, 0);
      EXPECT_TRUE(r.ok()) << r.describe();
      EXPECT_FALSE(r.ended_by_launcher);
    }
  }
}

TEST(Launch, RanksOfLaterNodesAreOffsetByTheNodeRank) {
  LaunchOptions o =
      sh("echo \"r=$KILN_RANK l=$KILN_LOCAL_RANK w=$KILN_WORLD_SIZE "
         "lw=$KILN_LOCAL_WORLD_SIZE a=$KILN_MASTER_ADDR p=$KILN_MASTER_PORT\"",
         2);
  o.nnodes = 3;
  o.node_rank = 1;
  o.master_addr = "10.1.2.3";
  o.master_port = 29500;
  JobOutput run = run_job(o);
  EXPECT_EQ(run.result.exit_code, 0) << run.err;
  std::vector<std::string> got = lines(run.out);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::string>{"[rank 2] r=2 l=0 w=6 lw=2 a=10.1.2.3 p=29500",
                                           "[rank 3] r=3 l=1 w=6 lw=2 a=10.1.2.3 p=29500"}));
  EXPECT_EQ(run.result.ranks[1].rank, 3);
}

TEST(Launch, EveryLineIsPrefixedWithItsRankAndWhole) {
  // 4 ranks x 200 lines as fast as the shell prints them, each line in its own write.
  JobOutput run =
      run_job(sh("i=0; while [ $i -lt 200 ]; do echo \"line $i of rank $KILN_RANK "
                 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"; "
                 "i=$((i+1)); done",
                 4));
  EXPECT_EQ(run.result.exit_code, 0) << run.err;
  std::map<int, int> next;  // rank -> the line number expected next
  const std::regex whole("\\[rank (\\d)\\] line (\\d+) of rank (\\d) x{68}");
  for (const std::string& line : lines(run.out)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, whole)) << "mangled: '" << line << "'";
    ASSERT_EQ(m[1], m[3]) << line;
    EXPECT_EQ(std::stoi(m[2]), next[std::stoi(m[1])]++) << line;
  }
  EXPECT_EQ(next, (std::map<int, int>{{0, 200}, {1, 200}, {2, 200}, {3, 200}}));
}

TEST(Launch, StderrLinesGoToStderr) {
  JobOutput run = run_job(sh("echo to-out; echo to-err >&2", 2));
  EXPECT_EQ(run.result.exit_code, 0);
  std::vector<std::string> out = lines(run.out), err = lines(run.err);
  std::sort(out.begin(), out.end());
  std::sort(err.begin(), err.end());
  EXPECT_EQ(out, (std::vector<std::string>{"[rank 0] to-out", "[rank 1] to-out"}));
  EXPECT_EQ(err, (std::vector<std::string>{"[rank 0] to-err", "[rank 1] to-err"}));
}

TEST(Launch, CarriageReturnSegmentsAndUnfinishedLinesAreForwarded) {
  // A progress bar's redraws each get the prefix; "\r\n" ends one line; the last line has no
  // newline.
  const std::string script = "printf 'bar 1\\rbar 2\\rbar 3\\n'; printf 'dos\\r\\n'; printf tail";
  JobOutput run = run_job(sh(script, 1));
  EXPECT_EQ(run.out,
            "[rank 0] bar 1\r[rank 0] bar 2\r[rank 0] bar 3\n[rank 0] dos\r\n"
            "[rank 0] tail\n");
  LaunchOptions plain = sh(script, 1);
  plain.prefix_output = false;
  EXPECT_EQ(run_job(plain).out, "bar 1\rbar 2\rbar 3\ndos\r\ntail");  // the bytes as printed
}

TEST(Launch, AFailedRankEndsTheOthers) {
  LaunchOptions o = sh("if [ $KILN_RANK = 1 ]; then echo dying; exit 3; fi; sleep 60", 2);
  o.grace = 200ms;
  JobOutput run = run_job(o);
  EXPECT_LT(run.seconds, 10) << "the sleeping rank must be ended, not waited for";
  EXPECT_EQ(run.result.exit_code, 3);
  EXPECT_EQ(run.result.first_failed_rank, 1);
  const RankExit& failed = run.result.ranks[1];
  const RankExit& sleeper = run.result.ranks[0];
  EXPECT_EQ(run.result.message,
            "rank 1 (pid " + std::to_string(failed.pid) + ") exited with status 3");
  EXPECT_FALSE(failed.ended_by_launcher);
  EXPECT_EQ(failed.exit_code, 3);
  EXPECT_TRUE(sleeper.ended_by_launcher);
  EXPECT_EQ(sleeper.signal, SIGTERM) << sleeper.describe();
  EXPECT_EQ(run.out, "[rank 1] dying\n");
  EXPECT_EQ(run.err, "kiln launch: rank 1 (pid " + std::to_string(failed.pid) +
                         ") exited with status 3; ending the other 1 rank(s)\n");
}

TEST(Launch, ARankKilledByASignalFailsTheJob) {
  LaunchOptions o = sh("if [ $KILN_RANK = 1 ]; then kill -9 $$; fi; sleep 60", 3);
  o.grace = 200ms;
  JobOutput run = run_job(o);
  EXPECT_LT(run.seconds, 10);
  EXPECT_EQ(run.result.exit_code, 128 + SIGKILL);
  EXPECT_EQ(run.result.first_failed_rank, 1);
  EXPECT_EQ(run.result.ranks[1].signal, SIGKILL);
  EXPECT_EQ(run.result.message, "rank 1 (pid " + std::to_string(run.result.ranks[1].pid) +
                                    ") was killed by signal 9 (SIGKILL)");
  EXPECT_TRUE(contains(run.err, "was killed by signal 9 (SIGKILL); ending the other 2 rank(s)"))
      << run.err;
  EXPECT_TRUE(run.result.ranks[0].ended_by_launcher);
  EXPECT_TRUE(run.result.ranks[2].ended_by_launcher);
}

TEST(Launch, ARankIgnoringSigtermIsKilledAfterTheGrace) {
  TempDir dir;
  // Rank 1 fails only once rank 0 ignores SIGTERM.
  LaunchOptions o = sh("if [ $KILN_RANK = 0 ]; then trap '' TERM; touch " + dir.path() +
                           "/ready; sleep 60; fi; "
                           "while [ ! -e " +
                           dir.path() + "/ready ]; do sleep 0.01; done; exit 1",
                       2);
  o.grace = 300ms;
  JobOutput run = run_job(o);
  EXPECT_LT(run.seconds, 10);
  EXPECT_EQ(run.result.exit_code, 1);
  const RankExit& stubborn = run.result.ranks[0];
  EXPECT_EQ(stubborn.signal, SIGKILL) << stubborn.describe();
  EXPECT_TRUE(stubborn.ended_by_launcher);
  EXPECT_TRUE(contains(run.err,
                       "kiln launch: 1 rank(s) still running 300 ms after SIGTERM; "
                       "sending SIGKILL"))
      << run.err;
}

TEST(Launch, ProcessesARankStartedEndWithTheJob) {
  TempDir dir;
  // Rank 0's shell waits for a background child; the job fails; both must go.
  LaunchOptions o =
      sh("if [ $KILN_RANK = 0 ]; then sleep 60 & echo \"child $!\"; touch " + dir.path() +
             "/ready; wait; fi; "
             "while [ ! -e " +
             dir.path() + "/ready ]; do sleep 0.01; done; exit 2",
         2);
  o.grace = 200ms;
  JobOutput run = run_job(o);
  EXPECT_LT(run.seconds, 10);
  EXPECT_EQ(run.result.exit_code, 2);
  EXPECT_TRUE(ends_soon(printed_child(run.out)));

  // A rank that succeeds but leaves a process behind (holding its stdout open): the job ends
  // when the rank does, and the leftover with it.
  JobOutput leftover = run_job(sh("sleep 60 & echo \"child $!\"", 1));
  EXPECT_LT(leftover.seconds, 10);
  EXPECT_EQ(leftover.result.exit_code, 0);
  EXPECT_TRUE(ends_soon(printed_child(leftover.out)));
}

TEST(Launch, SigintOrSigtermToTheLauncherEndsTheJob) {
  struct sigaction before {};
  sigaction(SIGINT, nullptr, &before);
  for (int sig : {SIGINT, SIGTERM}) {
    // Rank 0 signals its parent, the launcher (this process).
    LaunchOptions o = sh("if [ $KILN_RANK = 0 ]; then kill -" + std::string(sigabbrev_np(sig)) +
                             " $PPID; fi; sleep 60",
                         2);
    o.grace = 200ms;
    JobOutput run = run_job(o);
    EXPECT_LT(run.seconds, 10);
    EXPECT_EQ(run.result.exit_code, 128 + sig);
    EXPECT_EQ(run.result.first_failed_rank, -1);
    const std::string name = "SIG" + std::string(sigabbrev_np(sig));
    EXPECT_EQ(run.result.message, "interrupted by " + name + "; ended 2 rank(s)");
    EXPECT_EQ(run.err, "kiln launch: got " + name + "; ending the 2 rank(s)\n");
    for (const RankExit& r : run.result.ranks) EXPECT_TRUE(r.ended_by_launcher);
  }
  struct sigaction after {};
  sigaction(SIGINT, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler) << "the caller's handler comes back";
}

TEST(Launch, NumThreadsIsEachRanksShareOfTheCores) {
  EnvVar unset("KILN_NUM_THREADS", nullptr);
  const unsigned cores = std::thread::hardware_concurrency();
  JobOutput run = run_job(sh("echo $KILN_NUM_THREADS", 2));
  const std::string share = std::to_string(std::max(1, static_cast<int>(cores) / 2));
  std::vector<std::string> got = lines(run.out);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::string>{"[rank 0] " + share, "[rank 1] " + share}));

  LaunchOptions chosen = sh("echo $KILN_NUM_THREADS $EXTRA", 1);
  chosen.env = {{"KILN_NUM_THREADS", "7"}, {"EXTRA", "x y"}};
  EXPECT_EQ(run_job(chosen).out, "[rank 0] 7 x y\n");
  EnvVar set("KILN_NUM_THREADS", "5");
  EXPECT_EQ(run_job(sh("echo $KILN_NUM_THREADS", 1)).out, "[rank 0] 5\n");
}

TEST(Launch, ACommandThatCannotStartIsAClearError) {
  LaunchOptions missing;
  missing.command = {"kiln-no-such-command", "--flag"};
  expect_error([&] { launch(missing); },
               {"cannot start 'kiln-no-such-command': No such file or directory", "PATH=", "Fix:"});

  LaunchOptions bad_path;
  bad_path.command = {"/no/such/folder/prog"};
  bad_path.nproc_per_node = 2;
  expect_error([&] { launch(bad_path); },
               {"cannot start '/no/such/folder/prog'", "No such file or directory", "Fix:"});

  TempDir dir;
  const std::string script = dir.path() + "/not-executable";
  std::ofstream(script) << "echo hi\n";
  LaunchOptions denied;
  denied.command = {script};
  expect_error([&] { launch(denied); }, {"Permission denied", "chmod +x"});

  // A script without "#!" runs with /bin/sh, as execvp does; a program is found in PATH.
  ::chmod(script.c_str(), 0755);
  denied.stdout_fd = ::memfd_create("out", MFD_CLOEXEC);
  EXPECT_EQ(launch(denied).exit_code, 0);
  EXPECT_EQ(contents(denied.stdout_fd), "[rank 0] hi\n");
  ::close(denied.stdout_fd);
  LaunchOptions in_path = sh("", 1);
  in_path.command = {"sh", "-c", "echo found"};
  EXPECT_EQ(run_job(in_path).out, "[rank 0] found\n");
}

TEST(Launch, OptionsAreChecked) {
  auto with = [](auto change) {
    LaunchOptions o = sh("true", 1);
    change(o);
    return o;
  };
  expect_error([&] { launch(with([](LaunchOptions& o) { o.command.clear(); })); },
               {"expected a command to run", "Fix:"});
  expect_error([&] { launch(with([](LaunchOptions& o) { o.nproc_per_node = 0; })); },
               {"expected nproc_per_node (--nproc) >= 1, got 0", "Fix:"});
  expect_error([&] { launch(with([](LaunchOptions& o) { o.nnodes = 0; })); },
               {"expected nnodes (--nnodes) >= 1, got 0"});
  expect_error(
      [&] {
        launch(with([](LaunchOptions& o) {
          o.nnodes = 2;
          o.node_rank = 2;
          o.master_port = 29500;
        }));
      },
      {"expected node_rank (--node-rank) in [0, 1] for 2 node(s), got 2", "Fix:"});
  expect_error([&] { launch(with([](LaunchOptions& o) { o.node_rank = -1; })); },
               {"node_rank", "got -1"});
  expect_error([&] { launch(with([](LaunchOptions& o) { o.nnodes = 2; })); },
               {"a job on 2 nodes needs master_port", "--master ADDR:PORT"});
  expect_error([&] { launch(with([](LaunchOptions& o) { o.master_port = 70000; })); },
               {"expected master_port in [0, 65535], got 70000"});
  // 192.0.2.1 (TEST-NET-1) is no address of this machine.
  expect_error([&] { launch(with([](LaunchOptions& o) { o.master_addr = "192.0.2.1"; })); },
               {"cannot pick a free port on master_addr '192.0.2.1'", "Fix:"});
  expect_error([&] { launch(with([](LaunchOptions& o) {
                       o.env = {{"A=B", "c"}};
                     })); },
               {"got 'A=B'"});
  expect_error([&] { launch(with([](LaunchOptions& o) { o.grace = -1ms; })); },
               {"expected grace >= 0 ms"});
  expect_error([&] { launch(with([](LaunchOptions& o) { o.stdout_fd = 12345; })); },
               {"expected stdout_fd and stderr_fd to be open descriptors, got 12345"});
}

TEST(Launch, DescribeSaysHowARankEnded) {
  EXPECT_EQ((RankExit{.exit_code = 3}).describe(), "exited with status 3");
  EXPECT_EQ((RankExit{.signal = 9}).describe(), "was killed by signal 9 (SIGKILL)");
  EXPECT_EQ((RankExit{.signal = SIGTERM}).describe(), "was killed by signal 15 (SIGTERM)");
}

}  // namespace
}  // namespace kiln::distributed
