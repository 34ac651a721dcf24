// The launcher behind `kiln launch`: starts the ranks of a job as child processes, forwards
// their output line by line with a rank prefix, and ends the whole job when one rank fails.
//
// Algorithm: everything a child needs (the program's path, argv, one environment per rank) is
// built before forking, because the caller may be multi-threaded and a forked child may only
// call async-signal-safe functions until it execs. Each rank gets two pipes (stdout, stderr)
// and a close-on-exec status pipe that tells the parent whether exec worked. One poll() loop
// then reads the pipes, a self-pipe fed by the SIGINT/SIGTERM/SIGCHLD handlers, and notices
// exits with waitid(WNOWAIT): an exited rank stays a zombie until the job ends, so its process
// id, which is also its process group's id, cannot be reused while the launcher may still
// signal that group.
#include "kiln/distributed/launch.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <tuple>

#include "distributed/posix.h"
#include "kiln/error.h"

extern char** environ;

namespace kiln::distributed {

namespace {

using posix::errno_text;
using posix::Fd;
using Clock = std::chrono::steady_clock;

// A pending line longer than this is written without waiting for its end: a rank printing
// megabytes without a newline must not grow the launcher without bound.
constexpr size_t kLongestLine = 64 * 1024;
// poll()'s timeout when no deadline is near; SIGCHLD wakes the loop sooner.
constexpr int kPollMs = 100;

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? "SIG" + std::string(abbrev) : "signal " + std::to_string(sig);
}

// A close-on-exec descriptor numbered 3 or above: a child dup2()s it onto 0, 1 or 2, which
// must not be the descriptor itself (a caller may have closed its stdin, so pipe() can
// return 0).
Fd above_stdio(int fd, const char* what) {
  KILN_CHECK(fd >= 0, "[launch] cannot create ", what, ": ", errno_text(errno),
             ". Fix: raise the open-file limit (ulimit -n) or lower --nproc.");
  if (fd > 2) return Fd(fd);
  Fd low(fd);
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  KILN_CHECK(moved >= 0, "[launch] cannot create ", what, ": ", errno_text(errno),
             ". Fix: raise the open-file limit (ulimit -n) or lower --nproc.");
  return Fd(moved);
}

struct Pipe {
  Fd read, write;
};

Pipe make_pipe(const char* what) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) fds[0] = fds[1] = -1;
  Pipe p;
  p.read = above_stdio(fds[0], what);
  p.write = above_stdio(fds[1], what);
  return p;
}

// Writes all of `data`, whole: the launcher is the only writer of its output, so lines from
// different ranks never interleave. A closed or failing output drops the text; the job goes on.
void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};  // a non-blocking terminal: wait until it takes more
      ::poll(&p, 1, kPollMs);
    } else {
      return;
    }
  }
}

void say(int fd, const std::string& line) {
  write_all(fd, "kiln launch: " + line + "\n");
}

// ---- Options, the program and the environment ----------------------------------------------

void check_options(const LaunchOptions& o) {
  KILN_CHECK(!o.command.empty() && !o.command[0].empty(),
             "[launch] expected a command to run (LaunchOptions::command), got none. Fix: give "
             "the program and its arguments, e.g. {\"kiln\", \"train\", \"--model\", "
             "\"fashion_mlp\"}.");
  KILN_CHECK(o.nproc_per_node >= 1, "[launch] expected nproc_per_node (--nproc) >= 1, got ",
             o.nproc_per_node, ". Fix: start at least one process per node.");
  KILN_CHECK(o.nnodes >= 1, "[launch] expected nnodes (--nnodes) >= 1, got ", o.nnodes,
             ". Fix: count the machines of the job, this one included.");
  KILN_CHECK(o.node_rank >= 0 && o.node_rank < o.nnodes,
             "[launch] expected node_rank (--node-rank) in [0, ", o.nnodes - 1, "] for ", o.nnodes,
             " node(s), got ", o.node_rank,
             ". Fix: number the machines 0 to nnodes - 1, each once; node 0 serves the "
             "rendezvous.");
  KILN_CHECK(int64_t{o.nnodes} * o.nproc_per_node <= INT_MAX,
             "[launch] expected a world size (nnodes x nproc_per_node) that fits an int, got ",
             o.nnodes, " x ", o.nproc_per_node, ". Fix: lower --nnodes or --nproc.");
  KILN_CHECK(!o.master_addr.empty(),
             "[launch] expected master_addr (the address of node 0), got an empty one. Fix: "
             "give 127.0.0.1 for a single-node job, node 0's address otherwise.");
  KILN_CHECK(o.master_port >= 0 && o.master_port <= 65535,
             "[launch] expected master_port in [0, 65535], got ", o.master_port,
             ". Fix: give a TCP port, or 0 to pick a free one (single-node jobs).");
  KILN_CHECK(o.nnodes == 1 || o.master_port != 0, "[launch] a job on ", o.nnodes,
             " nodes needs master_port, got none. Fix: give every node node 0's address and a "
             "free port on it (--master ADDR:PORT, e.g. 10.0.0.1:29500); only a single-node job "
             "picks a port itself.");
  KILN_CHECK(o.grace.count() >= 0, "[launch] expected grace >= 0 ms, got ", o.grace.count(),
             " ms. Fix: give the time ranks get between SIGTERM and SIGKILL, or 0.");
  for (const auto& [name, value] : o.env) {
    KILN_CHECK(!name.empty() && name.find('=') == std::string::npos &&
                   name.find('\0') == std::string::npos && value.find('\0') == std::string::npos,
               "[launch] expected environment variable names without '=' "
               "(LaunchOptions::env), got '",
               name, "'. Fix: give the name and the value as the pair's two parts.");
  }
  for (int fd : {o.stdout_fd, o.stderr_fd}) {
    KILN_CHECK(fd >= 0 && fcntl(fd, F_GETFD) != -1,
               "[launch] expected stdout_fd and stderr_fd to be open descriptors, got ", fd,
               ". Fix: pass descriptors the caller keeps open during launch(), or the "
               "defaults 1 and 2.");
  }
}

// The value `name` will have in the ranks' environment (options.env over ours), or null.
const char* env_value(const LaunchOptions& o, const std::string& name) {
  for (auto it = o.env.rbegin(); it != o.env.rend(); ++it)
    if (it->first == name) return it->second.c_str();
  return std::getenv(name.c_str());
}

// command[0] looked up in the ranks' PATH as execvp would, but here in the parent: a command
// that is not there is an error before any rank starts, and the child only calls execve.
std::string resolve_program(const LaunchOptions& o) {
  const std::string& name = o.command[0];
  if (name.find('/') != std::string::npos) return name;
  const char* path_env = env_value(o, "PATH");
  const std::string path = path_env ? path_env : "/bin:/usr/bin";  // glibc's default
  std::string not_executable;
  for (size_t start = 0;;) {
    size_t end = path.find(':', start);
    std::string dir = path.substr(start, end == std::string::npos ? end : end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;  // "" is the current folder
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
      if (not_executable.empty()) not_executable = candidate;
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  KILN_CHECK(not_executable.empty(), "[launch] cannot start '", name, "': ", not_executable,
             " is not executable. Fix: make it executable (chmod +x ", not_executable,
             ") or run it through its interpreter.");
  KILN_FAIL("[launch] cannot start '", name, "': ", errno_text(ENOENT), " (no '", name,
            "' in any folder of PATH=", path, "). Fix: check the spelling, give its path (./", name,
            " or /full/path/", name, "), or add its folder to PATH.");
}

// A port nobody listens on at `addr` now: the kernel's choice for a socket bound to port 0.
// Rank 0 binds it a moment later; another process could take it in between (torchrun has
// the same window), which rank 0 then reports as an address in use.
int free_port(const std::string& addr) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(addr.c_str(), "0", &hints, &found);
  KILN_CHECK(rc == 0, "[launch] cannot resolve master_addr '", addr, "': ", gai_strerror(rc),
             ". Fix: give an address of this machine (127.0.0.1 for a single-node job).");
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> owned(found, ::freeaddrinfo);
  int error = EADDRNOTAVAIL;
  for (addrinfo* a = found; a; a = a->ai_next) {
    Fd sock(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    sockaddr_storage bound{};
    socklen_t length = sizeof bound;
    if (sock.get() >= 0 && ::bind(sock.get(), a->ai_addr, a->ai_addrlen) == 0 &&
        ::getsockname(sock.get(), reinterpret_cast<sockaddr*>(&bound), &length) == 0) {
      return ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                               : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    }
    error = errno;
  }
  KILN_FAIL("[launch] cannot pick a free port on master_addr '", addr, "': ", errno_text(error),
            ". Fix: give an address of this machine (127.0.0.1), or a port (--master ADDR:PORT).");
}

// "NAME=value" strings for execve, and the pointer array that refers to them.
class Environment {
 public:
  void set(const std::string& name, const std::string& value) {
    const std::string head = name + "=";
    for (std::string& entry : entries_) {
      if (entry.compare(0, head.size(), head) == 0) {
        entry = head + value;
        return;
      }
    }
    entries_.push_back(head + value);
  }
  void add_raw(const char* entry) { entries_.emplace_back(entry); }
  // Valid until the next set(): built once, before forking.
  char** pointers() {
    pointers_.clear();
    for (std::string& e : entries_) pointers_.push_back(e.data());
    pointers_.push_back(nullptr);
    return pointers_.data();
  }

 private:
  std::vector<std::string> entries_;
  std::vector<char*> pointers_;
};

struct Program {
  std::string path;
  std::vector<std::string> args;     // argv; args[0] as the user wrote it
  std::vector<std::string> sh_args;  // "/bin/sh path args[1:]", for a script without #!
  std::vector<char*> argv, sh_argv;
  std::vector<Environment> envs;  // by local rank
};

std::vector<char*> pointers_to(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

Program make_program(const LaunchOptions& o, int master_port) {
  Program p;
  p.path = resolve_program(o);
  p.args = o.command;
  p.sh_args = {"/bin/sh", p.path};
  p.sh_args.insert(p.sh_args.end(), o.command.begin() + 1, o.command.end());
  p.argv = pointers_to(p.args);
  p.sh_argv = pointers_to(p.sh_args);

  // N ranks that each start a thread per core would run N x cores threads on this machine and
  // slow every rank down; like torchrun (OMP_NUM_THREADS=1), each rank gets its share of the
  // cores, unless the user chose a count.
  const bool threads_chosen = env_value(o, "KILN_NUM_THREADS") != nullptr;
  const unsigned cores = std::thread::hardware_concurrency();
  const int threads = std::max(1, static_cast<int>(cores) / o.nproc_per_node);
  for (int local = 0; local < o.nproc_per_node; ++local) {
    Environment env;
    for (char** e = environ; e && *e; ++e) env.add_raw(*e);
    env.set("KILN_RANK", std::to_string(o.node_rank * o.nproc_per_node + local));
    env.set("KILN_LOCAL_RANK", std::to_string(local));
    env.set("KILN_WORLD_SIZE", std::to_string(o.nnodes * o.nproc_per_node));
    env.set("KILN_LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node));
    env.set("KILN_MASTER_ADDR", o.master_addr);
    env.set("KILN_MASTER_PORT", std::to_string(master_port));
    if (!threads_chosen) env.set("KILN_NUM_THREADS", std::to_string(threads));
    for (const auto& [name, value] : o.env) env.set(name, value);
    p.envs.push_back(std::move(env));
  }
  return p;
}

// ---- Signals --------------------------------------------------------------------------------

std::atomic<int> g_signal_pipe{-1};

extern "C" void on_launcher_signal(int sig) {
  const int saved = errno;
  const int fd = g_signal_pipe.load(std::memory_order_relaxed);
  const unsigned char byte = static_cast<unsigned char>(sig);
  if (fd >= 0) (void)!::write(fd, &byte, 1);  // full pipe: a wakeup is already pending
  errno = saved;
}

// For the duration of launch(): SIGINT and SIGTERM end the job instead of killing the launcher
// (which would leave the ranks to PR_SET_PDEATHSIG's SIGKILL, without a grace), and SIGCHLD
// wakes the poll loop as soon as a rank exits. A signal the caller ignores stays ignored.
class SignalPipe {
 public:
  static constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGCHLD};

  SignalPipe() {
    Pipe p = make_pipe("the launcher's signal pipe");
    for (int fd : {p.read.get(), p.write.get()}) fcntl(fd, F_SETFL, O_NONBLOCK);
    read_ = std::move(p.read);
    write_ = std::move(p.write);
    g_signal_pipe.store(write_.get());
    struct sigaction action {};
    action.sa_handler = on_launcher_signal;
    action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigfillset(&action.sa_mask);
    for (size_t i = 0; i < kSignals.size(); ++i) {
      sigaction(kSignals[i], nullptr, &old_[i]);
      ignored_[i] = old_[i].sa_handler == SIG_IGN && kSignals[i] != SIGCHLD;
      if (!ignored_[i]) sigaction(kSignals[i], &action, nullptr);
    }
  }
  ~SignalPipe() {
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &old_[i], nullptr);
    g_signal_pipe.store(-1);
  }
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  int fd() const { return read_.get(); }
  bool was_ignored(int sig) const {
    for (size_t i = 0; i < kSignals.size(); ++i)
      if (kSignals[i] == sig) return ignored_[i];
    return false;
  }
  // The signals received since the last call, in order.
  std::vector<int> take() {
    std::vector<int> out;
    unsigned char buf[64];
    ssize_t n;
    while ((n = ::read(read_.get(), buf, sizeof buf)) > 0) out.insert(out.end(), buf, buf + n);
    return out;
  }

 private:
  Fd read_, write_;
  std::array<struct sigaction, kSignals.size()> old_{};
  std::array<bool, kSignals.size()> ignored_{};
};

// ---- Output ---------------------------------------------------------------------------------

// One of a rank's output pipes: bytes in, prefixed whole lines out.
struct Stream {
  Fd fd;
  int out_fd = 1;
  std::string prefix;
  std::string pending;    // bytes after the last line end
  bool mid_line = false;  // the last write ended inside a line: no prefix before the rest
  bool after_cr = false;  // the last segment ended in '\r'

  void append_segment(std::string_view segment, std::string& out) {
    // "\r\n" split across two reads is one line end: the '\n' gets no prefix of its own.
    if (!(after_cr && segment == "\n") && !mid_line) out += prefix;
    out += segment;
    mid_line = false;
    after_cr = segment.back() == '\r';
  }

  // Forwards every segment of `data` ending in '\n', '\r' or "\r\n" (progress bars redraw
  // their line with '\r': each redraw is shown at once); at EOF the unfinished line too.
  void take(std::string_view data, bool eof) {
    pending.append(data);
    std::string out;
    size_t start = 0;
    for (size_t end; (end = pending.find_first_of("\r\n", start)) != std::string::npos;) {
      if (pending[end] == '\r' && end + 1 < pending.size() && pending[end + 1] == '\n') ++end;
      append_segment(std::string_view(pending).substr(start, end + 1 - start), out);
      start = end + 1;
    }
    pending.erase(0, start);
    if (!pending.empty() && (eof || pending.size() >= kLongestLine)) {
      if (!mid_line) out += prefix;
      out += pending;
      pending.clear();
      after_cr = false;
      mid_line = true;
      // A rank's last words without a newline would run into the next rank's prefixed line.
      if (eof && !prefix.empty()) {
        out += '\n';
        mid_line = false;
      }
    }
    if (!out.empty()) write_all(out_fd, out);
  }

  // Reads what the pipe holds (at most `reads` chunks); at EOF flushes and closes.
  void pump(int reads) {
    char buf[16384];
    while (fd.get() >= 0 && reads-- > 0) {
      ssize_t n = ::read(fd.get(), buf, sizeof buf);
      if (n > 0) {
        take(std::string_view(buf, static_cast<size_t>(n)), false);
      } else if (n < 0 && errno == EINTR) {
        ++reads;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;
      } else {
        close();
      }
    }
  }

  void close() {
    take({}, true);
    fd.reset();
  }
};

// ---- The job --------------------------------------------------------------------------------

struct Rank {
  RankExit exit;
  bool running = false;  // started, and its exit not yet seen
  Stream out, err;
};

// What a forked child needs, prepared before fork() (see exec_rank).
struct ChildSetup {
  const char* path;
  char* const* argv;
  char* const* sh_argv;
  char* const* envp;
  int stdin_fd, stdout_fd, stderr_fd, status_fd;
  pid_t parent;
  bool keep_sigint_ignored;
};

// Runs in the forked child: async-signal-safe calls only, then exec.
[[noreturn]] void exec_rank(const ChildSetup& s) {
  ::setpgid(0, 0);  // its own group: ending the group ends what the rank started too
  // Dies with the launcher's thread, even when that one is SIGKILLed; if the launcher is
  // already gone (before prctl took effect), give up.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != s.parent) ::_exit(127);
  // A fresh program's signal state: the launcher's handlers and its blocked mask (all blocked
  // around fork) are not the rank's. SIGTERM must work: it is how the launcher ends a rank.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  ::sigaction(SIGINT, s.keep_sigint_ignored ? &ign : &dfl, nullptr);
  for (int sig : {SIGTERM, SIGCHLD, SIGPIPE}) ::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::dup2(s.stdin_fd, 0);
  ::dup2(s.stdout_fd, 1);
  ::dup2(s.stderr_fd, 2);
  ::execve(s.path, s.argv, s.envp);
  if (errno == ENOEXEC) ::execve("/bin/sh", s.sh_argv, s.envp);  // as execvp does
  const int error = errno;
  (void)!::write(s.status_fd, &error, sizeof error);
  ::_exit(127);
}

class Job {
 public:
  Job(const LaunchOptions& o, Program& program, SignalPipe& signals)
      : o_(o), program_(program), signals_(signals), ranks_(o.nproc_per_node) {}
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // Only reached with ranks running when an exception left run(): kill and reap them.
  ~Job() {
    for (Rank& r : ranks_) {
      if (r.exit.pid <= 0) continue;
      ::killpg(r.exit.pid, SIGKILL);
      int status;
      while (::waitpid(r.exit.pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }

  LaunchResult run() {
    // A rank that cannot start fails the launch, after the ranks already started are ended
    // the ordinary way (SIGTERM, the grace, SIGKILL) and their output is forwarded.
    std::exception_ptr start_error;
    for (int local = 0; local < o_.nproc_per_node && !start_error; ++local) {
      try {
        start(local);
      } catch (...) {
        start_error = std::current_exception();
      }
    }
    if (start_error) end_all();
    supervise();
    reap_all();
    if (start_error) std::rethrow_exception(start_error);
    return result();
  }

 private:
  int running() const {
    return static_cast<int>(
        std::count_if(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; }));
  }

  // Starts one rank; an error when it cannot (its process, if any, already reaped).
  void start(int local) {
    Rank& r = ranks_[local];
    r.exit.rank = o_.node_rank * o_.nproc_per_node + local;
    Pipe out = make_pipe("a rank's stdout pipe"), err = make_pipe("a rank's stderr pipe");
    Pipe status = make_pipe("a rank's status pipe");
    if (dev_null_.get() < 0) {
      dev_null_ = above_stdio(::open("/dev/null", O_RDONLY | O_CLOEXEC), "/dev/null's descriptor");
    }
    // The ranks read /dev/null: N processes cannot share one input, and a rank in its own
    // process group reading the terminal would be stopped (SIGTTIN) and hang the job.
    const ChildSetup setup{program_.path.c_str(),
                           program_.argv.data(),
                           program_.sh_argv.data(),
                           program_.envs[local].pointers(),
                           dev_null_.get(),
                           out.write.get(),
                           err.write.get(),
                           status.write.get(),
                           ::getpid(),
                           signals_.was_ignored(SIGINT)};
    // All signals blocked across fork(): no handler may run in the child before it resets them.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    const pid_t pid = ::fork();
    if (pid == 0) exec_rank(setup);
    const int fork_error = errno;
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    out.write.reset();
    err.write.reset();
    status.write.reset();
    KILN_CHECK(pid > 0, "[launch] cannot start rank ", r.exit.rank,
               ": fork failed: ", errno_text(fork_error),
               ". Fix: lower --nproc, or raise the process limit "
               "(ulimit -u) or free memory.");
    r.exit.pid = pid;
    // The status pipe closes on exec (success) or carries exec's errno.
    int exec_error = 0;
    ssize_t n;
    while ((n = ::read(status.read.get(), &exec_error, sizeof exec_error)) < 0 && errno == EINTR) {
    }
    if (n == static_cast<ssize_t>(sizeof exec_error)) {
      int ignored;
      while (::waitpid(pid, &ignored, 0) < 0 && errno == EINTR) {
      }
      r.exit.pid = -1;
      KILN_FAIL("[launch] cannot start '", o_.command[0], "' (", program_.path,
                "): ", errno_text(exec_error), ". Fix: ",
                exec_error == EACCES ? "make it executable (chmod +x " + program_.path + ")."
                : exec_error == E2BIG
                    ? std::string("shorten its arguments or environment.")
                    : std::string("check that it is a program for this machine, or run it "
                                  "through its interpreter."));
    }
    r.running = true;
    const std::string prefix =
        o_.prefix_output ? "[rank " + std::to_string(r.exit.rank) + "] " : "";
    for (auto [stream, pipe, to] :
         {std::tuple{&r.out, &out, o_.stdout_fd}, std::tuple{&r.err, &err, o_.stderr_fd}}) {
      fcntl(pipe->read.get(), F_SETFL, O_NONBLOCK);
      stream->fd = std::move(pipe->read);
      stream->out_fd = to;
      stream->prefix = prefix;
    }
  }

  // SIGTERM to every rank's group (an exited rank's too: what it started), SIGKILL after the
  // grace. The ranks still running are marked as ended by the launcher.
  void end_all() {
    if (ending_) return;
    ending_ = true;
    for (Rank& r : ranks_) {
      if (r.running) r.exit.ended_by_launcher = true;
      if (r.exit.pid > 0) ::killpg(r.exit.pid, SIGTERM);
    }
    kill_at_ = Clock::now() + o_.grace;
  }

  void kill_all() {
    killed_ = true;
    for (Rank& r : ranks_)
      if (r.exit.pid > 0) ::killpg(r.exit.pid, SIGKILL);
  }

  void on_signal(int sig) {
    if (sig == SIGCHLD) return;  // only a wakeup
    if (interrupted_by_ == 0) interrupted_by_ = sig;
    const int n = running();
    if (!ending_) {
      say(o_.stderr_fd,
          "got " + signal_name(sig) + "; ending the " + std::to_string(n) + " rank(s)");
      end_all();
    } else if (!killed_ && n > 0) {
      say(o_.stderr_fd,
          "got " + signal_name(sig) + " again; killing the " + std::to_string(n) + " rank(s) now");
      kill_all();
    }
  }

  // Notices ranks that exited (leaving them zombies, see the top of the file).
  void check_exits() {
    for (Rank& r : ranks_) {
      if (!r.running) continue;
      siginfo_t info{};
      const int rc =
          ::waitid(P_PID, static_cast<id_t>(r.exit.pid), &info, WEXITED | WNOHANG | WNOWAIT);
      if (rc == 0 && info.si_pid == 0) continue;  // still running
      r.running = false;
      if (rc != 0) {
        r.exit.exit_code = 255;  // someone else's waitpid(-1) took its status
      } else if (info.si_code == CLD_EXITED) {
        r.exit.exit_code = info.si_status;
      } else {
        r.exit.signal = info.si_status;
      }
      // Its own output is all in the pipes now; a process it left behind may hold them open,
      // so take what is there and close them rather than wait for their end.
      r.out.pump(64);
      r.out.close();
      r.err.pump(64);
      r.err.close();
      if (r.exit.ok() || ending_) continue;
      first_failed_ = static_cast<int>(&r - ranks_.data());
      const int others = running();
      if (others > 0) {
        say(o_.stderr_fd, "rank " + std::to_string(r.exit.rank) + " (pid " +
                              std::to_string(r.exit.pid) + ") " + r.exit.describe() +
                              "; ending the other " + std::to_string(others) + " rank(s)");
      }
      end_all();
    }
  }

  void supervise() {
    std::vector<pollfd> fds;
    std::vector<Stream*> streams;
    while (running() > 0) {
      fds.assign(1, pollfd{signals_.fd(), POLLIN, 0});
      streams.clear();
      for (Rank& r : ranks_) {
        for (Stream* s : {&r.out, &r.err}) {
          if (s->fd.get() < 0) continue;
          fds.push_back(pollfd{s->fd.get(), POLLIN, 0});
          streams.push_back(s);
        }
      }
      int timeout = kPollMs;
      if (ending_ && !killed_) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(kill_at_ - Clock::now());
        timeout = static_cast<int>(std::clamp<int64_t>(left.count(), 0, kPollMs));
      }
      if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) {
        KILN_FAIL("[launch] poll() failed: ", errno_text(errno), ". Fix: report this as a bug.");
      }
      for (int sig : signals_.take()) on_signal(sig);
      for (size_t i = 1; i < fds.size(); ++i)
        if (fds[i].revents != 0) streams[i - 1]->pump(1);
      check_exits();
      if (ending_ && !killed_ && Clock::now() >= kill_at_ && running() > 0) {
        say(o_.stderr_fd, std::to_string(running()) + " rank(s) still running " +
                              std::to_string(o_.grace.count()) +
                              " ms after SIGTERM; sending SIGKILL");
        kill_all();
      }
    }
  }

  // Every rank has exited. What one left behind in its process group (a background process,
  // a data worker) would hold this job's memory, GPU and port: it ends with the job. Then the
  // zombies are reaped.
  void reap_all() {
    for (Rank& r : ranks_) {
      if (r.exit.pid <= 0) continue;
      ::killpg(r.exit.pid, SIGKILL);
      int status;
      while (::waitpid(r.exit.pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
    for (Rank& r : ranks_) results_.push_back(r.exit);
    for (Rank& r : ranks_) r.exit.pid = -1;  // reaped: nothing for the destructor to do
  }

  LaunchResult result() const {
    LaunchResult out;
    out.ranks = results_;
    if (first_failed_ >= 0) {
      const RankExit& failed = results_[first_failed_];
      out.first_failed_rank = failed.rank;
      out.exit_code = failed.signal != 0 ? 128 + failed.signal : failed.exit_code;
      out.message = "rank " + std::to_string(failed.rank) + " (pid " + std::to_string(failed.pid) +
                    ") " + failed.describe();
    } else if (interrupted_by_ != 0) {
      out.exit_code = 128 + interrupted_by_;
      const auto ended = std::count_if(results_.begin(), results_.end(),
                                       [](const RankExit& r) { return r.ended_by_launcher; });
      out.message = "interrupted by " + signal_name(interrupted_by_) + "; ended " +
                    std::to_string(ended) + " rank(s)";
    }
    return out;
  }

  const LaunchOptions& o_;
  Program& program_;
  SignalPipe& signals_;
  std::vector<Rank> ranks_;
  std::vector<RankExit> results_;
  Fd dev_null_;
  bool ending_ = false;
  bool killed_ = false;
  Clock::time_point kill_at_;
  int first_failed_ = -1;  // local rank
  int interrupted_by_ = 0;
};

}  // namespace

std::string RankExit::describe() const {
  if (signal != 0) {
    return "was killed by signal " + std::to_string(signal) + " (" + signal_name(signal) + ")";
  }
  return "exited with status " + std::to_string(exit_code);
}

LaunchResult launch(const LaunchOptions& options) {
  check_options(options);
  const int port = options.master_port != 0 ? options.master_port : free_port(options.master_addr);
  Program program = make_program(options, port);
  // The signal handlers are the process's: one launch at a time installs them.
  static std::mutex one_launch;
  std::lock_guard<std::mutex> lock(one_launch);
  SignalPipe signals;
  Job job(options, program, signals);
  return job.run();
}

}  // namespace kiln::distributed
