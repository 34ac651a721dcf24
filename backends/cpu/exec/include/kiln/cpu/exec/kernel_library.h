// Generated kernels loaded from a shared library (codegen::link_shared_library wrote it):
// how an exported model's kernels run without MLIR or LLVM in the process.
#pragma once

#include <memory>
#include <string>

#include "kiln/cpu/exec/kernel_spec.h"

namespace kiln::cpu::exec {

class KernelLibrary {
 public:
  // Loads the library at `path` (all its symbols resolved now). Throws kiln::Error naming
  // the file and the loader's reason when it is missing or not a loadable library.
  explicit KernelLibrary(const std::string& path);
  ~KernelLibrary();
  KernelLibrary(const KernelLibrary&) = delete;
  KernelLibrary& operator=(const KernelLibrary&) = delete;

  // The kernel `name`; throws kiln::Error when the library does not define it.
  FusedKernelFn lookup(const std::string& name) const;
  // The address of the data symbol `name`; throws kiln::Error when the library lacks it.
  const void* data(const std::string& name) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  void* handle_ = nullptr;
};

}  // namespace kiln::cpu::exec
