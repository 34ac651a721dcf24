// Finding and opening a CUDA toolkit library (toolkit_library.h).
#include "toolkit_library.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

namespace kiln::cuda {

namespace {

// dlopen's own words for the last failure ("...: cannot open shared object file: ...").
std::string dl_error() {
  const char* why = dlerror();
  return why ? why : "no reason given";
}

}  // namespace

std::string joined(const std::vector<std::string>& parts, const char* separator) {
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "" : separator) + part;
  return out;
}

void* open_toolkit_library(const std::string& explicit_path,
                           const std::vector<std::string>& loader_names,
                           const std::string& lib64_file, std::string& opened,
                           std::vector<std::string>& tried) {
  auto attempt = [&](const std::string& library) -> void* {
    dlerror();
    // RTLD_LOCAL: the library's symbols stay out of the program's global namespace.
    void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle)
      opened = library;
    else
      tried.push_back(dl_error());  // it names the library
    return handle;
  };
  if (!explicit_path.empty()) return attempt(explicit_path);
  for (const std::string& name : loader_names)
    if (void* handle = attempt(name)) return handle;

  std::vector<std::string> dirs;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* dir = std::getenv(var); dir && *dir) dirs.push_back(dir);
  dirs.push_back("/usr/local/cuda");
  for (size_t i = 0; i < dirs.size(); ++i) {
    const std::string& dir = dirs[i];
    if (std::find(dirs.begin(), dirs.begin() + i, dir) != dirs.begin() + i) continue;
    const std::string path = dir + "/lib64/" + lib64_file;
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      tried.push_back(path + ": no such file");
      continue;
    }
    if (void* handle = attempt(path)) return handle;
  }
  return nullptr;
}

}  // namespace kiln::cuda
