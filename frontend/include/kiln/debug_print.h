// kiln::debug_print: print a tensor on every call, eager or compiled. A std::cout in forward
// runs only when the forward is traced (and printing a traced tensor is a graph break);
// debug_print is an op, recorded into the graph, so it prints each time the graph runs.
#pragma once

#include <string>

#include "kiln/tensor.h"

namespace kiln {

// Prints "label: tensor(...)" and returns x (a copy; gradients flow through unchanged).
// The line goes to standard output, or to ops::set_debug_print_sink's function.
Tensor debug_print(const Tensor& x, const std::string& label = "");

}  // namespace kiln
