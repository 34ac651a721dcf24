// Where a node came from in the user's code. The tracer records a location as the call's
// return addresses and turns them into file:line only when something reads it (an error, a
// graph break, a printed graph, explain): reading the debug line tables costs ~100 ms the
// first time in a process, which a compile that reports nothing should not pay.
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace kiln::ir {

class Location {
 public:
  Location() = default;  // unknown
  Location(std::string file, int line, std::string function = {})
      : file_(std::move(file)), line_(line), function_(std::move(function)) {}
  // A location that `resolve` computes on the first read of it or of any copy (once, also
  // when copies are read from several threads). `resolve` must return a plain location.
  static Location deferred(std::function<Location()> resolve);

  const std::string& file() const { return resolved().file_; }
  int line() const { return resolved().line_; }  // 0: unknown
  const std::string& function() const { return resolved().function_; }
  bool known() const { return line() > 0; }
  // A deferred location not read yet (its resolver has not run).
  bool is_pending() const;
  bool operator==(const Location& other) const;

 private:
  struct Deferred;
  const Location& resolved() const { return deferred_ ? resolve_now() : *this; }
  const Location& resolve_now() const;

  std::string file_;
  int line_ = 0;
  std::string function_;
  std::shared_ptr<Deferred> deferred_;
};

// "tests/frontend/trace_test.cpp:42 (Net::forward)"; "" when unknown.
std::string location_str(const Location& loc);

}  // namespace kiln::ir
