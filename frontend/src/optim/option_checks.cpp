// The optimizers' option checks (option_checks.h).
#include "option_checks.h"

#include <cmath>

#include "kiln/error.h"

namespace kiln::optim::detail {

namespace {
constexpr const char* kFix = " Fix: pass a value in range in the options (or param_groups()[g].options).";
}

void check_at_least(const std::string& optimizer, const char* option, double value, double lowest) {
  KILN_CHECK(std::isfinite(value) && value >= lowest, "[", optimizer, "] expected ", option, " >= ",
             lowest, ", got ", value, ".", kFix);
}

void check_decay(const std::string& optimizer, const char* option, double value) {
  KILN_CHECK(value >= 0 && value < 1, "[", optimizer, "] expected ", option, " in [0, 1), got ",
             value, ".", kFix);
}

}  // namespace kiln::optim::detail
