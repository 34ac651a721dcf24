// Finding the user's line: collect return addresses now (cheap: the unwinder), and only
// when the location is read resolve each (with its inlined callers) through libbacktrace
// and take the first frame in a file outside kiln. The first resolution in a process reads
// and sorts the debug line tables (~100 ms for the kiln tool), so a trace that reports no
// location never pays it. Resolved addresses are cached: a trace resolves the same few
// call sites over and over.
#include "user_location.h"

#include <cxxabi.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#if KILN_HAVE_LIBBACKTRACE
#include <backtrace.h>
#endif

namespace kiln::detail {

namespace {

// The repository root as the compiler saw it; debug info holds absolute paths.
constexpr std::string_view kSourceRoot = KILN_SOURCE_ROOT "/";

std::string_view relative_to_root(std::string_view file) {
  if (file.substr(0, kSourceRoot.size()) == kSourceRoot) file.remove_prefix(kSourceRoot.size());
  return file;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// "Net::forward(...)::{lambda(std::vector<...> const&)#1}::operator()(...) const" reads
// as "Net::forward(...)::<lambda>": the full lambda type would fill a whole IR line.
std::string short_name(std::string name) {
  size_t lambda = name.find("::{lambda(");
  if (lambda != std::string::npos) name = name.substr(0, lambda) + "::<lambda>";
  return name;
}

#if KILN_HAVE_LIBBACKTRACE

std::string demangle(const char* name) {
  if (!name) return {};
  int status = 0;
  char* readable = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && readable ? readable : name;
  std::free(readable);
  return out;
}

struct Frame {
  std::string file;  // relative to the repository root when inside it
  int line = 0;
  std::string function;
};

struct Resolver {
  backtrace_state* state = nullptr;
  std::mutex mutex;
  std::unordered_map<uintptr_t, std::vector<Frame>> cache;  // pc -> innermost first

  Resolver() { state = backtrace_create_state(nullptr, /*threaded=*/1, on_error, nullptr); }
  static void on_error(void*, const char*, int) {}  // missing debug info: frames stay unknown

  const std::vector<Frame>& frames_at(uintptr_t pc) {
    auto it = cache.find(pc);
    if (it != cache.end()) return it->second;
    std::vector<Frame> frames;
    if (state) {
      backtrace_pcinfo(
          state, pc,
          [](void* data, uintptr_t, const char* file, int line, const char* function) {
            auto* out = static_cast<std::vector<Frame>*>(data);
            if (file)
              out->push_back(
                  {std::string(relative_to_root(file)), line, short_name(demangle(function))});
            return 0;
          },
          on_error, &frames);
    }
    return cache.emplace(pc, std::move(frames)).first->second;
  }
};

Resolver& resolver() {
  static Resolver r;
  return r;
}

std::vector<uintptr_t> return_addresses() {
  std::vector<uintptr_t> pcs;
  if (!resolver().state) return pcs;
  backtrace_simple(
      resolver().state, /*skip=*/1,
      [](void* data, uintptr_t pc) {
        auto* out = static_cast<std::vector<uintptr_t>*>(data);
        out->push_back(pc - 1);  // inside the call instruction, not after it
        return out->size() < 64 ? 0 : 1;
      },
      Resolver::on_error, &pcs);
  return pcs;
}

#endif

}  // namespace

bool is_kiln_internal(std::string_view file) {
  // kiln's public headers where they are installed (<prefix>/include/kiln/...): their inline
  // code (kiln::compile's call operator) is kiln's, not the user's.
  if (file.find("/include/kiln/") != std::string_view::npos) return true;
  file = relative_to_root(file);
  if (starts_with(file, "frontend/src/models/")) return false;  // built-in models are user code
  for (std::string_view prefix : {"runtime/", "ir/", "backends/", "frontend/src/",
                                  "frontend/include/", "/usr/", "../sysdeps/", "../csu/"})
    if (starts_with(file, prefix)) return true;
  return file.empty();
}

ir::Location user_location() {
#if KILN_HAVE_LIBBACKTRACE
  std::vector<uintptr_t> pcs = return_addresses();
  if (pcs.empty()) return {};
  return ir::Location::deferred([pcs = std::move(pcs)]() -> ir::Location {
    Resolver& r = resolver();
    std::lock_guard<std::mutex> lock(r.mutex);
    for (uintptr_t pc : pcs)
      for (const Frame& f : r.frames_at(pc))
        if (!is_kiln_internal(f.file)) return {f.file, f.line, f.function};
    return {};
  });
#else
  return {};
#endif
}

ir::Location user_location(SourceLoc loc) {
  if (loc.line() != 0 && !is_kiln_internal(loc.file_name()))
    return {std::string(relative_to_root(loc.file_name())), static_cast<int>(loc.line()),
            short_name(loc.function_name())};
  return user_location();
}

}  // namespace kiln::detail
