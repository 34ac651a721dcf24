// Fuzz target: the safetensors reader. What it accepts must write back and read back to the
// same tensors and metadata, and the copying and the viewing readers must agree.
#include <cstring>
#include <memory>

#include "fuzz/fuzz_targets.h"
#include "kiln/serialize/safetensors.h"

namespace kiln::fuzz {

namespace {

void expect_same(const SafetensorsFile& a, const SafetensorsFile& b, const char* what) {
  KILN_FUZZ_EXPECT(a.metadata == b.metadata, what, ": the metadata differs");
  KILN_FUZZ_EXPECT(a.tensors.size() == b.tensors.size(), what, ": ", a.tensors.size(), " vs ",
                   b.tensors.size(), " tensors");
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const auto& [name, t] = a.tensors[i];
    const Tensor* u = b.find(name);
    KILN_FUZZ_EXPECT(u != nullptr, what, ": tensor \"", name, "\" is missing");
    KILN_FUZZ_EXPECT(t.type_str() == u->type_str(), what, ": tensor \"", name, "\" is ",
                     t.type_str(), " vs ", u->type_str());
    KILN_FUZZ_EXPECT(t.nbytes() == 0 || std::memcmp(t.raw_data(), u->raw_data(), t.nbytes()) == 0,
                     what, ": the data of tensor \"", name, "\" differs");
  }
}

}  // namespace

int fuzz_safetensors(const uint8_t* data, size_t size) {
  SafetensorsFile file;
  try {
    file = load_safetensors_bytes(data, size, "<fuzz input>");
  } catch (const Error&) {
    return 0;
  }
  // The viewing reader runs the same checks; a non-owning owner: the views die below.
  {
    std::shared_ptr<const void> owner(data, [](const void*) {});
    SafetensorsFile view = must_succeed("view_safetensors_bytes", [&] {
      return view_safetensors_bytes(owner, data, size, "<fuzz input>");
    });
    expect_same(file, view, "viewing vs copying reader");
  }
  std::vector<uint8_t> written =
      must_succeed("safetensors_bytes", [&] { return safetensors_bytes(file.tensors, file.metadata); });
  SafetensorsFile again = must_succeed("load_safetensors_bytes of kiln's own file", [&] {
    return load_safetensors_bytes(written.data(), written.size(), "<rewritten>");
  });
  expect_same(file, again, "read, written and read again");
  std::vector<uint8_t> rewritten = safetensors_bytes(again.tensors, again.metadata);
  KILN_FUZZ_EXPECT(rewritten == written, "writing the same tensors twice gives different bytes");
  return 0;
}

}  // namespace kiln::fuzz
