// debug_print's entry and kernel: print, then copy the input through clone's kernel for the
// device (a fresh contiguous result, like any op's, so traces see the layout eager sees).
#include "kiln/ops/debug_print.h"

#include <iostream>
#include <mutex>

#include "kiln/ops/infer_util.h"
#include "kiln/ops/view.h"

namespace kiln::ops {

namespace {

struct Sink {
  std::mutex mutex;
  std::function<void(std::string_view)> fn;
};
Sink& sink() {
  static Sink s;
  return s;
}

void infer_debug_print(InferCall& c) {
  infer::check_arity(c, 1);
  const Tensor& x = c.inputs[0];
  c.outputs.push_back({x.dtype(), Shape(x.sizes()), x.device()});
}

void debug_print_kernel(KernelCall& c) {
  const auto& a = static_cast<const DebugPrintAttrs&>(c.attrs);
  const Tensor& x = c.inputs[0];
  std::string line = (a.label.empty() ? "" : a.label + ": ") + x.str();
  {
    Sink& s = sink();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.fn) {
      s.fn(line);
    } else {
      std::cout << line << "\n";
    }
  }
  KernelFn copy = clone.kernels[static_cast<size_t>(x.device().type)];
  KILN_CHECK(copy, "[debug_print] no copy kernel for device ", x.device(), ".");
  KernelCall call{clone, c.inputs, no_attrs(), c.outputs, c.output_types};
  copy(call);
}

}  // namespace

void set_debug_print_sink(std::function<void(std::string_view line)> fn) {
  Sink& s = sink();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.fn = std::move(fn);
}

// The kernel serves every device: it copies through clone's kernel, which dispatches.
OpDef debug_print("debug_print", {"x"}, infer_debug_print, LoweringClass::Opaque,
                  attrs_of<DebugPrintAttrs>(),
                  {.side_effects = true, .every_device_kernel = debug_print_kernel});

}  // namespace kiln::ops
