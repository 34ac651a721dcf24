// A budget on the state a model may register while it is built: kiln::models::load_model
// builds a model from a config stored in a file, and a tampered or mistaken config (a
// d_hidden of 100,000 where the weights are 256 wide) must be refused before it allocates
// and initializes gigabytes that the file's tensors would then contradict.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::nn {

// While alive, the parameters and buffers registered on this thread (by any module) may
// hold at most `elements` elements in all; the registration that passes it throws a
// kiln::Error naming the tensor, the running total and `reason` (what the budget stands
// for, e.g. "the checkpoint 'm.safetensors' holds 269,322 elements"), before the tensor is
// written. Scopes nest: the innermost one counts. Lazy (uninitialized) parameters count
// when they materialize.
class StateBudgetScope {
 public:
  StateBudgetScope(int64_t elements, std::string reason);
  ~StateBudgetScope();
  StateBudgetScope(const StateBudgetScope&) = delete;
  StateBudgetScope& operator=(const StateBudgetScope&) = delete;

  int64_t used() const { return used_; }

 private:
  friend void count_state_elements(const std::string& what, int64_t elements);
  int64_t limit_;
  int64_t used_ = 0;
  std::string reason_;
  StateBudgetScope* previous_;
};

// Charges `elements` to the innermost budget of this thread, if any (called by the module
// registrations; `what` names the tensor in the error).
void count_state_elements(const std::string& what, int64_t elements);

}  // namespace kiln::nn
