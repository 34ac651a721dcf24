// Loading generated kernels from a shared library with the system's dynamic loader.
#include "kiln/cpu/exec/kernel_library.h"

#include <dlfcn.h>
#include <elf.h>

#include <cstring>
#include <fstream>
#include <vector>

#include "kiln/error.h"

namespace kiln::cpu::exec {

namespace {

// Refuses a file the dynamic loader would map past its end: the loader maps each segment
// from the file, and touching a page beyond a truncated file is SIGBUS, not an error (a
// truncated library whose digest was recomputed passes every other check).
void check_whole_elf(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  KILN_CHECK(in.good(), "[kernels] expected a shared library of kernels at ", path,
             ", but it cannot be opened. Fix: point at the kernels file an export wrote.");
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  auto refuse = [&](const std::string& why) {
    KILN_FAIL("[kernels] ", path, " is not a complete ELF shared library (", size, " bytes): ", why,
              ". It was truncated or damaged. Fix: export the model again, or delete the file "
              "from the kernel cache (compile rebuilds it).");
  };
  Elf64_Ehdr header{};
  if (size < sizeof header) refuse("it is shorter than an ELF header");
  in.seekg(0);
  in.read(reinterpret_cast<char*>(&header), sizeof header);
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) refuse("no ELF magic number");
  if (header.e_ident[EI_CLASS] != ELFCLASS64) refuse("not a 64-bit ELF file");
  // A table of `count` entries of `entry` bytes at `offset` must lie inside the file.
  auto inside = [&](uint64_t offset, uint64_t count, uint64_t entry) {
    uint64_t bytes = 0, end = 0;
    return !__builtin_mul_overflow(count, entry, &bytes) &&
           !__builtin_add_overflow(offset, bytes, &end) && end <= size;
  };
  if (header.e_phentsize != sizeof(Elf64_Phdr) ||
      !inside(header.e_phoff, header.e_phnum, sizeof(Elf64_Phdr)))
    refuse("its program headers lie outside the file");
  if (header.e_shoff != 0 && !inside(header.e_shoff, header.e_shnum, header.e_shentsize))
    refuse("its section headers lie outside the file");
  std::vector<Elf64_Phdr> segments(header.e_phnum);
  in.seekg(static_cast<std::streamoff>(header.e_phoff));
  in.read(reinterpret_cast<char*>(segments.data()),
          static_cast<std::streamsize>(segments.size() * sizeof(Elf64_Phdr)));
  for (size_t i = 0; i < segments.size(); ++i)
    if (!inside(segments[i].p_offset, 1, segments[i].p_filesz))
      refuse("segment " + std::to_string(i) + " needs bytes up to " +
             std::to_string(segments[i].p_offset + segments[i].p_filesz));
}

}  // namespace

KernelLibrary::KernelLibrary(const std::string& path) : path_(path) {
  check_whole_elf(path);
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

FusedKernelFn KernelLibrary::lookup(const std::string& name) const {
  ::dlerror();  // clear an earlier error
  void* symbol = ::dlsym(handle_, name.c_str());
  KILN_CHECK(symbol != nullptr, "[kernels] expected ", path_, " to define kernel '", name,
             "', found no such symbol. Fix: the library and the graph that names its kernels "
             "must come from the same export.");
  return reinterpret_cast<FusedKernelFn>(symbol);
}

const void* KernelLibrary::data(const std::string& name) const {
  ::dlerror();
  void* symbol = ::dlsym(handle_, name.c_str());
  KILN_CHECK(symbol != nullptr, "[kernels] expected ", path_, " to define the data symbol '", name,
             "', found no such symbol. Fix: the library and the manifest that names it must "
             "come from the same export.");
  return symbol;
}

}  // namespace kiln::cpu::exec
