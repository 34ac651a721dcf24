// Random-graph differential testing of trace + interp: a seeded generator writes random
// well-typed sequences of frontend op calls inside a module's forward; each program must give
// eager's bits through kiln::compile on interp (values and input gradients), and eager's
// values within 1e-5 through the compiled CPU backend (passes and generated kernels), its graph must verify and
// print -> parse -> print identically, and the parsed graph must compute the same bits. A
// coverage test checks that every op in the table appears in some traced graph.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "frontend/compare_bits.h"
#include "kiln/interp/interp.h"
#include "kiln/kiln.h"
#include "kiln/ops/debug_print.h"
#include "test_util.h"

namespace kiln {
namespace {

namespace F = nn::functional;

// ---- comparing ----

void expect_same(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(same_bits(got[i], want[i])) << what << ", output " << i;
}

void expect_close(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(close_to(got[i], want[i])) << what << ", output " << i;
}

std::vector<Tensor> flat(Tensor t) {
  return {std::move(t)};
}

// ---- graphs ----

void collect_ops(const ir::Graph& g, std::set<std::string>& ops) {
  for (const auto& node : g.nodes()) {
    ops.insert(node->op->name);
    for (const auto& region : node->regions) collect_ops(*region, ops);
  }
}

// Runs a graph through the interp backend: user inputs in order, the module's live state by
// name, constants from the graph.
std::vector<Tensor> run_graph(std::shared_ptr<const ir::Graph> graph, nn::Module& model,
                              const std::vector<Tensor>& user_inputs) {
  std::vector<Tensor> args;
  size_t next = 0;
  auto state = model.named_parameters();
  for (auto& b : model.named_buffers()) state.push_back(b);
  for (const ir::GraphInput& in : graph->inputs()) {
    Tensor t;
    if (in.kind == ir::InputKind::Input) t = user_inputs.at(next++);
    for (const auto& [path, s] : state)
      if (in.kind != ir::InputKind::Input && path == in.name) t = s;
    args.push_back(t);
  }
  interp::Executable exe(std::move(graph));
  return exe.run(args);
}

// The graph verifies, prints -> parses -> prints identically (same structural hash), and the
// parsed graph run with `seed` set computes `want`. Returns the graph's op names.
std::set<std::string> check_graph(const ir::Graph& graph, nn::Module& model,
                                  const std::vector<Tensor>& inputs,
                                  const std::vector<Tensor>& want, uint64_t seed) {
  ir::verify(graph);
  std::string text = ir::print_graph(graph);
  std::shared_ptr<const ir::Graph> parsed = ir::parse_graph(text);
  ir::verify(*parsed);
  EXPECT_EQ(ir::print_graph(*parsed), text);
  EXPECT_EQ(ir::structural_hash(*parsed), ir::structural_hash(graph));
  manual_seed(seed);
  expect_same(run_graph(parsed, model, inputs), want, "the parsed graph");
  std::set<std::string> ops;
  collect_ops(graph, ops);
  return ops;
}

// ---- the generator ----

// splitmix64: the same stream on every platform and standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
  bool coin() { return next() & 1; }
  double uniform(double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1.0p-53;
  }

 private:
  uint64_t state_;
};

bool broadcastable(IntList a, IntList b) {
  for (size_t i = 1; i <= std::min(a.size(), b.size()); ++i) {
    int64_t x = a[a.size() - i], y = b[b.size() - i];
    if (x != y && x != 1 && y != 1) return false;
  }
  return true;
}

// Writes one random program: each step calls frontend ops on values made so far. It reads
// only sizes and dtypes, so eager and traced runs make the same calls.
class ProgramBuilder {
 public:
  ProgramBuilder(uint64_t seed, const std::vector<Tensor>& inputs) : rng_(seed) { pool_ = inputs; }

  void step() {
    for (int attempt = 0; attempt < 8; ++attempt)
      if (try_step(rng_.below(17))) return;
  }

  // The last three values (the inputs when nothing was made).
  std::vector<Tensor> outputs() const {
    std::vector<Tensor> out;
    for (size_t i = pool_.size() > 3 ? pool_.size() - 3 : 0; i < pool_.size(); ++i)
      out.push_back(pool_[i]);
    return out;
  }

 private:
  // A floating value, preferring the newest (deep chains find more than wide ones).
  Tensor pick_float() {
    std::vector<size_t> floats;
    for (size_t i = 0; i < pool_.size(); ++i)
      if (is_floating(pool_[i].dtype())) floats.push_back(i);
    if (floats.empty()) return cast(pool_.back(), kFloat32);
    size_t i =
        rng_.coin() ? floats.back() : floats[rng_.below(static_cast<int64_t>(floats.size()))];
    return pool_[i];
  }

  // A floating value that broadcasts against x (or one derived from x).
  Tensor partner(const Tensor& x) {
    std::vector<size_t> fits;
    for (size_t i = 0; i < pool_.size(); ++i)
      if (is_floating(pool_[i].dtype()) && broadcastable(pool_[i].sizes(), x.sizes()))
        fits.push_back(i);
    if (!fits.empty() && rng_.below(4) != 0)
      return pool_[fits[rng_.below(static_cast<int64_t>(fits.size()))]];
    if (x.dim() > 0 && rng_.coin()) return x.amax({rng_.below(x.dim())}, true);
    return x.sum();
  }

  // A random dim of x (x.dim() > 0).
  int64_t dim_of(const Tensor& x) { return rng_.below(x.dim()) - (rng_.coin() ? x.dim() : 0); }

  // Keeps values small without comparing sizes against thresholds (under a trace with
  // dynamic dims that would silently specialize the program): past three growing ops, each
  // one's result is summed over dim 0; ranks above 4 are summed away.
  void push(Tensor t, bool grows = false) {
    if (grows && ++growths_ > 3 && t.dim() > 0) t = t.sum({0});
    while (t.dim() > 4) t = t.sum({0});
    pool_.push_back(std::move(t));
  }

  bool try_step(int64_t kind) {
    Tensor x = pick_float();
    switch (kind) {
      case 0:
      case 1:
        return unary(x);
      case 2:
      case 3:
        return binary(x, partner(x));
      case 4:
        return compare(x, partner(x));
      case 5:
        return reduce(x);
      case 6:
        return reshape(x);
      case 7:
        return view_op(x);
      case 8:
        return matrix(x);
      case 9:
        return normalize(x);
      case 10:
        return join(x);
      case 11:
        return index(x);
      case 12:
        return layout(x);
      case 13:
        return reduce_to_index(x);
      case 14:
        return in_place(x);
      case 15:
        return integers(x);
      default:
        return unary(x);
    }
  }

  bool unary(const Tensor& x) {
    switch (rng_.below(28)) {
      case 0:
        push(neg(x));
        break;
      case 1:
        push(abs(x));
        break;
      case 2:
        push(exp(x));
        break;
      case 3:
        push(log(abs(x) + 0.5));
        break;
      case 4:
        push(log1p(abs(x)));
        break;
      case 5:
        push(sqrt(abs(x)));
        break;
      case 6:
        push(rsqrt(abs(x) + 0.25));
        break;
      case 7:
        push(sin(x));
        break;
      case 8:
        push(cos(x));
        break;
      case 9:
        push(tanh(x));
        break;
      case 10:
        push(sigmoid(x));
        break;
      case 11:
        push(relu(x));
        break;
      case 12:
        push(gelu(x, rng_.coin() ? GeluApproximation::Tanh : GeluApproximation::None));
        break;
      case 13:
        push(silu(x));
        break;
      case 14:
        push(leaky_relu(x, rng_.uniform(0.01, 0.3)));
        break;
      case 15:
        push(elu(x, rng_.uniform(0.5, 1.5)));
        break;
      case 16:
        push(erf(x));
        break;
      case 17:
        push(square(x));
        break;
      case 18:
        push(reciprocal(abs(x) + 1));
        break;
      case 19:
        push(sign(x) * floor(x * 3));
        break;
      case 20:
        push(ceil(x * 2) - round(x * 2));
        break;
      case 21: {
        std::optional<Scalar> lo, hi;
        if (rng_.coin()) lo = rng_.uniform(-1, 0);
        if (!lo || rng_.coin()) hi = rng_.uniform(0, 1);
        push(clamp(x, lo, hi));
        break;
      }
      case 22:
        push(pow(abs(x) + 0.1, rng_.uniform(-2, 3)));
        break;
      case 23:
        push(pow(x, static_cast<int64_t>(rng_.below(4))));
        break;
      case 24:
        push(cast(cast(x, rng_.coin() ? kFloat64 : kFloat32), x.dtype()));
        break;
      case 25:
        push(rng_.coin() ? x * rng_.uniform(-3, 3) : 1.5 - x);
        break;
      case 26:
        push(erfinv(tanh(x) * 0.9));
        break;
      default:
        push(x / 4 + 2);
        break;
    }
    return true;
  }

  bool binary(const Tensor& x, const Tensor& y) {
    switch (rng_.below(10)) {
      case 0:
        push(add(x, y));
        break;
      case 1:
        push(add(x, y, rng_.uniform(-2, 2)));
        break;
      case 2:
        push(x - y);
        break;
      case 3:
        push(x * y);
        break;
      case 4:
        push(x / (abs(y) + 0.5));
        break;
      case 5:
        push(pow(abs(x) + 0.1, y));
        break;
      case 6:
        push(maximum(x, y));
        break;
      case 7:
        push(minimum(x, y));
        break;
      case 8:
        push(atan2(x, abs(y) + 0.5));
        break;
      default:
        push(where(x > y, x, y * 0.5));
        break;
    }
    return true;
  }

  bool compare(const Tensor& x, const Tensor& y) {
    Tensor c;
    switch (rng_.below(6)) {
      case 0:
        c = eq(round(x), round(y));
        break;
      case 1:
        c = ne(round(x), round(y));
        break;
      case 2:
        c = lt(x, y);
        break;
      case 3:
        c = le(x, y);
        break;
      case 4:
        c = x > 0.25;
        break;
      default:
        c = ge(x, y);
        break;
    }
    switch (rng_.below(6)) {
      case 0:
        c = logical_and(c, x < 1);
        break;
      case 1:
        c = logical_or(c, x > -1);
        break;
      case 2:
        c = logical_not(c);
        break;
      default:
        break;
    }
    switch (rng_.below(5)) {
      case 0:
        push(where(c, x, rng_.uniform(-1, 1)));
        break;
      case 1:  // the mask may not grow x
        push(Shape(c.sizes()) == Shape(x.sizes()) ? masked_fill(x, c, rng_.uniform(-1, 1))
                                                  : where(c, x, rng_.uniform(-1, 1)));
        break;
      case 2:
        push(cast(c, x.dtype()) * y);
        break;
      case 3:
        push(c.dim() > 0 && rng_.coin() ? c.any({0}) : c.all());
        break;
      default:
        push(where(c, rng_.uniform(-1, 1), x));
        break;
    }
    return true;
  }

  std::vector<int64_t> some_dims(const Tensor& x) {
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < x.dim(); ++d)
      if (rng_.coin()) dims.push_back(d);
    if (dims.empty() && x.dim() > 0) dims.push_back(dim_of(x));
    return dims;
  }

  bool reduce(const Tensor& x) {
    std::vector<int64_t> dims = rng_.below(4) == 0 ? std::vector<int64_t>{} : some_dims(x);
    bool keep = rng_.coin();
    switch (rng_.below(10)) {
      case 0:
        push(x.sum(dims, keep));
        break;
      case 1:
        push(x.mean(dims, keep));
        break;
      case 2:
        push(x.prod(dims, keep));
        break;
      case 3:
        push(x.amax(dims, keep));
        break;
      case 4:
        push(x.amin(dims, keep));
        break;
      case 5:
        push(x.var(dims, static_cast<double>(rng_.below(2)), keep));
        break;
      case 6:
        push(x.std(dims, 1, keep));
        break;
      case 7: {
        const double ps[] = {1, 2, 3, INFINITY};
        push(x.norm(ps[rng_.below(4)], dims, keep));
        break;
      }
      case 8:
        if (x.dim() == 0) return false;
        push(logsumexp(x, some_dims(x), keep));
        break;
      default: {
        auto [m, s] = var_mean(x, dims, 0, keep);
        push(m + s);
        break;
      }
    }
    return true;
  }

  bool reduce_to_index(const Tensor& x) {
    if (x.dim() == 0) return false;
    int64_t d = dim_of(x);
    bool keep = rng_.coin();
    switch (rng_.below(4)) {
      case 0: {
        auto [values, indices] = max(x, d, keep);
        push(values);
        push(indices);
        break;
      }
      case 1: {
        auto [values, indices] = min(x, d, keep);
        push(values + cast(indices, x.dtype()));
        break;
      }
      case 2:
        push(cast(argmax(x, d, keep), x.dtype()));
        break;
      default:
        push(argmin(x));
        break;
    }
    return true;
  }

  // Another shape with x's elements, from x's own sizes (no arithmetic on sizes, which a
  // dynamic dim could not follow).
  std::vector<int64_t> new_shape(const Tensor& x) {
    int64_t first = x.dim() > 0 ? x.size(0) : 1, last = x.dim() > 0 ? x.size(-1) : 1;
    switch (rng_.below(5)) {
      case 0:
        return {-1};
      case 1:
        return {first, -1};
      case 2:
        return {1, -1, last};
      case 3:
        return {last, -1};
      default:
        return {-1, first, 1};
    }
  }

  // On a view (permuted, sliced, expanded) reshape must copy exactly when eager does.
  bool reshape(const Tensor& x) {
    switch (rng_.below(5)) {
      case 0:
        push(x.reshape(new_shape(x)));
        break;
      case 1:
        push(x.flatten());
        break;
      case 2:
        if (x.dim() < 2) return false;
        push(x.flatten(0, 1));
        break;
      case 3:
        push(x.unsqueeze(rng_.below(x.dim() + 1)));
        break;
      default:
        push(x.dim() > 0 && x.size(0) == 1 ? x.squeeze(0) : x.squeeze());
        break;
    }
    return true;
  }

  bool view_op(const Tensor& x) {
    if (x.dim() == 0) return false;
    switch (rng_.below(6)) {
      case 0:
        push(x.transpose(0, -1));
        break;
      case 1: {
        std::vector<int64_t> perm(static_cast<size_t>(x.dim()));
        for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
        std::rotate(perm.begin(), perm.begin() + 1, perm.end());
        push(x.permute(perm));
        break;
      }
      case 2: {
        int64_t d = dim_of(x), n = x.size(d);
        if (n < 2) return false;
        push(x.slice(d, rng_.below(n / 2 + 1), n, 1 + rng_.below(2)));
        break;
      }
      case 3: {
        int64_t d = dim_of(x);
        push(x.select(d, rng_.below(x.size(d))));
        break;
      }
      case 4: {
        std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end());
        for (int64_t& s : sizes)
          if (s == 1) s = 1 + rng_.below(3);
        sizes.insert(sizes.begin(), 2);
        push(x.expand(sizes), true);
        break;
      }
      default:
        push(x.narrow(dim_of(x), 0, 1));
        break;
    }
    return true;
  }

  bool matrix(const Tensor& x) {
    if (x.dim() == 0) return false;
    if (x.dim() == 1) {
      push(matmul(x, x), true);  // a dot product
      return true;
    }
    switch (rng_.below(3)) {
      case 0:
        push(matmul(x, x.transpose(-1, -2)), true);
        break;
      case 1:
        push(matmul(x.transpose(-1, -2), x), true);
        break;
      default:  // matrix @ vector, or a batched product
        push(x.dim() == 2 ? matmul(x, x.select(0, 0)) : matmul(x, x.transpose(-1, -2)), true);
        break;
    }
    return true;
  }

  bool normalize(const Tensor& x) {
    if (x.dim() == 0) return false;
    switch (rng_.below(5)) {
      case 0:
        push(F::softmax(x, dim_of(x)));
        break;
      case 1:
        push(F::log_softmax(x, dim_of(x)));
        break;
      case 2:
        push(F::layer_norm(x, {x.size(-1)}));
        break;
      case 3:  // self-attention over the last two dims (a vector attends to itself)
        push(x.dim() >= 2
                 ? F::scaled_dot_product_attention(x, x, x, Tensor(), 0.0, rng_.coin())
                 : F::scaled_dot_product_attention(x.unsqueeze(0), x.unsqueeze(0), x.unsqueeze(0)));
        break;
      default:
        push(rng_.coin() ? tril(x.dim() >= 2 ? x : x.unsqueeze(0), rng_.below(3) - 1)
                         : triu(x.dim() >= 2 ? x : x.unsqueeze(0), rng_.below(3) - 1));
    }
    return true;
  }

  bool join(const Tensor& x) {
    if (x.dim() == 0) return false;
    int64_t d = dim_of(x);
    Tensor y = exp(x) - 1;
    switch (rng_.below(4)) {
      case 0:
        push(cat({x, y}, d), true);
        break;
      case 1:
        push(cat({x, x.narrow(d, 0, 1)}, d), true);
        break;
      case 2:
        push(stack({x, y}, rng_.below(x.dim() + 1)), true);
        break;
      default: {
        push(chunk(x, 2, d).back());
        break;
      }
    }
    return true;
  }

  // Index tensors are host constants made from the generator: the graph captures them. Their
  // values are 0 or 1 (1 only where the indexed size is not 1), never derived from a size: a
  // dynamic dim's size is not known while tracing.
  Tensor indices(int64_t size, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    std::vector<int64_t> v(static_cast<size_t>(n));
    for (int64_t& i : v) i = size == 1 ? 0 : rng_.below(2);
    return Tensor::from_vector<int64_t>(v, shape);
  }

  // Index shapes are small and fixed (1 except along d), never x's own sizes.
  bool index(const Tensor& x) {
    if (x.dim() == 0) return false;
    int64_t d = dim_of(x), n = x.size(d);
    std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
    // scatter_add's index may not be longer than its source (x) along d; sizes other than 1
    // are at least 2.
    shape[static_cast<size_t>(d < 0 ? d + x.dim() : d)] = n == 1 ? 1 : 1 + rng_.below(2);
    switch (rng_.below(4)) {
      case 0:
        push(index_select(x, d, indices(n, {1 + rng_.below(4)})), true);
        break;
      case 1:
        push(gather(x, d, indices(n, shape)));
        break;
      case 2:
        push(scatter_add(x, d, indices(n, shape), sin(x)));
        break;
      default:
        push(index_add(x, d, indices(n, {1}), x.narrow(d, 0, 1) * 3));
        break;
    }
    return true;
  }

  // Integer values: casts, promotion against floats, true division, integer reductions.
  bool integers(const Tensor& x) {
    Tensor i = cast(round(x * 3), rng_.coin() ? kInt64 : kInt32);
    switch (rng_.below(5)) {
      case 0:
        push(i / 2);
        break;
      case 1:
        push(x + i);
        break;
      case 2:
        push(maximum(i * 2 + 1, -i));
        break;
      case 3:
        push(i.sum());
        break;
      default:
        push(cast(abs(i) > 1, x.dtype()) * x);
        break;
    }
    return true;
  }

  // In-place updates of a fresh copy (a traced value is rebound to the update's result).
  bool in_place(const Tensor& x) {
    Tensor t = clone(x);
    // A value that broadcasts into x without growing it.
    Tensor p = x.dim() > 0 && rng_.coin() ? cos(x).amax({dim_of(x)}, true) : sin(x).sum();
    switch (rng_.below(8)) {
      case 0:
        t.add_(p, rng_.uniform(-2, 2));
        break;
      case 1:
        t.sub_(p);
        break;
      case 2:
        t.mul_(p);
        break;
      case 3:
        t.div_(abs(p) + 1);
        break;
      case 4:
        t.mul_(rng_.uniform(-2, 2));
        break;
      case 5:
        t.clamp_(-0.5, 0.5);
        break;
      case 6:
        t.copy_(p);
        break;
      default:
        t.add_(2.5);
        break;
    }
    push(t);
    return true;
  }

  bool layout(const Tensor& x) {
    if (x.dim() == 0) return false;
    switch (rng_.below(3)) {
      case 0: {
        // Reflect pads below the size: 1 < 2, and a dynamic dim is at least 2.
        int64_t before = rng_.below(2), after = rng_.below(2);
        bool reflect = x.size(-1) >= 2 && rng_.coin();
        push(reflect ? F::pad(x, {before, after}, "reflect")
                     : F::pad(x, {before, after + 1}, "constant", rng_.uniform(-1, 1)),
             true);
        break;
      }
      case 1: {
        int64_t d = dim_of(x), n = x.size(d);
        push(slice_scatter(x, cos(x.narrow(d, 0, (n + 1) / 2)), d, 0, (n + 1) / 2));
        break;
      }
      default:
        push(clone(x));
        break;
    }
    return true;
  }

  Rng rng_;
  std::vector<Tensor> pool_;
  int growths_ = 0;
};

// A module whose forward is the random program `seed`; `steps` is a static argument (a guard).
struct RandomProgram : nn::Module {
  uint64_t seed = 0;
  explicit RandomProgram(uint64_t s) : seed(s) {}
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, int64_t steps) const {
    ProgramBuilder builder(seed, inputs);
    for (int64_t i = 0; i < steps; ++i) builder.step();
    return builder.outputs();
  }
  std::vector<Tensor> forward(const Tensor& a, int64_t steps) { return run({a}, steps); }
  std::vector<Tensor> forward(const Tensor& a, const Tensor& b, int64_t steps) {
    return run({a, b}, steps);
  }
  std::vector<Tensor> forward(const Tensor& a, const Tensor& b, const Tensor& c, int64_t steps) {
    return run({a, b, c}, steps);
  }
};

// Calls f with the program's 1-3 inputs and the step count.
template <class Fn>
auto call_with(Fn&& f, const std::vector<Tensor>& in, int64_t steps) {
  if (in.size() == 1) return f(in[0], steps);
  if (in.size() == 2) return f(in[0], in[1], steps);
  return f(in[0], in[1], in[2], steps);
}

// 1-3 inputs with related shapes (equal or broadcasting), mostly float32.
// `grow` is added to a leading dim of size 2 or more (another batch size for the same program).
std::vector<Tensor> program_inputs(uint64_t seed, int64_t grow = 0) {
  Rng rng(seed ^ 0x5eedull);
  Generator gen(seed + static_cast<uint64_t>(grow));
  DType dtype = rng.below(8) == 0 ? kFloat64 : kFloat32;
  std::vector<int64_t> shape;
  for (int64_t r = rng.below(4); r > 0; --r) shape.push_back(1 + rng.below(4));
  if (!shape.empty() && shape[0] >= 2) shape[0] += grow;
  std::vector<Tensor> inputs;
  for (int64_t n = 1 + rng.below(3); n > 0; --n) {
    std::vector<int64_t> s = shape;
    if (rng.coin())
      for (int64_t& d : s)
        if (rng.coin()) d = 1;
    inputs.push_back(randn(s, dtype, &gen));
  }
  return inputs;
}

std::vector<Tensor> leaves(const std::vector<Tensor>& inputs, bool grad) {
  std::vector<Tensor> out;
  for (const Tensor& t : inputs) out.push_back(grad ? clone(t).requires_grad_() : t);
  return out;
}

// Backpropagates the sum of every output that carries a gradient; false when none does.
bool backprop(const std::vector<Tensor>& outputs) {
  Tensor loss;
  for (const Tensor& t : outputs) {
    if (!t.requires_grad()) continue;
    Tensor s = t.sum();
    loss = loss.defined() ? loss + s : s;
  }
  if (!loss.defined()) return false;
  loss.backward();
  return true;
}

constexpr int64_t kSteps = 16;

// Eager vs compile (values and input gradients) vs the parsed graph. Returns the graph's ops.
std::set<std::string> check_program(uint64_t seed) {
  SCOPED_TRACE("program " + std::to_string(seed));
  auto model = std::make_shared<RandomProgram>(seed);
  std::vector<Tensor> inputs = program_inputs(seed);
  bool grad = seed % 2 == 0;
  std::vector<Tensor> eager_in = leaves(inputs, grad), compiled_in = leaves(inputs, grad);
  auto eager = [&](const auto&... a) { return nn::call(*model, a...); };
  std::vector<Tensor> want = call_with(eager, eager_in, kSteps);
  // The generator reads sizes on the host (to keep every call well typed), which a trace
  // with symbolic sizes cannot see (docs/compile.md, "host branches on sizes"): static sizes.
  auto compiled = compile(model, {.backend = "interp", .dynamic = CompileOptions::Dynamic::Off});
  std::vector<Tensor> got = call_with(compiled, compiled_in, kSteps);
  expect_same(got, want, "compiled");
  if (grad) {
    bool eager_grad = backprop(want), compiled_grad = backprop(got);
    EXPECT_EQ(compiled_grad, eager_grad);
    for (size_t i = 0; i < inputs.size() && eager_grad; ++i)
      EXPECT_TRUE(same_bits(compiled_in[i].grad(), eager_in[i].grad())) << "grad of input " << i;
  }
  NoGradGuard no_grad;
  // Another batch size: a recompile, then a cache hit on the first graph.
  std::vector<Tensor> resized = program_inputs(seed, 2);
  expect_same(call_with(compiled, resized, kSteps), call_with(eager, resized, kSteps),
              "compiled, batch size + 2");
  expect_same(call_with(compiled, inputs, kSteps), call_with(eager, inputs, kSteps),
              "compiled, first size again");
  // The compiled CPU backend (passes, generated kernels) on every fourth program (LLVM
  // takes about 50 ms per graph).
  if (seed % 4 != 0) {
    auto tracer = [&](const auto&... a) { return trace(*model, a...); };
    std::unique_ptr<ir::Graph> graph = call_with(tracer, inputs, kSteps);
    return check_graph(*graph, *model, inputs, call_with(eager, inputs, kSteps), 0);
  }
  auto native = compile(model, {.backend = "cpu", .dynamic = CompileOptions::Dynamic::Off});
  expect_close(call_with(native, inputs, kSteps), call_with(eager, inputs, kSteps), "cpu");
  expect_close(call_with(native, resized, kSteps), call_with(eager, resized, kSteps),
               "cpu, batch size + 2");
  auto tracer = [&](const auto&... a) { return trace(*model, a...); };
  std::unique_ptr<ir::Graph> graph = call_with(tracer, inputs, kSteps);
  return check_graph(*graph, *model, inputs, call_with(eager, inputs, kSteps), 0);
}

constexpr uint64_t kPrograms = 400;

TEST(CompileRandom, ProgramsMatchEagerBitwise) {
  for (uint64_t seed = 0; seed < kPrograms; ++seed) {
    check_program(seed);
    if (HasFailure()) break;  // the first failing program is the repro
  }
}

// The generator is deterministic: the same seed writes the same graph.
TEST(CompileRandom, TheSameSeedWritesTheSameGraph) {
  for (uint64_t seed : {3ull, 17ull, 101ull}) {
    RandomProgram model(seed);
    std::vector<Tensor> inputs = program_inputs(seed);
    auto tracer = [&](const auto&... a) { return trace(model, a...); };
    auto first = call_with(tracer, inputs, kSteps), second = call_with(tracer, inputs, kSteps);
    EXPECT_EQ(ir::structural_hash(*first), ir::structural_hash(*second));
    EXPECT_GE(first->nodes().size(), static_cast<size_t>(kSteps) / 2);
  }
}

// ---- the ops random programs do not write: explicit modules ----

// Eager vs compile vs the parsed graph for `model` on `args` (seeded identically before each
// run, so random ops draw the same numbers). Returns the graph's op names.
template <class M, class... Args>
std::set<std::string> check_module(std::shared_ptr<M> model, const Args&... args) {
  manual_seed(7);
  std::vector<Tensor> want = flat(nn::call(*model, args...));
  auto compiled = compile(model);
  manual_seed(7);
  std::vector<Tensor> got = flat(compiled(args...));
  expect_same(got, want, "compiled");
  manual_seed(7);
  std::unique_ptr<ir::Graph> graph = trace(*model, args...);
  return check_graph(*graph, *model, {args...}, want, 7);
}

struct Factories : nn::Module {
  Tensor forward(const Tensor& x) override {
    Tensor grid = linspace(-1, 1, x.size(1)) + cast(arange(x.size(1)), x.dtype());
    return x * grid + zeros_like(x) + full({1, x.size(1)}, 0.5) + eye(x.size(0), x.size(1)) * 2 +
           to_device(x.t(), kCPU, /*copy=*/true).t();
  }
};

struct RandomDraws : nn::Module {
  Tensor forward(const Tensor& x) override {
    return x * rand_like(x) + randn_like(x) + cast(randint(0, 5, x.sizes()), x.dtype()) +
           bernoulli(sigmoid(x)) + bernoulli(x, 0.25);
  }
};

struct Dropouts : nn::Module {
  Tensor forward(const Tensor& x) override { return F::dropout(x, 0.3) + F::dropout(x * 2, 0.6); }
};

struct Losses : nn::Module {
  Tensor target = register_buffer("target", Tensor::from_vector<int64_t>({0, 2, 1, 2}));
  Tensor weight = register_buffer("weight", Tensor::from_vector<float>({1, 2, 0.5}));
  Tensor forward(const Tensor& x) override {
    Tensor probs = sigmoid(x), soft = F::softmax(x, 1);
    return stack({F::nll_loss(F::log_softmax(x, 1), target, {.weight = weight}),
                  F::cross_entropy(x, target, {.label_smoothing = 0.1}), F::cross_entropy(x, soft),
                  F::binary_cross_entropy(probs, soft),
                  F::binary_cross_entropy_with_logits(x, soft, Tensor(), "sum", weight),
                  F::mse_loss(x, soft), F::l1_loss(x, soft, "sum")});
  }
};

struct ConvPool : nn::Module {
  Tensor w = register_parameter("w", randn({4, 2, 3, 3}));
  Tensor b = register_parameter("b", randn({4}));
  Tensor mean = register_buffer("mean", randn({4}));
  Tensor var = register_buffer("var", rand({4}) + 0.5);
  Tensor forward(const Tensor& x) override {
    Tensor y = F::conv2d(x, w, b, {1}, {1});
    y = F::batch_norm(y, mean, var, Tensor(), Tensor(), /*training=*/false);
    auto [pooled, at] = F::max_pool2d_with_indices(y, {2});
    return cat({F::avg_pool2d(y, {3}, {2}, {1}).flatten(1), pooled.flatten(1),
                cast(at, y.dtype()).flatten(1), F::adaptive_avg_pool2d(y, {3}).flatten(1),
                F::conv2d(x, w, Tensor(), {1}, "same", {1}, 1).flatten(1)},
               1);
  }
};

struct Lookups : nn::Module {
  Tensor table = register_parameter("table", randn({6, 3}));
  Tensor ids = register_buffer("ids", Tensor::from_vector<int64_t>({1, 0, 5, 2, 2, 4}, {2, 3}));
  Tensor slots = register_buffer("slots", Tensor::from_vector<int64_t>({0, 2, 0, 1, 1, 2}, {2, 3}));
  Tensor forward(const Tensor& x) override {
    Tensor e = F::embedding(ids, table, 0) * x.unsqueeze(-1);
    Tensor hot = cast(F::one_hot(ids, 6), x.dtype());
    Tensor norm = F::layer_norm(e, {3}, table.select(0, 0), table.select(0, 1));
    Tensor all =
        cat({e.flatten(), hot.flatten(), norm.flatten(), x.as_strided({2, 2}, {1, 2}).flatten(),
             F::pad(x, {1, 2}, "replicate").flatten(), F::pad(x, {1, 1}, "circular").flatten(),
             sort(x, 0).values.flatten(), topk(x, 2, -1, false).values.flatten(), cumsum(x, 1).flatten(),
             cumprod(x, 0).flatten(), masked_select(x, x > 0, 3), cast(nonzero(x > 0, 2), x.dtype()).flatten(),
             cast(bucketize(x, sort(table.select(1, 0)).values), x.dtype()).flatten(),
             scatter_reduce(x, 1, slots, x * 2, "mean").flatten(), stack(unbind(x, 1), 0).flatten()});
    return debug_print(all, "lookups");  // printed through a quiet sink (see the test)
  }
  // Keeps debug_print's lines out of the test log.
  struct QuietPrints {
    QuietPrints() {
      ops::set_debug_print_sink([](std::string_view) {});
    }
    ~QuietPrints() { ops::set_debug_print_sink({}); }
  };
};

// Each control-flow op once: the loop and branch bodies become regions.
struct ControlFlow : nn::Module {
  Tensor forward(const Tensor& x) override {
    Tensor halved = while_loop([](const TensorList& c) { return abs(c[0]).sum() > 1; },
                               [](const TensorList& c) { return TensorList{c[0] / 2}; }, {x})[0];
    Tensor branch = cond(
        x.sum() > 0, [](const TensorList& o) { return TensorList{o[0] * 2}; },
        [](const TensorList& o) { return TensorList{-o[0]}; }, {x})[0];
    Tensor counted = fori_loop(0, 3,
                               [](const Tensor& i, const TensorList& c) {
                                 return TensorList{c[0] * 0.5 + cast(i, c[0].dtype())};
                               },
                               {x})[0];
    auto [carry, ys] = scan(
        [](const TensorList& c, const TensorList& xs) {
          Tensor s = c[0] + xs[0];
          return std::pair{TensorList{s}, TensorList{s * 2}};
        },
        {zeros_like(x.select(0, 0))}, {x});
    return cat({halved.flatten(), branch.flatten(), counted.flatten(), carry[0].flatten(),
                ys[0].flatten()});
  }
};

// The backward ops exist only inside vjp rules. Tracing a forward that calls kiln::grad on
// traced tensors cannot reach them (the tracer records no autograd nodes), so each of these
// modules builds its forward graph eagerly when constructed and traces only its backward:
// forward(g) runs kiln::grad with the traced output gradient g. The leaves are parameters
// (graph inputs); the other tensors the vjps saved are captured constants.
struct TracedBackward : nn::Module {
  std::vector<Tensor> inputs;  // leaves: registered parameters p0, p1, ...
  Tensor out;
  Tensor forward(const Tensor& g) override {
    std::vector<Tensor> grads = grad({out}, inputs, {g}, GradOptions{.retain_graph = true});
    std::vector<Tensor> parts;
    for (const Tensor& t : grads) parts.push_back(t.flatten());
    return cat(parts);
  }
};

// Saved activations that require grad are captured constants, which compile warns about;
// tracing a backward expects exactly that.
struct QuietWarnings {
  QuietWarnings() {
    set_log_sink([](std::string_view, std::string_view) {});
  }
  ~QuietWarnings() { set_log_sink({}); }
};

std::shared_ptr<TracedBackward> backward_of(
    std::vector<Tensor> inputs, const std::function<Tensor(const std::vector<Tensor>&)>& fn) {
  auto m = std::make_shared<TracedBackward>();
  for (size_t i = 0; i < inputs.size(); ++i)
    m->inputs.push_back(m->register_parameter("p" + std::to_string(i), inputs[i]));
  m->out = fn(inputs);
  return m;
}

std::vector<std::shared_ptr<TracedBackward>> backward_modules() {
  Tensor target = Tensor::from_vector<int64_t>({2, 0, 1});
  Tensor ids = Tensor::from_vector<int64_t>({1, 3, 3, 0});
  return {
      backward_of({randn({1, 2, 5, 5}), randn({3, 2, 3, 3})},
                  [](const auto& v) {
                    return F::max_pool2d(F::conv2d(v[0], v[1], Tensor(), {1}, {1}), {2});
                  }),
      backward_of(
          {randn({1, 2, 5, 5})},
          [](const auto& v) { return F::adaptive_avg_pool2d(F::avg_pool2d(v[0], {2}, {1}), {2}); }),
      backward_of({randn({4, 3}), randn({3}), randn({3})},
                  [](const auto& v) {
                    Tensor y = F::layer_norm(v[0], {3}, v[1], v[2]);
                    return F::batch_norm(y, Tensor(), Tensor(), v[1], v[2], /*training=*/true);
                  }),
      backward_of(
          {randn({2, 3, 4}), randn({2, 5, 4}), randn({2, 5, 3}), randn({3, 5})},
          [](const auto& v) { return F::scaled_dot_product_attention(v[0], v[1], v[2], v[3]); }),
      backward_of({randn({5, 2})},
                  [ids](const auto& v) {
                    Tensor e = F::embedding(ids, v[0]).unsqueeze(0);
                    return F::pad(e, {1, 1}, "reflect") + F::pad(e, {1, 1});
                  }),
      backward_of({randn({3, 4})},
                  [target](const auto& v) {
                    return F::nll_loss(F::log_softmax(v[0], 1), target, {.reduction = "none"});
                  }),
  };
}

TEST(CompileRandom, FactoriesMatchEager) {
  check_module(std::make_shared<Factories>(), randn({3, 4}));
}
TEST(CompileRandom, RandomDrawsMatchEager) {
  check_module(std::make_shared<RandomDraws>(), randn({3, 4}));
}
TEST(CompileRandom, DropoutMatchesEager) {
  check_module(std::make_shared<Dropouts>(), randn({3, 4}));
}
TEST(CompileRandom, LossesMatchEager) {
  check_module(std::make_shared<Losses>(), randn({4, 3}));
}
TEST(CompileRandom, ConvAndPoolingMatchEager) {
  check_module(std::make_shared<ConvPool>(), randn({2, 2, 6, 6}));
}
TEST(CompileRandom, ControlFlowMatchesEager) {
  check_module(std::make_shared<ControlFlow>(), randn({3, 4}) * 4);
}
TEST(CompileRandom, LookupsMatchEager) {
  Lookups::QuietPrints quiet;
  check_module(std::make_shared<Lookups>(), randn({2, 3}));
}

TEST(CompileRandom, TracedBackwardsMatchEager) {
  QuietWarnings quiet;
  for (const auto& m : backward_modules()) {
    Tensor g = randn(m->out.sizes());
    check_module(m, g);
  }
}

// A forward that differentiates its own traced values cannot be traced: the tracer records
// no autograd nodes. It fails loudly (not with a wrong graph).
struct GradInForward : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(3, 2));
  Tensor forward(const Tensor& x) override { return grad({fc(x).sum()}, {fc->weight})[0]; }
};

TEST(CompileRandom, GradOfTracedValuesIsRefused) {
  GradInForward model;
  expect_error([&] { trace(model, randn({4, 3})); }, {"kiln::grad"});
}

// ---- regressions: bugs these programs found in the tracer ----

struct TransposeThenReshape : nn::Module {
  Tensor forward(const Tensor& x) override { return x.transpose(0, 1).reshape({-1}); }
};

// reshape() of a permuted tensor must copy: traced views carry the strides eager gives them,
// so the trace records the same view-or-copy decision.
TEST(CompileRandom, ReshapeOfATransposedTensor) {
  check_module(std::make_shared<TransposeThenReshape>(), randn({2, 3}));
}

struct DrawsThenDropout : nn::Module {
  Tensor forward(const Tensor& x) override { return F::dropout(x + randn({3}), 0.5); }
};

// randn draws when the graph runs; dropout's trace-time reservation is given back
// (OpDef::return_draw) and redrawn when the graph runs: both draw in eager's order.
TEST(CompileRandom, RandomFactoryBeforeDropoutOnTheFirstCall) {
  check_module(std::make_shared<DrawsThenDropout>(), randn({3}));
}

// ---- gradients stop where eager stops them ----

// Gradients of a compiled output must follow eager's autograd, detach() and NoGradGuard
// included. The tracer records neither (no stop-gradient node), so the interp run
// differentiates through them. (logsumexp detaches its max shift: its compiled gradient
// differs from eager in the last bits.)
struct StraightThrough : nn::Module {
  Tensor forward(const Tensor& x) override {
    Tensor frozen;
    {
      NoGradGuard no_grad;
      frozen = x * 2;
    }
    return x + (round(x) - x).detach() + x * frozen + logsumexp(x * 3, {0});
  }
};

TEST(CompileRandom, DetachAndNoGradStopGradientsInCompiledBackward) {
  auto model = std::make_shared<StraightThrough>();
  auto compiled = compile(model);
  Tensor x = randn({4, 3});
  Tensor a = clone(x).requires_grad_(), b = clone(x).requires_grad_();
  (*model)(a).sum().backward();
  compiled(b).sum().backward();
  EXPECT_TRUE(same_bits(b.grad(), a.grad()));
}

// ---- coverage ----

// Ops no traced graph can contain, read from the table: fusion groups are made by the fuse
// pass after tracing, never traced (tests/passes).
bool unreachable_by_tracing(const OpDef& op) { return op.lowering == LoweringClass::Fused; }

TEST(CompileRandom, EveryOpInTheTableAppearsInATracedGraph) {
  std::set<std::string> seen;
  auto add = [&](const std::set<std::string>& ops) { seen.insert(ops.begin(), ops.end()); };
  for (uint64_t seed = 0; seed < kPrograms; ++seed) {
    RandomProgram model(seed);
    auto tracer = [&](const auto&... a) { return trace(model, a...); };
    std::set<std::string> ops;
    collect_ops(*call_with(tracer, program_inputs(seed), kSteps), ops);
    add(ops);
  }
  add(check_module(std::make_shared<Factories>(), randn({3, 4})));
  add(check_module(std::make_shared<RandomDraws>(), randn({3, 4})));
  add(check_module(std::make_shared<Dropouts>(), randn({3, 4})));
  add(check_module(std::make_shared<Losses>(), randn({4, 3})));
  add(check_module(std::make_shared<ConvPool>(), randn({2, 2, 6, 6})));
  {
    Lookups::QuietPrints quiet;
    add(check_module(std::make_shared<Lookups>(), randn({2, 3})));
  }
  add(check_module(std::make_shared<ControlFlow>(), randn({3, 4}) * 4));
  QuietWarnings quiet;
  for (const auto& m : backward_modules()) add(check_module(m, randn(m->out.sizes())));

  std::vector<std::string> missing, listed_but_seen;
  for (const OpDef* op : all_ops()) {
    bool unreachable = unreachable_by_tracing(*op);
    if (!seen.count(op->name) && !unreachable) missing.push_back(op->name);
    if (seen.count(op->name) && unreachable) listed_but_seen.push_back(op->name);
  }
  EXPECT_TRUE(missing.empty()) << "ops no traced graph exercised: "
                               << ::testing::PrintToString(missing);
  EXPECT_TRUE(listed_but_seen.empty())
      << "listed as unreachable but traced: " << ::testing::PrintToString(listed_but_seen);
  for (const std::string& name : seen) EXPECT_NE(find_op(name), nullptr) << name;
}

}  // namespace
}  // namespace kiln
