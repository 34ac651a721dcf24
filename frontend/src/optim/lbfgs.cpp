// L-BFGS: PyTorch's algorithm (torch/optim/lbfgs.py) over flat vectors of all parameters. The
// two-loop recursion and the strong-Wolfe line search read a few numbers per iteration back to
// the host (dot products, max norms), as PyTorch's does.
#include "kiln/optim/lbfgs.h"

#include <algorithm>
#include <cmath>
#include <deque>

#include "kiln/autograd.h"
#include "kiln/tensor_ops/factory.h"
#include "kiln/tensor_ops/layout.h"
#include "option_checks.h"

namespace kiln::optim {

void LBFGSOptions::validate(const std::string& optimizer) const {
  detail::check_at_least(optimizer, "lr", lr, 0);
  detail::check_at_least(optimizer, "max_iter", static_cast<double>(max_iter), 1);
  detail::check_at_least(optimizer, "max_eval", static_cast<double>(max_eval), 0);
  detail::check_at_least(optimizer, "tolerance_grad", tolerance_grad, 0);
  detail::check_at_least(optimizer, "tolerance_change", tolerance_change, 0);
  detail::check_at_least(optimizer, "history_size", static_cast<double>(history_size), 1);
  KILN_CHECK(!line_search_fn || *line_search_fn == "strong_wolfe", "[", optimizer,
             "] expected line_search_fn \"strong_wolfe\" or none, got \"", line_search_fn.value_or(""),
             "\". Fix: pass .line_search_fn = \"strong_wolfe\", or leave it unset for steps of size lr.");
}

namespace {

double dot(const Tensor& a, const Tensor& b) {
  return mul(a, b).sum().item<double>();
}

double max_abs(const Tensor& t) {
  return t.abs().max().item<double>();
}

// The minimizer of the cubic through (x1, f1) and (x2, f2) with slopes g1 and g2, clamped to
// [lo, hi] (the bracket when not given); the bracket's midpoint when the cubic has none.
double cubic_interpolate(double x1, double f1, double g1, double x2, double f2, double g2,
                         std::optional<std::pair<double, double>> bounds = std::nullopt) {
  const auto [lo, hi] = bounds ? *bounds : std::pair{std::min(x1, x2), std::max(x1, x2)};
  const double d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2);
  const double d2_square = d1 * d1 - g1 * g2;
  if (d2_square < 0) return (lo + hi) / 2;
  const double d2 = std::sqrt(d2_square);
  const double min_pos = x1 <= x2 ? x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
                                  : x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2));
  return std::min(std::max(min_pos, lo), hi);
}

// One point of the line search: step t, loss f, flat gradient g and its slope along d.
struct Point {
  double t = 0, f = 0;
  Tensor g;
  double gtd = 0;
};

struct LineSearchResult {
  Point best;
  int64_t evaluations = 0;
};

// PyTorch's _strong_wolfe (Nocedal & Wright, algorithms 3.5 and 3.6): brackets a step that
// satisfies the strong Wolfe conditions, then zooms into the bracket by cubic interpolation.
// `evaluate(t)` gives the loss and flat gradient at step t along d.
template <class Evaluate>
LineSearchResult strong_wolfe(Evaluate&& evaluate, double t, const Tensor& d, const Point& start,
                              double tolerance_change, double c1 = 1e-4, double c2 = 0.9, int64_t max_ls = 25) {
  const double d_norm = max_abs(d);
  const double f = start.f, gtd = start.gtd;
  auto at = [&](double step) {
    auto [loss, grad] = evaluate(step);
    return Point{step, loss, grad, dot(grad, d)};
  };
  Point next = at(t);
  int64_t evaluations = 1;
  Point prev = start;
  prev.t = 0;
  bool done = false;
  int64_t ls_iter = 0;
  std::vector<Point> bracket;
  while (ls_iter < max_ls) {
    if (next.f > f + c1 * next.t * gtd || (ls_iter > 1 && next.f >= prev.f)) {
      bracket = {prev, next};
      break;
    }
    if (std::abs(next.gtd) <= -c2 * gtd) {
      bracket = {next};
      done = true;
      break;
    }
    if (next.gtd >= 0) {
      bracket = {prev, next};
      break;
    }
    const double min_step = next.t + 0.01 * (next.t - prev.t), max_step = next.t * 10;
    const double step = cubic_interpolate(prev.t, prev.f, prev.gtd, next.t, next.f, next.gtd, {{min_step, max_step}});
    prev = next;
    next = at(step);
    ++evaluations;
    ++ls_iter;
  }
  if (ls_iter == max_ls) bracket = {start, next};

  // Zoom: bracket[low] is the lower of the two losses.
  bool insufficient_progress = false;
  size_t low = 0, high = 1;
  if (bracket.size() == 2 && bracket[0].f > bracket[1].f) std::swap(low, high);
  while (!done && ls_iter < max_ls) {
    const double lo_t = std::min(bracket[0].t, bracket[1].t), hi_t = std::max(bracket[0].t, bracket[1].t);
    if ((hi_t - lo_t) * d_norm < tolerance_change) break;
    double step = cubic_interpolate(bracket[0].t, bracket[0].f, bracket[0].gtd, bracket[1].t, bracket[1].f,
                                    bracket[1].gtd);
    // Too close to an end of the bracket: move away from it unless the last move made progress.
    const double eps = 0.1 * (hi_t - lo_t);
    if (std::min(hi_t - step, step - lo_t) < eps) {
      if (insufficient_progress || step >= hi_t || step <= lo_t) {
        step = std::abs(step - hi_t) < std::abs(step - lo_t) ? hi_t - eps : lo_t + eps;
        insufficient_progress = false;
      } else {
        insufficient_progress = true;
      }
    } else {
      insufficient_progress = false;
    }
    Point p = at(step);
    ++evaluations;
    ++ls_iter;
    if (p.f > f + c1 * p.t * gtd || p.f >= bracket[low].f) {
      bracket[high] = p;
      low = bracket[0].f <= bracket[1].f ? 0 : 1;
      high = 1 - low;
    } else {
      if (std::abs(p.gtd) <= -c2 * gtd)
        done = true;
      else if (p.gtd * (bracket[high].t - bracket[low].t) >= 0)
        bracket[high] = bracket[low];
      bracket[low] = p;
    }
  }
  return {bracket[low], evaluations};
}

std::string numbered(const char* name, size_t k) {
  return std::string(name) + "." + std::to_string(k);
}

// The name before ".<k>" when `name` is `<base>.<digits>`.
bool is_numbered(const std::string& name, const char* base) {
  const std::string prefix = std::string(base) + ".";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return false;
  return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(prefix.size()), name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

LBFGS::LBFGS(std::vector<Tensor> params, LBFGSOptions options)
    : OptimizerOf("LBFGS", std::move(params), options) {
  const std::vector<Tensor>& ps = groups_[0].params;
  for (const Tensor& p : ps) {
    KILN_CHECK(p.dtype() == ps[0].dtype() && p.device() == ps[0].device(), "[LBFGS] expected parameters of one "
               "dtype and device (it keeps its history flat over all of them), got ", ps[0].type_str(), " and ",
               p.type_str(), ". Fix: convert the model with .to() first.");
    numel_ += p.numel();
  }
}

void LBFGS::step() {
  KILN_FAIL("[LBFGS] step() needs a closure that re-evaluates the loss (L-BFGS calls it several times per "
            "step). Fix: opt.step([&] { opt.zero_grad(); Tensor loss = ...; loss.backward(); return loss; }).");
}

bool LBFGS::keeps_buffer(const std::string& name) const {
  return Optimizer::keeps_buffer(name) || is_numbered(name, "old_dirs") || is_numbered(name, "old_stps");
}

bool LBFGS::keeps_scalar(const std::string& name) const {
  return Optimizer::keeps_scalar(name) || is_numbered(name, "ro");
}

Shape LBFGS::buffer_shape(const std::string&, const Tensor&) const {
  return Shape{numel_};
}

Tensor LBFGS::flat_grad() const {
  std::vector<Tensor> parts;
  for (const Tensor& p : groups_[0].params) {
    const Tensor g = p.grad();
    parts.push_back(g.defined() ? g.reshape({-1}) : zeros({p.numel()}, TensorOptions(p.dtype()).with_device(p.device())));
  }
  return cat(parts, 0);
}

void LBFGS::add_to_params(double step_size, const Tensor& direction) {
  int64_t offset = 0;
  for (Tensor& p : groups_[0].params) {
    p.add_(direction.slice(0, offset, offset + p.numel()).view(p.sizes()), step_size);
    offset += p.numel();
  }
}

std::vector<Tensor> LBFGS::clone_params() const {
  std::vector<Tensor> out;
  for (const Tensor& p : groups_[0].params) out.push_back(p.clone());
  return out;
}

void LBFGS::set_params(const std::vector<Tensor>& values) {
  for (size_t i = 0; i < values.size(); ++i) groups_[0].params[i].copy_(values[i]);
}

Tensor LBFGS::step(const Closure& closure) {
  KILN_CHECK(closure, "[LBFGS] step() got an empty closure. Fix: pass a function that returns the loss.");
  KILN_CHECK(groups_.size() == 1, "[LBFGS] takes one parameter group (as PyTorch's does), got ", groups_.size(),
             ". Fix: build one LBFGS per group, or put every parameter in one group.");
  NoGradGuard no_grad;
  const LBFGSOptions& o = groups_[0].options;
  o.validate(name());
  auto evaluate = [&] {
    EnableGradGuard grad_mode;
    const Tensor loss = closure();
    KILN_CHECK(loss.defined() && loss.numel() == 1, "[LBFGS] the closure must return the loss as a tensor of one "
               "element, got ", loss.defined() ? loss.type_str() : std::string("an undefined tensor"), ".");
    return loss;
  };

  ParamState& s = state_at(0, 0);
  auto scalar = [&](const char* key, double fallback) {
    auto it = s.scalars.find(key);
    return it == s.scalars.end() ? fallback : it->second;
  };
  const Tensor original_loss = evaluate();
  double loss = original_loss.item<double>();
  int64_t current_evals = 1;
  s.scalars["func_evals"] = scalar("func_evals", 0) + 1;
  Tensor flat = flat_grad();
  if (max_abs(flat) <= o.tolerance_grad) return original_loss;

  // The memory of earlier steps.
  std::deque<Tensor> old_dirs, old_stps;
  std::deque<double> ro;
  for (size_t k = 0; s.buffers.count(numbered("old_dirs", k)); ++k) {
    old_dirs.push_back(s.buffers.at(numbered("old_dirs", k)));
    old_stps.push_back(s.buffers.at(numbered("old_stps", k)));
    ro.push_back(s.scalars.at(numbered("ro", k)));
  }
  Tensor d = s.buffers.count("d") ? s.buffers.at("d") : Tensor();
  Tensor prev_flat_grad = s.buffers.count("prev_flat_grad") ? s.buffers.at("prev_flat_grad") : Tensor();
  double t = scalar("t", 0), h_diag = scalar("H_diag", 1), prev_loss = scalar("prev_loss", 0);
  double n_iter_total = scalar("n_iter", 0);

  for (int64_t n_iter = 1; n_iter <= o.max_iter; ++n_iter) {
    n_iter_total += 1;
    // The direction: steepest descent first, then the two-loop recursion over the memory.
    if (n_iter_total == 1) {
      d = neg(flat);
      old_dirs.clear(), old_stps.clear(), ro.clear();
      h_diag = 1;
    } else {
      const Tensor y = sub(flat, prev_flat_grad);
      const Tensor step_taken = d * t;
      const double ys = dot(y, step_taken);
      if (ys > 1e-10) {  // keep the pair only where it keeps the Hessian estimate positive definite
        if (static_cast<int64_t>(old_dirs.size()) == o.history_size) {
          old_dirs.pop_front(), old_stps.pop_front(), ro.pop_front();
        }
        old_dirs.push_back(y), old_stps.push_back(step_taken), ro.push_back(1 / ys);
        h_diag = ys / dot(y, y);
      }
      std::vector<double> al(old_dirs.size());
      Tensor q = neg(flat);
      for (size_t i = old_dirs.size(); i-- > 0;) {
        al[i] = dot(old_stps[i], q) * ro[i];
        q.add_(old_dirs[i], -al[i]);
      }
      d = q.mul_(h_diag);
      for (size_t i = 0; i < old_dirs.size(); ++i) {
        const double be_i = dot(old_dirs[i], d) * ro[i];
        d.add_(old_stps[i], al[i] - be_i);
      }
    }
    prev_flat_grad = flat.clone();
    prev_loss = loss;
    t = n_iter_total == 1 ? std::min(1.0, 1.0 / flat.abs().sum().item<double>()) * o.lr : o.lr;
    const double gtd = dot(flat, d);
    if (gtd > -o.tolerance_change) break;  // not a descent direction any more

    int64_t ls_evals = 0;
    bool converged = false;
    if (o.line_search_fn) {
      const std::vector<Tensor> x_init = clone_params();
      auto directional = [&](double step) {
        add_to_params(step, d);
        const double value = evaluate().item<double>();
        Tensor grad = flat_grad();
        set_params(x_init);
        return std::pair{value, grad};
      };
      // PyTorch's line search keeps its own tolerance (1e-9), whatever tolerance_change is.
      LineSearchResult found = strong_wolfe(directional, t, d, Point{0, loss, flat, gtd}, 1e-9);
      loss = found.best.f, flat = found.best.g, t = found.best.t, ls_evals = found.evaluations;
      add_to_params(t, d);
      converged = max_abs(flat) <= o.tolerance_grad;
    } else {
      add_to_params(t, d);
      if (n_iter != o.max_iter) {
        loss = evaluate().item<double>();
        flat = flat_grad();
        converged = max_abs(flat) <= o.tolerance_grad;
        ls_evals = 1;
      }
    }
    current_evals += ls_evals;
    s.scalars["func_evals"] += static_cast<double>(ls_evals);
    if (n_iter == o.max_iter || current_evals >= o.evaluations() || converged) break;
    if (max_abs(d) * std::abs(t) <= o.tolerance_change) break;
    if (std::abs(loss - prev_loss) < o.tolerance_change) break;
  }

  // Keep the memory for the next step (and for state_dict()).
  for (auto it = s.buffers.begin(); it != s.buffers.end();)
    it = is_numbered(it->first, "old_dirs") || is_numbered(it->first, "old_stps") ? s.buffers.erase(it) : std::next(it);
  for (auto it = s.scalars.begin(); it != s.scalars.end();)
    it = is_numbered(it->first, "ro") ? s.scalars.erase(it) : std::next(it);
  for (size_t k = 0; k < old_dirs.size(); ++k) {
    s.buffers[numbered("old_dirs", k)] = old_dirs[k];
    s.buffers[numbered("old_stps", k)] = old_stps[k];
    s.scalars[numbered("ro", k)] = ro[k];
  }
  if (d.defined()) s.buffers["d"] = d;
  if (prev_flat_grad.defined()) s.buffers["prev_flat_grad"] = prev_flat_grad;
  s.scalars["t"] = t, s.scalars["H_diag"] = h_diag, s.scalars["prev_loss"] = prev_loss;
  s.scalars["n_iter"] = n_iter_total;
  return original_loss;
}

}  // namespace kiln::optim
