// A program of another project, built against kiln (CMakeLists.txt beside it). It checks what
// such a program must see exactly as kiln's own tests do: a fullgraph graph break names this
// file and line, kiln's own errors name kiln's source relative to kiln's folder, and the cpu
// backend (registered for programs linked with kiln::kiln) runs the compiled forward.
#include <cstdlib>
#include <iostream>
#include <string>

#include "kiln/kiln.h"

namespace nn = kiln::nn;
using kiln::Tensor;

int failures = 0;

void check(bool ok, const std::string& what, const std::string& detail) {
  if (ok) return;
  ++failures;
  std::cerr << "FAILED: " << what << "\n  " << detail << "\n";
}

int loop_line = 0;

// Halves its input while it is large: a host read of a traced value (a graph break).
struct Halving : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(4, 4));
  Tensor forward(const Tensor& x) override {
    Tensor h = fc(x);
    loop_line = __LINE__ + 1;
    while (h.abs().sum().item<double>() > 4.0) h = h * 0.5;
    return h;
  }
};

int main() {
  // 1. The graph break names this file and line, not a line inside kiln.
  auto model = std::make_shared<Halving>();
  auto strict = kiln::compile(model, {.fullgraph = true});
  std::string message;
  try {
    strict(kiln::randn({2, 4}) * 100.0);
  } catch (const kiln::GraphBreakError& e) {
    message = e.what();
  }
  // The file by its full path, or relative to kiln's folder when this project lives inside
  // it (ctest builds it in a folder of kiln's build tree).
  std::string here = std::string(__FILE__) + ":" + std::to_string(loop_line);
  std::string tail = "/main.cpp:" + std::to_string(loop_line) + " (";
  check(message.find(here) != std::string::npos ||
            (message.find(tail) != std::string::npos &&
             message.find("Halving::forward") != std::string::npos),
        "the graph break names " + here, message);

  // 2. kiln's own errors name kiln's source relative to kiln's folder (as in kiln's build).
  std::string error;
  try {
    kiln::matmul(kiln::randn({2, 3}), kiln::randn({4, 5}));
  } catch (const kiln::Error& e) {
    error = e.what();
  }
  size_t open = error.rfind(" [");
  std::string where = open == std::string::npos ? "" : error.substr(open + 2);
  check(!where.empty() && where[0] != '/' && where.find("src/") != std::string::npos,
        "kiln's error names a path inside kiln, relative to its folder", error);

  // 3. The cpu backend compiles and runs the forward, as eagerly.
  struct Mlp : nn::Module {
    nn::ModulePtr<nn::Linear> fc1 = register_module("fc1", std::make_shared<nn::Linear>(6, 8));
    nn::ModulePtr<nn::Linear> fc2 = register_module("fc2", std::make_shared<nn::Linear>(8, 3));
    Tensor forward(const Tensor& x) override { return fc2(fc1(x).relu()); }
  };
  auto mlp = std::make_shared<Mlp>();
  auto compiled = kiln::compile(mlp);
  kiln::NoGradGuard no_grad;
  Tensor x = kiln::randn({5, 6});
  double difference = (compiled(x) - (*mlp)(x)).abs().max().item<double>();
  kiln::ExplainReport report = kiln::explain(compiled);
  check(report.backend == "cpu", "the default backend is cpu", report.backend);
  check(difference < 1e-5, "compiled == eager", std::to_string(difference));

  if (failures == 0) std::cout << "consumer: all checks passed\n";
  return failures == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
