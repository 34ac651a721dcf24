// Failure flags of the generated kernels (failure_flag.h).
#include "failure_flag.h"

#include <climits>

#include "kiln/cuda/elementwise_kernels.h"
#include "kiln/cuda/graph_capture.h"
#include "kiln/error.h"

namespace kiln::cuda {

Tensor failure_flag(Device device) {
  Tensor flag = Tensor::empty({1}, kInt64, device);
  copy_on_gpu(Tensor::scalar(int64_t{LLONG_MAX}, kInt64), flag);  // exact, as a double would not be
  return flag;
}

std::optional<int64_t> first_failure(const Tensor& flag) {
  fail_if_capturing(flag.device().index,
                    "reading a kernel's failure flag back to the host (the index and target "
                    "checks of indexing ops, losses and sampling)");
  const int64_t element = flag.item<int64_t>();
  if (element == LLONG_MAX) return std::nullopt;
  return element;
}

void check_failure(const Tensor& flag, std::function<void(int64_t element)> report) {
  if (!is_capturing(flag.device().index)) {
    if (const std::optional<int64_t> element = first_failure(flag)) [[unlikely]]
      report(*element);
    return;
  }
  defer_until_replayed([flag, report = std::move(report)] {
    if (const std::optional<int64_t> element = first_failure(flag)) report(*element);
  });
}

}  // namespace kiln::cuda
