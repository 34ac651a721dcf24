// What every example program shares: a check that records failures instead of stopping,
// and the exit status ctest reads (0 only when every check passed).
#pragma once

#include <iostream>
#include <string>

inline int example_failures = 0;

inline void check(bool ok, const std::string& what) {
  if (!ok) {
    std::cerr << "FAILED: " << what << "\n";
    ++example_failures;
  }
}

// Prints "<name>: all checks passed" when nothing failed; returns main's exit status.
inline int finish(const char* name) {
  if (example_failures == 0) std::cout << name << ": all checks passed\n";
  return example_failures == 0 ? 0 : 1;
}
