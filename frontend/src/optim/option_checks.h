// The checks of an optimizer's options (internal header): each throws kiln::Error naming the
// optimizer, the option, the range and the value.
#pragma once

#include <string>

namespace kiln::optim::detail {

// `value` is finite and at least `lowest`.
void check_at_least(const std::string& optimizer, const char* option, double value, double lowest);
// `value` is in [0, 1) (a decay rate such as a beta or rho; 1 would never forget).
void check_decay(const std::string& optimizer, const char* option, double value);

}  // namespace kiln::optim::detail
