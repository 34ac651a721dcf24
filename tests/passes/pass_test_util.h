// Helpers the pass tests share: IR text through a pipeline (verified after every pass) back
// to text, and a differential check that runs a graph before and after a pipeline through
// the reference interpreter on random inputs.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/cpu/compiler/cpu_backend.h"
#include "kiln/dispatch.h"
#include "kiln/init.h"
#include "kiln/interp/interp.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/symbols.h"
#include "kiln/ops/elementwise.h"
#include "kiln/passes/pass_manager.h"

namespace kiln::passes::testing {

// Parses IR text once the eager kernels are registered: constant folding runs them, and
// compile() (their caller outside tests) has always registered them by then.
inline std::unique_ptr<ir::Graph> parse(std::string_view ir) {
  kiln::init();
  return ir::parse_graph(ir);
}

// Verified after every pass; fuse groups what the cpu backend's kernels can run.
inline PipelineOptions test_pipeline_options() {
  PipelineOptions options;
  options.verify_each = true;
  options.context.fusion = &cpu::compiler::fusion_rules();
  return options;
}

inline std::string run_passes(std::string_view pipeline, std::string_view ir) {
  std::unique_ptr<ir::Graph> g = parse(ir);
  PassManager(pipeline, test_pipeline_options()).run(*g);
  return ir::print_graph(*g);
}

// Random data of `t`'s type, with some signed zeros; symbolic dims take the values in
// `symbols` (s0 -> symbols[0]).
inline Tensor random_tensor(const ir::Type& t, std::mt19937& rng,
                            const std::vector<int64_t>& symbols) {
  Shape shape;
  for (int64_t d : t.shape) shape.push_back(ir::substitute_size(d, symbols));
  int64_t n = numel(shape);
  std::normal_distribution<double> normal(0.0, 2.0);
  std::vector<double> values(static_cast<size_t>(n));
  for (size_t i = 0; i < values.size(); ++i) {
    double x = normal(rng);
    if (t.dtype == DType::Bool) {
      x = x > 0;
    } else if (!is_floating(t.dtype)) {
      x = std::round(x * 3);
    } else if (i % 5 == 1) {
      x = i % 2 ? -0.0 : 0.0;  // signed zeros tell x + 0 from x
    }
    values[i] = x;
  }
  // Build as float64 and let the eager cast give the input's dtype. (from_vector reads an
  // empty shape as 1-D: the reshape makes a 0-d input 0-d.)
  Tensor f64 = Tensor::from_vector<double>(values, shape).reshape(shape);
  if (t.dtype == DType::Float64) return f64;
  ops::CastAttrs cast;
  cast.dtype = t.dtype;
  return dispatch1(ops::cast, {&f64, 1}, cast);
}

// Runs `g` with one tensor per input: user inputs, parameters and buffers come from
// `by_name` (created there on first sight), constants from the graph itself.
inline std::vector<Tensor> run_interp(std::shared_ptr<ir::Graph> g,
                                      std::map<std::string, Tensor>& by_name, std::mt19937& rng,
                                      const std::vector<int64_t>& symbols) {
  std::vector<Tensor> inputs;
  for (const ir::GraphInput& in : g->inputs()) {
    if (in.kind == ir::InputKind::Constant) {
      inputs.emplace_back();
      continue;
    }
    auto it = by_name.find(in.name);
    if (it == by_name.end())
      it = by_name.emplace(in.name, random_tensor(in.value->type, rng, symbols)).first;
    inputs.push_back(it->second);
  }
  interp::Executable exe(std::move(g));
  exe.set_replay_recorded_random(true);  // dropout draws what its attributes say, every run
  return exe.run(inputs);
}

// The graph computes exactly the same outputs (equal values and signs of zero) after
// `pipeline` as before it, on `trials` random inputs.
inline void expect_same_results(std::string_view pipeline, std::string_view ir, int trials = 3,
                                std::vector<int64_t> symbols = {3, 5}) {
  std::shared_ptr<ir::Graph> before = parse(ir);
  std::shared_ptr<ir::Graph> after = parse(ir);
  PassManager(pipeline, test_pipeline_options()).run(*after);
  symbols.resize(ir::kMaxSymbols, 1);
  std::mt19937 rng(1234);
  for (int trial = 0; trial < trials; ++trial) {
    std::map<std::string, Tensor> by_name;
    std::vector<Tensor> want = run_interp(before, by_name, rng, symbols);
    std::vector<Tensor> got = run_interp(after, by_name, rng, symbols);
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(want[i].dtype(), got[i].dtype()) << "output " << i;
      ASSERT_EQ(Shape(want[i].sizes()), Shape(got[i].sizes())) << "output " << i;
      std::vector<double> w = want[i].to_vector<double>(), h = got[i].to_vector<double>();
      for (size_t k = 0; k < w.size(); ++k)
        ASSERT_TRUE((w[k] == h[k] && std::signbit(w[k]) == std::signbit(h[k])) ||
                    (std::isnan(w[k]) && std::isnan(h[k])))
            << "output " << i << " element " << k << ": " << w[k] << " vs " << h[k] << "\nafter "
            << pipeline << ":\n"
            << ir::print_graph(*after);
    }
  }
}

}  // namespace kiln::passes::testing
