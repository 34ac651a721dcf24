// Links generated kernels into a shared library for ahead-of-time export: the module's
// position-independent object file goes through the system's C compiler driver, which knows
// where the C library and libm live. Plain C++ (no MLIR or LLVM headers).
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "kiln/cpu/codegen/kernels.h"
#include "kiln/error.h"

extern char** environ;

namespace kiln::cpu::codegen {

namespace fs = std::filesystem;

namespace {

// Runs argv (no shell) with stdout and stderr into `log`; the exit status, or -1 with `log`
// saying why it did not run.
int run_command(const std::vector<std::string>& argv, const std::string& log_path,
                std::string& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    log = std::strerror(spawned);
    return -1;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::ifstream in(log_path);
  log.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

void link_shared_library(const std::string& object, const std::string& path,
                         const std::vector<std::string>& extra_inputs) {
  KILN_CHECK(!object.empty() || !extra_inputs.empty(),
             "[export] expected a module's object file to link into ", path,
             ", found none. Fix: pass KernelModule::object() of a compiled module.");
  const char* cc_env = std::getenv("CC");
  const std::string cc = cc_env && *cc_env ? cc_env : "cc";
  // The object and the linker's log go next to the library, under temporary names.
  std::string stem = path + ".tmp.XXXXXX";
  int fd = ::mkstemp(stem.data());
  KILN_CHECK(fd >= 0, "[export] expected to create a file next to ", path,
             ", got: ", std::strerror(errno), ". Fix: export into a writable directory.");
  ::close(fd);
  const std::string obj = stem + ".o", log_path = stem + ".log";
  std::vector<std::string> argv = {cc, "-shared", "-o", path};
  if (!object.empty()) {
    std::ofstream out(obj, std::ios::binary);
    out.write(object.data(), static_cast<std::streamsize>(object.size()));
    KILN_CHECK(out.good(), "[export] expected to write ", obj, ". Fix: free disk space.");
    argv.push_back(obj);
  }
  argv.insert(argv.end(), extra_inputs.begin(), extra_inputs.end());
  argv.push_back("-lm");
  std::string log;
  int status = run_command(argv, log_path, log);
  std::error_code ec;
  for (const std::string& f : {stem, obj, log_path}) fs::remove(f, ec);
  KILN_CHECK(status == 0, "[export] expected '", cc, " -shared' to link the kernels into ", path,
             ", but it ",
             status < 0 ? "did not run" : "failed (exit " + std::to_string(status) + ")", ": ", log,
             ". Fix: install a C compiler (Debian: gcc) or point CC at one.");
}

}  // namespace kiln::cpu::codegen
