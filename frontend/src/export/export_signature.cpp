// Export's signature stage: the arguments checked, the inputs named and marked dynamic, and
// the symbols' ranges (export_signature.h).
#include "export_signature.h"

#include <algorithm>

#include "kiln/error.h"
#include "kiln/ir/symbols.h"
#include "kiln/tensor_ops/view.h"

namespace kiln::detail {

namespace {

std::vector<std::string> input_names(const ExportOptions& options, size_t n) {
  if (!options.input_names.empty()) {
    KILN_CHECK(options.input_names.size() == n, "[export] expected ", n,
               " input_names (one per example input), found ", options.input_names.size(),
               ". Fix: name every input, or none.");
    return options.input_names;
  }
  if (n == 1) return {"x"};
  std::vector<std::string> names;
  for (size_t i = 0; i < n; ++i) names.push_back("input" + std::to_string(i));
  return names;
}

// A second handle on each example (a view), carrying the dims to make dynamic, so marking
// never changes the caller's tensors.
std::vector<Tensor> marked_examples(const std::vector<Tensor>& examples, bool dynamic_batch) {
  std::vector<Tensor> out;
  for (const Tensor& x : examples) {
    Tensor alias = narrow(x, 0, 0, x.size(0));
    alias.impl()->dynamic_dims = x.impl()->dynamic_dims | (dynamic_batch ? 1u : 0u);
    out.push_back(alias);
  }
  return out;
}

}  // namespace

void check_export_arguments(const std::shared_ptr<nn::Module>& model,
                            const std::vector<Tensor>& examples, const std::string& dir) {
  KILN_CHECK(model != nullptr, "[export] expected a module, got null.");
  for (const auto& [path, m] : model->named_modules())
    KILN_CHECK(!m->is_training(), "[export] ", model->type_name(), ": ",
               path.empty() ? std::string("the root module") : "module '" + path + "'", " (",
               m->type_name(),
               ") is in training mode; an artifact is for inference (dropout off, BatchNorm "
               "reading its running statistics). Fix: call model->eval() before export_model.");
  KILN_CHECK(!examples.empty(), "[export] expected at least one example input, found none.");
  KILN_CHECK(!dir.empty(), "[export] expected an output directory, got an empty path.");
  for (size_t i = 0; i < examples.size(); ++i) {
    const Tensor& x = examples[i];
    KILN_CHECK(x.defined() && !x.is_symbolic() && x.device().is_cpu() && x.dim() >= 1,
               "[export] example input ", i,
               " must be a concrete cpu tensor with at least one dim, found ",
               x.defined() ? x.type_str() : std::string("an undefined tensor"),
               ". Fix: pass real data of the shape the model will be called with.");
  }
}

ExportRequest make_export_request(std::shared_ptr<nn::Module> model,
                                  const std::vector<Tensor>& examples,
                                  const ExportOptions& options) {
  ExportRequest request;
  request.names = input_names(options, examples.size());
  request.forward = options.forward;
  if (!request.forward) {
    KILN_CHECK(examples.size() == 1, "[export] ", model->type_name(),
               "'s forward(x) takes one tensor, found ", examples.size(),
               " example inputs. Fix: set ExportOptions::forward to call a forward that takes "
               "several.");
    request.forward = [m = model.get()](const std::vector<Tensor>& in) -> std::vector<Tensor> {
      return {(*m)(in.at(0))};
    };
  }
  request.model = std::move(model);
  request.examples = examples;
  request.inputs = marked_examples(examples, options.dynamic_batch);
  return request;
}

void check_dynamic_dims_traced(const ir::Graph& g, const ExportRequest& request) {
  const std::vector<Tensor>& inputs = request.inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Shape& traced = g.inputs()[i].value->type.shape;
    for (int64_t d = 0; d < inputs[i].dim(); ++d) {
      if (!(inputs[i].impl()->dynamic_dims >> d & 1) || ir::is_symbolic_size(traced[d])) continue;
      KILN_FAIL("[export] dim ", d, " of input '", request.names[i],
                "' was asked to be dynamic, but the trace kept it static (size ", inputs[i].size(d),
                ")",
                inputs[i].size(d) < 2 ? ": sizes 0 and 1 are always static"
                                      : ": the forward uses that size in a way a symbolic "
                                        "size cannot express (KILN_LOG=recompiles says where)",
                ". Fix: ",
                inputs[i].size(d) < 2 ? "export with an example of size 2 or more in that dim"
                                      : "export with a static size in that dim",
                ".");
    }
  }
}

std::vector<std::string> input_symbols(const ir::Graph& g) {
  std::vector<std::string> out;
  for (const ir::GraphInput& in : g.inputs()) {
    if (in.kind != ir::InputKind::Input) continue;
    for (int64_t d : in.value->type.shape) {
      if (!ir::is_symbolic_size(d)) continue;
      std::string s = ir::format_size(d);
      if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
    }
  }
  return out;
}

bool is_batch_symbol(const ir::Graph& g, const std::string& s) {
  for (const ir::GraphInput& in : g.inputs())
    if (in.kind == ir::InputKind::Input && !in.value->type.shape.empty() &&
        ir::is_symbolic_size(in.value->type.shape[0]) &&
        ir::format_size(in.value->type.shape[0]) == s)
      return true;
  return false;
}

int64_t batch_limit(const ir::Graph& g, const ExportOptions& options,
                    const std::vector<Tensor>& examples) {
  if (options.max_batch == 0) return kUnboundedSize;
  KILN_CHECK(options.max_batch >= 2, "[export] expected max_batch >= 2 (or 0: unbounded), found ",
             options.max_batch,
             ". Fix: for batch 1 only, export a static batch (an example of batch 1, no "
             "dynamic_batch).");
  bool dynamic = false;
  for (const std::string& s : input_symbols(g)) dynamic = dynamic || is_batch_symbol(g, s);
  KILN_CHECK(dynamic, "[export] max_batch ", options.max_batch,
             " bounds a dynamic batch, but no input's dim 0 is dynamic. Fix: set "
             "ExportOptions::dynamic_batch (`kiln export --dynamic-batch`) or mark_dynamic(x, 0).");
  for (size_t i = 0; i < examples.size(); ++i)
    KILN_CHECK(examples[i].size(0) <= options.max_batch, "[export] example input ", i,
               " has batch ", examples[i].size(0), ", above max_batch ", options.max_batch,
               ". Fix: export with a smaller example or a larger max_batch.");
  return options.max_batch;
}

}  // namespace kiln::detail
