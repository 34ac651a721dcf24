// L-BFGS: PyTorch's torch.optim.LBFGS, step for step, including its strong-Wolfe line search.
//
// Each step() takes a closure that clears the gradients, computes the loss, calls backward()
// and returns the loss; L-BFGS calls it as often as it needs (up to max_eval times a step):
//
//   kiln::optim::LBFGS opt(model.parameters(), {.lr = 1, .line_search_fn = "strong_wolfe"});
//   for (int i = 0; i < 10; ++i)
//     opt.step([&] { opt.zero_grad(); Tensor loss = criterion(model(x), y); loss.backward(); return loss; });
//
// As in PyTorch, it takes one parameter group, and its memory (the last history_size steps
// and gradient changes, flat over all parameters) is kept with the first parameter's state, so
// state_dict() saves it and load_state_dict() resumes it. The line search is an option of the
// optimizer it was built with; load_state_dict() keeps it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kiln/optim/optimizer.h"

namespace kiln::optim {

struct LBFGSOptions {
  double lr = 1;
  int64_t max_iter = 20;        // iterations per step()
  int64_t max_eval = 0;         // closure calls per step(); 0: max_iter * 5 / 4
  double tolerance_grad = 1e-7;    // stop when every gradient entry is this small
  double tolerance_change = 1e-9;  // stop when the loss or the step changes less
  int64_t history_size = 100;
  std::optional<std::string> line_search_fn;  // "strong_wolfe", or none (fixed step lr)

  template <class V>
  void fields(V& v) {
    v("lr", lr);
    v("max_iter", max_iter);
    v("max_eval", max_eval);
    v("tolerance_grad", tolerance_grad);
    v("tolerance_change", tolerance_change);
    v("history_size", history_size);
  }
  void validate(const std::string& optimizer) const;
  int64_t evaluations() const { return max_eval > 0 ? max_eval : max_iter * 5 / 4; }
};

class LBFGS : public OptimizerOf<LBFGSOptions> {
 public:
  using Closure = std::function<Tensor()>;

  LBFGS(std::vector<Tensor> params, LBFGSOptions options = {});
  // Runs up to max_iter iterations; returns the loss of the closure's first call.
  Tensor step(const Closure& closure);
  // L-BFGS needs a closure: this throws, naming the fix.
  void step() override;

 protected:
  std::vector<std::string> buffer_names() const override { return {"d", "prev_flat_grad"}; }
  std::vector<std::string> scalar_names() const override {
    return {"func_evals", "n_iter", "t", "H_diag", "prev_loss"};
  }
  bool keeps_buffer(const std::string& name) const override;
  bool keeps_scalar(const std::string& name) const override;
  Shape buffer_shape(const std::string& name, const Tensor& param) const override;

 private:
  Tensor flat_grad() const;
  void add_to_params(double step_size, const Tensor& direction);
  std::vector<Tensor> clone_params() const;
  void set_params(const std::vector<Tensor>& values);
  int64_t numel_ = 0;
};

}  // namespace kiln::optim
