// Layout functions (cat, stack, gather, ...) and their vjps.
#include "../call.h"
#include "../vjp_registry.h"

namespace kiln {
namespace detail {
void register_layout_vjps() {}
}  // namespace detail
}  // namespace kiln
