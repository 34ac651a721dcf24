// Loading generated kernels from a shared library with the system's dynamic loader.
#include "kiln/cpu_exec/kernel_library.h"

#include <dlfcn.h>

#include "kiln/error.h"

namespace kiln::cpu {

KernelLibrary::KernelLibrary(const std::string& path) : path_(path) {
  // RTLD_LOCAL: two exported models may define kernels of the same names.
  handle_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  const char* why = handle_ ? nullptr : ::dlerror();
  KILN_CHECK(handle_ != nullptr, "[kernels] expected a shared library of kernels at ", path,
             ", but it cannot be loaded: ", why ? why : "unknown reason",
             ". Fix: point at the kernels file an export wrote, built for this machine.");
}

KernelLibrary::~KernelLibrary() {
  if (handle_) ::dlclose(handle_);
}

codegen::KernelFn KernelLibrary::lookup(const std::string& name) const {
  ::dlerror();  // clear an earlier error
  void* symbol = ::dlsym(handle_, name.c_str());
  KILN_CHECK(symbol != nullptr, "[kernels] expected ", path_, " to define kernel '", name,
             "', found no such symbol. Fix: the library and the graph that names its kernels "
             "must come from the same export.");
  return reinterpret_cast<codegen::KernelFn>(symbol);
}

const void* KernelLibrary::data(const std::string& name) const {
  ::dlerror();
  void* symbol = ::dlsym(handle_, name.c_str());
  KILN_CHECK(symbol != nullptr, "[kernels] expected ", path_, " to define the data symbol '", name,
             "', found no such symbol. Fix: the library and the manifest that names it must "
             "come from the same export.");
  return symbol;
}

}  // namespace kiln::cpu
