// One section of an ELF file read from the file itself: nothing is mapped and no code runs,
// so a library can be inspected before the dynamic loader sees it.
#pragma once

#include <optional>
#include <string>

namespace kiln::cpu::exec {

// The bytes of the section called `name` in the 64-bit ELF file at `path`, or nullopt when
// the file has no such section. Throws kiln::Error naming the file when it cannot be read or
// its section headers (or the section) lie outside it.
std::optional<std::string> read_elf_section(const std::string& path, const std::string& name);

}  // namespace kiln::cpu::exec
