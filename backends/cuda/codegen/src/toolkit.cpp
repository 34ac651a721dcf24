// Finding libdevice and ptxas in the CUDA toolkit, and running ptxas (see toolkit.h). Plain
// C++ and POSIX: ptxas runs as a child process on files in a private temporary folder, with
// its arguments passed as a vector (no shell).
#include "kiln/cuda/codegen/toolkit.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/error.h"

extern char** environ;

namespace kiln::cuda::codegen {
namespace {

namespace fs = std::filesystem;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// A folder only this process uses, removed with everything in it when this goes.
class TempFolder {
 public:
  TempFolder() {
    std::string pattern = (fs::temp_directory_path() / "kiln-ptxas-XXXXXX").string();
    KILN_CHECK(mkdtemp(pattern.data()) != nullptr, "[cuda codegen] expected to create a "
               "temporary folder for ptxas under ", fs::temp_directory_path().string(),
               ", got: ", std::strerror(errno), ". Fix: set TMPDIR to a writable folder.");
    path_ = pattern;
  }
  ~TempFolder() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

}  // namespace

std::string toolkit_root() {
  if (const char* chosen = std::getenv("KILN_CUDA_HOME"))  // the user's choice, or none
    return fs::is_directory(chosen) ? chosen : "";
  for (const std::string& root : {env("CUDA_HOME"), env("CUDA_PATH"), std::string("/usr/local/cuda")})
    if (!root.empty() && fs::is_directory(root)) return root;
  return "";
}

std::string find_libdevice() {
  std::vector<std::string> tried;
  std::string root = toolkit_root();
  for (const std::string& path :
       {env("KILN_LIBDEVICE"),
        root.empty() ? std::string() : root + "/nvvm/libdevice/libdevice.10.bc",
        std::string("/usr/lib/nvidia-cuda-toolkit/libdevice/libdevice.10.bc")}) {
    if (path.empty()) continue;
    if (fs::is_regular_file(path)) return path;
    tried.push_back(path);
  }
  std::string list;
  for (const std::string& t : tried) list += "\n  " + t;
  KILN_FAIL("[cuda codegen] expected libdevice (the CUDA toolkit's math functions, "
            "libdevice.10.bc) for the GPU kernels, found it at none of:", list,
            "\nFix: install the CUDA toolkit, or set KILN_CUDA_HOME to its root (or "
            "KILN_LIBDEVICE to the file).");
}

std::string find_ptxas() {
  if (std::string p = env("KILN_PTXAS"); !p.empty()) return fs::is_regular_file(p) ? p : "";
  if (std::string root = toolkit_root(); !root.empty() && fs::is_regular_file(root + "/bin/ptxas"))
    return root + "/bin/ptxas";
  std::stringstream path(env("PATH"));
  for (std::string dir; std::getline(path, dir, ':');)
    if (!dir.empty() && access((dir + "/ptxas").c_str(), X_OK) == 0) return dir + "/ptxas";
  return "";
}

Cubin assemble_cubin(const std::string& ptx, const std::string& chip, bool verbose) {
  const std::string ptxas = find_ptxas();
  KILN_CHECK(!ptxas.empty(), "[cuda codegen] expected ptxas (the CUDA toolkit's PTX assembler) "
             "to assemble PTX for ", chip, ", found none at $KILN_PTXAS, ",
             toolkit_root().empty() ? "<no toolkit root>" : toolkit_root(), "/bin/ptxas or on "
             "$PATH. Fix: install the CUDA toolkit, or set KILN_PTXAS.");
  TempFolder folder;
  const fs::path in = folder.path() / "kernels.ptx", out = folder.path() / "kernels.cubin",
                 log = folder.path() / "ptxas.log";
  std::ofstream(in, std::ios::binary) << ptx;
  std::vector<std::string> args = {ptxas, "-arch=" + chip, "-O3", in.string(), "-o", out.string()};
  if (verbose) args.insert(args.begin() + 1, "-v");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = 0;
  int spawned = posix_spawn(&pid, ptxas.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  KILN_CHECK(spawned == 0, "[cuda codegen] expected to run ", ptxas, ", got: ",
             std::strerror(spawned), ". Fix: check that it is an executable (or set KILN_PTXAS).");
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  Cubin cubin{read_file(out), read_file(log)};
  const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && !cubin.image.empty();
  KILN_CHECK(ok, "[cuda codegen] expected ptxas to assemble the PTX for ", chip, ", got",
             WIFEXITED(status) ? " exit status " + std::to_string(WEXITSTATUS(status))
                               : std::string(" a signal"),
             ":\n", cubin.log, "Fix: if the PTX came from kiln, this is a kiln bug in "
             "backends/cuda/codegen; check that ", ptxas, " knows ", chip, ".");
  return cubin;
}

}  // namespace kiln::cuda::codegen
