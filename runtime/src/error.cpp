// Error formatting: appends the model context and the kiln source line.
#include "kiln/error.h"

#include <cstring>

namespace kiln::detail {

namespace {
ErrorContextFn g_context_provider = nullptr;
}

void set_error_context_provider(ErrorContextFn fn) { g_context_provider = fn; }

std::string error_context() { return g_context_provider ? g_context_provider() : std::string(); }

void throw_error(const std::string& message, const char* file, int line) {
  const char* base = std::strstr(file, "kiln/");
  std::string where = str_cat(" [", base ? base : file, ":", line, "]");
  throw Error(message + error_context() + where);
}

}  // namespace kiln::detail
