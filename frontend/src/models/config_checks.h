// Range checks shared by the models' constructors: a config read from a file or the command
// line must fail with the key's name, not deep inside a layer.
#pragma once

#include <cstdint>

#include "kiln/error.h"

namespace kiln::models::detail {

inline void check_positive(const char* config, const char* key, int64_t value) {
  KILN_CHECK(value > 0, "[", config, "] expected ", key, " > 0, found ", value, ". Fix: set \"",
             key, "\" to a positive integer.");
}

inline void check_probability(const char* config, const char* key, double value) {
  KILN_CHECK(value >= 0 && value < 1, "[", config, "] expected 0 <= ", key, " < 1, found ", value,
             ". Fix: set \"", key, "\" to a dropout probability such as 0.1.");
}

}  // namespace kiln::models::detail
