// kiln::Error and the KILN_CHECK macro: every failure says what was expected, what was
// found, where (op, module path, source line) and how to fix it.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace kiln {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown when a value a trace cannot see (a tensor's data) is read on the host.
class GraphBreakError : public Error {
 public:
  using Error::Error;
};

namespace detail {

// Where the failure happened in the user's model (e.g. " (in module blocks.0, Linear)").
// The module system installs a provider; the runtime only calls it.
using ErrorContextFn = std::string (*)();
void set_error_context_provider(ErrorContextFn fn);
std::string error_context();

template <class... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

[[noreturn]] void throw_error(const std::string& message, const char* file, int line);

}  // namespace detail
}  // namespace kiln

// KILN_CHECK(cond, parts...): throws kiln::Error with the parts concatenated, the module
// context and the kiln source line. Parts are only formatted when the check fails.
#define KILN_CHECK(cond, ...)                                                            \
  do {                                                                                   \
    if (!(cond)) [[unlikely]]                                                            \
      ::kiln::detail::throw_error(::kiln::detail::str_cat(__VA_ARGS__), __FILE__, __LINE__); \
  } while (0)

#define KILN_FAIL(...) ::kiln::detail::throw_error(::kiln::detail::str_cat(__VA_ARGS__), __FILE__, __LINE__)
