// kiln::nn::summary: forward hooks on every module record one row per call during a
// shape-only pass (shape_only.h); totals walk the model's parameters and buffers.
#include "kiln/nn/summary.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <sstream>

#include "kiln/nn/uninitialized.h"
#include "shape_only.h"

namespace kiln::nn {

namespace {

const char* const kWho = "nn::summary";

// Removes the hooks it holds on destruction, also when the forward throws.
struct HookHandles {
  std::vector<HookHandle> handles;
  ~HookHandles() {
    for (HookHandle& h : handles) h.remove();
  }
};

// One shape-only forward with hooks on every module; returns the rows in call order.
std::vector<SummaryRow> record_pass(Module& model, const Shape& shape, DType dtype) {
  std::vector<SummaryRow> rows;
  std::vector<size_t> open;  // rows of the calls in progress, innermost last
  HookHandles hooks;
  // The root gets a row when it has no children, or when it owns parameters itself (e.g. a
  // position embedding): otherwise the rows would not add up to the total.
  const bool root_row = model.named_children().empty() || !model.named_parameters("", false).empty();
  for (const auto& [path, m] : model.named_modules()) {
    if (m == &model && !root_row) continue;
    hooks.handles.push_back(
        m->register_forward_pre_hook([&](Module& mod, const std::vector<Tensor>&) {
          open.push_back(rows.size());
          rows.push_back({call_stack().back().path, mod.type_name(), {}, 0, true});
        }));
    hooks.handles.push_back(m->register_forward_hook(
        [&](Module& mod, const std::vector<Tensor>&, const std::vector<Tensor>& outputs) {
          SummaryRow& row = rows[open.back()];
          open.pop_back();
          row.type = mod.type_name();  // a lazy layer has become its plain layer by now
          for (const Tensor& t : outputs)
            if (t.defined()) row.output_shapes.emplace_back(t.sizes());
          for (const auto& [name, p] : mod.named_parameters("", false)) {
            if (is_uninitialized(p)) continue;
            row.params += p.numel();
            if (!p.requires_grad()) row.trainable = false;
          }
        }));
  }
  detail::run_shape_only(model, shape, dtype, kWho);
  return rows;
}

// Marks with -1 the output dims that changed between a pass at batch 1 and one at batch 2.
// Left alone when the two passes made different calls (a forward branching on the batch).
void mark_batch_dims(std::vector<SummaryRow>& rows, const std::vector<SummaryRow>& other) {
  if (rows.size() != other.size()) return;
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i].path != other[i].path ||
        rows[i].output_shapes.size() != other[i].output_shapes.size())
      return;
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t k = 0; k < rows[i].output_shapes.size(); ++k) {
      Shape& a = rows[i].output_shapes[k];
      const Shape& b = other[i].output_shapes[k];
      if (a.size() != b.size()) continue;
      for (size_t d = 0; d < a.size(); ++d)
        if (a[d] != b[d]) a[d] = -1;
    }
}

// 203530 -> "203,530".
std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

// Keras's readable memory size: 1024-based units, two decimals ("795.04 KB", "0.00 B").
std::string memory_str(int64_t bytes) {
  static const char* const units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  double v = static_cast<double>(bytes);
  size_t u = 0;
  while (v / 1024 >= 1 && u + 1 < std::size(units)) {
    v /= 1024;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

std::string layer_str(const SummaryRow& row) {
  return row.path.empty() ? row.type : row.path + " (" + row.type + ")";
}

std::string shapes_str(const std::vector<Shape>& shapes) {
  std::string out;
  for (const Shape& s : shapes) out += (out.empty() ? "" : ", ") + shape_str(s);
  return out;
}

std::string pad_right(const std::string& s, size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

std::string pad_left(const std::string& s, size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

}  // namespace

Summary summary(Module& model, const std::vector<Shape>& input_shapes, DType dtype) {
  Summary s;
  std::vector<Shape> shapes = detail::resolve_input_shapes(input_shapes, 1, kWho);
  s.rows = record_pass(model, shapes[0], dtype);
  if (!input_shapes[0].empty() && input_shapes[0][0] == -1) {
    // A second pass at another batch size shows which output dims follow the batch.
    std::vector<Shape> other = detail::resolve_input_shapes(input_shapes, 2, kWho);
    mark_batch_dims(s.rows, record_pass(model, other[0], dtype));
  }
  s.model_type = model.type_name();
  for (const Tensor& p : model.parameters()) {
    if (is_uninitialized(p)) {
      ++s.uninitialized_params;
      continue;
    }
    int64_t n = p.numel(), bytes = static_cast<int64_t>(p.nbytes());
    s.total_params += n;
    s.param_bytes += bytes;
    if (p.requires_grad()) {
      s.trainable_params += n;
      s.trainable_param_bytes += bytes;
    } else {
      s.non_trainable_params += n;
    }
  }
  for (const Tensor& b : model.buffers()) {
    s.buffer_elements += b.numel();
    s.buffer_bytes += static_cast<int64_t>(b.nbytes());
  }
  return s;
}

std::string Summary::to_string() const {
  const std::string h1 = "Layer (type)", h2 = "Output Shape", h3 = "Param #";
  size_t w1 = h1.size(), w2 = h2.size(), w3 = h3.size();
  for (const SummaryRow& r : rows) {
    w1 = std::max(w1, layer_str(r).size());
    w2 = std::max(w2, shapes_str(r.output_shapes).size());
    w3 = std::max(w3, with_commas(r.params).size());
  }
  w1 += 4;
  w2 += 4;
  const size_t width = 1 + w1 + w2 + w3 + 1;
  std::ostringstream os;
  os << "Model: \"" << model_type << "\"\n";
  os << std::string(width, '_') << "\n";
  os << " " << pad_right(h1, w1) << pad_right(h2, w2) << pad_left(h3, w3) << "\n";
  os << std::string(width, '=') << "\n";
  for (const SummaryRow& r : rows)
    os << " " << pad_right(layer_str(r), w1) << pad_right(shapes_str(r.output_shapes), w2)
       << pad_left(with_commas(r.params), w3) << "\n";
  os << std::string(width, '=') << "\n";
  os << "Total params: " << with_commas(total_params) << " (" << memory_str(param_bytes) << ")\n";
  os << "Trainable params: " << with_commas(trainable_params) << " ("
     << memory_str(trainable_param_bytes) << ")\n";
  os << "Non-trainable params: " << with_commas(non_trainable_params) << " ("
     << memory_str(param_bytes - trainable_param_bytes) << ")\n";
  if (buffer_elements > 0)
    os << "Buffers: " << with_commas(buffer_elements) << " (" << memory_str(buffer_bytes) << ")\n";
  if (uninitialized_params > 0)
    os << "Uninitialized parameters: " << uninitialized_params
       << " (lazy layers that forward did not call; not counted above)\n";
  os << std::string(width, '_') << "\n";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Summary& summary) {
  return os << summary.to_string();
}

}  // namespace kiln::nn
