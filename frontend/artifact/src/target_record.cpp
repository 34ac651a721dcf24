// The kernel library's target record: written as an assembly source at export, parsed by
// the loader from the library's section.
#include "kiln/artifact/target_record.h"

#include <cctype>
#include <sstream>
#include <vector>

#include "kiln/error.h"

namespace kiln::artifact {

namespace {

constexpr std::string_view kMagic = "kiln-target 1";

bool plain_name(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '+' ||
          c == '-'))
      return false;
  return true;
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ",") + p;
  return out;
}

}  // namespace

std::string target_record(const Target& target) {
  return std::string(kMagic) + "\narch " + target.arch + "\ncpu " + target.cpu + "\nfeatures " +
         join(target.features) + "\n";
}

std::string target_record_assembly(const Target& target) {
  std::vector<std::string> names = target.features;
  names.push_back(target.arch);
  names.push_back(target.cpu);
  for (const std::string& n : names)
    KILN_CHECK(plain_name(n),
               "[export] expected target names of letters, digits and ._+-, found \"", n,
               "\". Fix: this is a kiln bug in the target the code generator reported.");
  std::string escaped;
  for (char c : target_record(target))
    escaped += c == '\n' ? std::string("\\n") : std::string(1, c);
  return std::string("  .section ") + kTargetSection + ",\"\",@progbits\n  .ascii \"" + escaped +
         "\"\n  .section .note.GNU-stack,\"\",@progbits\n";
}

Target parse_target_record(std::string_view bytes, const std::string& origin) {
  auto refuse = [&](const std::string& why) {
    KILN_FAIL("[kiln_rt] ", origin, ": expected a target record (", kTargetSection,
              ") naming the CPU its kernels were compiled for, ", why,
              ". Fix: export the model again (kiln::export_model or `kiln export`).");
  };
  std::istringstream in{std::string(bytes)};
  std::string line;
  if (!std::getline(in, line) || line != kMagic) refuse("found no \"kiln-target 1\" header");
  Target t;
  auto field = [&](const char* key) {
    std::string prefix = std::string(key) + " ";
    if (!std::getline(in, line) || line.rfind(prefix, 0) != 0)
      refuse(std::string("found no \"") + key + "\" line");
    return line.substr(prefix.size());
  };
  t.arch = field("arch");
  t.cpu = field("cpu");
  std::istringstream features(field("features"));
  for (std::string f; std::getline(features, f, ',');)
    if (!f.empty()) t.features.push_back(f);
  return t;
}

}  // namespace kiln::artifact
