// Export's signature stage: the request checked (an eval-mode module, concrete cpu examples),
// the inputs' names, the forward to trace, which dims are dynamic, and the range each symbolic
// size serves.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kiln/export.h"
#include "kiln/ir/graph.h"

namespace kiln::detail {

// The upper bound of a symbol's range that serves any size.
inline constexpr int64_t kUnboundedSize = std::numeric_limits<int64_t>::max();

// What export traces: the examples with their dynamic dims marked, their names, and the
// forward that runs the module on them.
struct ExportRequest {
  std::shared_ptr<nn::Module> model;
  std::vector<Tensor> examples;  // as the caller passed them (eager runs on these)
  std::vector<Tensor> inputs;    // views of the examples carrying the dims to make dynamic
  std::vector<std::string> names;
  ForwardFn forward;
};

// Refuses a null or training-mode module, no examples, an empty `dir` and examples that are
// not concrete cpu tensors with at least one dim.
void check_export_arguments(const std::shared_ptr<nn::Module>& model,
                            const std::vector<Tensor>& examples, const std::string& dir);

// The request for checked arguments: names from ExportOptions::input_names ("x" for one input,
// input0.. otherwise), ExportOptions::forward or the module's forward(x), and dim 0 marked
// dynamic under ExportOptions::dynamic_batch.
ExportRequest make_export_request(std::shared_ptr<nn::Module> model,
                                  const std::vector<Tensor>& examples,
                                  const ExportOptions& options);

// Throws when a dim the request marked dynamic stayed static in the traced graph `g`.
void check_dynamic_dims_traced(const ir::Graph& g, const ExportRequest& request);

// The symbol names of a graph's user inputs, in order of first use.
std::vector<std::string> input_symbols(const ir::Graph& g);

// Whether symbol `s` is the leading dim of some user input (a batch).
bool is_batch_symbol(const ir::Graph& g, const std::string& s);

// The largest batch the artifact serves: ExportOptions::max_batch, checked against the
// traced graph and the examples, or kUnboundedSize.
int64_t batch_limit(const ir::Graph& g, const ExportOptions& options,
                    const std::vector<Tensor>& examples);

}  // namespace kiln::detail
