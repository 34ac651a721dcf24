// Reading one ELF section from the file: the section header table, its string table for the
// names, then the section's bytes, each checked to lie inside the file.
#include "kiln/cpu/exec/elf_section.h"

#include <elf.h>

#include <cstring>
#include <fstream>
#include <string_view>
#include <vector>

#include "kiln/error.h"

namespace kiln::cpu::exec {

std::optional<std::string> read_elf_section(const std::string& path, const std::string& name) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  KILN_CHECK(in.good(), "[kernels] expected a shared library of kernels at ", path,
             ", but it cannot be opened. Fix: point at the kernels file an export wrote.");
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  auto refuse = [&](const std::string& why) {
    KILN_FAIL("[kernels] ", path, " is not a complete ELF shared library (", size, " bytes): ", why,
              ". It was truncated or damaged. Fix: export the model again.");
  };
  auto inside = [&](uint64_t offset, uint64_t count, uint64_t entry) {
    uint64_t bytes = 0, end = 0;
    return !__builtin_mul_overflow(count, entry, &bytes) &&
           !__builtin_add_overflow(offset, bytes, &end) && end <= size;
  };
  auto read = [&](uint64_t offset, void* out, uint64_t bytes) {
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(static_cast<char*>(out), static_cast<std::streamsize>(bytes));
    if (!in.good())
      refuse("reading " + std::to_string(bytes) + " bytes at " + std::to_string(offset) +
             " failed");
  };
  Elf64_Ehdr header{};
  if (size < sizeof header) refuse("it is shorter than an ELF header");
  read(0, &header, sizeof header);
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) refuse("no ELF magic number");
  if (header.e_ident[EI_CLASS] != ELFCLASS64) refuse("not a 64-bit ELF file");
  if (header.e_shoff == 0 || header.e_shnum == 0) return std::nullopt;  // no section table
  if (header.e_shentsize != sizeof(Elf64_Shdr) ||
      !inside(header.e_shoff, header.e_shnum, sizeof(Elf64_Shdr)))
    refuse("its section headers lie outside the file");
  std::vector<Elf64_Shdr> sections(header.e_shnum);
  read(header.e_shoff, sections.data(), sections.size() * sizeof(Elf64_Shdr));
  if (header.e_shstrndx >= sections.size()) refuse("its section name table is missing");
  const Elf64_Shdr& names = sections[header.e_shstrndx];
  if (!inside(names.sh_offset, 1, names.sh_size)) refuse("its section name table lies outside it");
  std::string table(names.sh_size, '\0');
  read(names.sh_offset, table.data(), table.size());
  for (const Elf64_Shdr& s : sections) {
    // c_str(): the table's last name ends at the string's own terminator at the latest.
    if (s.sh_name >= table.size() || std::string_view(table.c_str() + s.sh_name) != name) continue;
    if (s.sh_type == SHT_NOBITS || !inside(s.sh_offset, 1, s.sh_size))
      refuse("section " + name + " lies outside the file");
    std::string bytes(s.sh_size, '\0');
    read(s.sh_offset, bytes.data(), bytes.size());
    return bytes;
  }
  return std::nullopt;
}

}  // namespace kiln::cpu::exec
