// Comparing a kernel's results with a reference's, element by element, the way the code
// generators' tests and the GPU check do: NaN where the reference has NaN, infinities exact,
// everything else within atol + rtol |want|.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace kiln {

// The number of elements of `got` that differ from `want`; the first `report` of them are
// reported as test failures named by `what` ("output 1 element 7: got 3, want 4").
inline int count_mismatches(const std::vector<double>& got, const std::vector<double>& want,
                            double rtol, double atol, const std::string& what, int report = 5) {
  EXPECT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    bool ok;
    if (std::isnan(want[i]) || std::isnan(got[i]))
      ok = std::isnan(want[i]) && std::isnan(got[i]);
    else if (std::isinf(want[i]))
      ok = got[i] == want[i];
    else
      ok = std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i]);
    if (!ok && bad++ < report)
      ADD_FAILURE() << what << " element " << i << ": got " << got[i] << ", want " << want[i];
  }
  return bad;
}

}  // namespace kiln
