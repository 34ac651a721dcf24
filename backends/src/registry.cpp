// The backend registry and the one rule that picks the backend of a call.
#include <mutex>

#include "kiln/backends/backend.h"
#include "kiln/closest_match.h"
#include "kiln/error.h"

namespace kiln::backends {

using detail::str_cat;

namespace {

struct Registry {
  std::mutex mutex;
  std::vector<std::unique_ptr<Backend>> backends;  // never removed: pointers stay valid
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void register_backend(std::unique_ptr<Backend> backend) {
  KILN_CHECK(backend != nullptr, "[backends] register_backend expected a backend, got null.");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const auto& b : r.backends)
    KILN_CHECK(b->name() != backend->name(), "[backends] a backend named \"", backend->name(),
               "\" is registered already. Fix: register each backend once, under a name of "
               "its own.");
  r.backends.push_back(std::move(backend));
}

const Backend* find_backend(std::string_view name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const auto& b : r.backends)
    if (b->name() == name) return b.get();
  return nullptr;
}

std::vector<std::string> backend_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& b : r.backends) names.emplace_back(b->name());
  return names;
}

const Backend& backend(std::string_view name) {
  if (const Backend* b = find_backend(name)) return *b;
  std::vector<std::string> names = backend_names();
  std::string known;
  for (const std::string& n : names) {
    const Backend* b = find_backend(n);
    known += str_cat(known.empty() ? "" : ", ", "\"", n, "\" (", b->summary(), ")");
  }
  std::string near = closest_match(name, names);
  KILN_FAIL("[compile] unknown backend \"", name, "\"; registered: ",
            known.empty() ? std::string("none") : known, ".",
            near.empty() ? std::string() : str_cat(" Did you mean \"", near, "\"?"),
            name == "cpu" ? " The cpu backend comes with kiln's code generator: link "
                            "kiln::kiln (not kiln::eager alone) from a build with "
                            "KILN_COMPILER=ON (the default)."
                          : "",
            " Fix: name a registered backend, or leave CompileOptions::backend empty for the "
            "best one this build has.");
}

const Backend& reference_backend() {
  const Backend* b = find_backend("interp");
  KILN_CHECK(b != nullptr, "[backends] the reference executor (\"interp\") is not registered. "
             "Fix: call kiln::interp::register_backend() (kiln::init() does).");
  return *b;
}

const Backend& default_backend() {
  const Backend* cpu = find_backend("cpu");
  return cpu ? *cpu : reference_backend();
}

namespace {

// The backend that runs `graph` when the caller named none: kiln's own compiled backends, by
// the device they drive (a backend a program registers is used only by name).
const Backend& default_backend_for(const ir::Graph& graph) {
  for (std::string_view name : {"cpu", "cuda"}) {
    const Backend* b = find_backend(name);
    if (b && !b->refusal(graph)) return *b;
  }
  return default_backend();
}

}  // namespace

Choice choose_backend(const Backend* named, const ir::Graph& graph, std::string_view grad_source) {
  const Backend& requested = named ? *named : default_backend_for(graph);
  if (std::optional<std::string> why = requested.refusal(graph))
    return {&reference_backend(),
            str_cat("interp, because the ", requested.name(), " backend cannot run this graph: ",
                    *why)};
  if (!grad_source.empty() && !requested.records_gradients())
    return {&reference_backend(),
            str_cat("interp, because gradients are needed (", grad_source,
                    " and grad mode is on); generated kernels have no backward yet. Fix for "
                    "inference: call under kiln::NoGradGuard")};
  return {&requested, ""};
}

}  // namespace kiln::backends
