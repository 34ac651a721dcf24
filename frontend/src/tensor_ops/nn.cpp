// Neural-network functions (kiln::nn::functional) and their vjps.
#include "../call.h"
#include "../vjp_registry.h"

namespace kiln {
namespace detail {
void register_nn_vjps() {}
}  // namespace detail
}  // namespace kiln
