// HalvingMLP and HalvingMLPWhile.
#include "kiln/models/halving_mlp.h"

#include "config_checks.h"
#include "kiln/control_flow.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/reduction.h"

namespace kiln::models {

HalvingMLP::HalvingMLP(const HalvingMLPConfig& cfg) : config(cfg) {
  detail::check_positive("HalvingMLPConfig", "d_in", cfg.d_in);
  detail::check_positive("HalvingMLPConfig", "d_hidden", cfg.d_hidden);
  detail::check_positive("HalvingMLPConfig", "d_out", cfg.d_out);
  flatten = register_module("flatten", std::make_shared<nn::Flatten>());
  fc1 = register_module("fc1", std::make_shared<nn::Linear>(cfg.d_in, cfg.d_hidden));
  act = register_module("act", std::make_shared<nn::ReLU>());
  fc2 = register_module("fc2", std::make_shared<nn::Linear>(cfg.d_hidden, cfg.d_out));
}

Tensor HalvingMLP::layers(const Tensor& input) {
  Tensor x = flatten(input);  // [N, 1, 28, 28] -> [N, 784]; [N, 784] unchanged
  x = act(fc1(x));
  return fc2(x);
}

Tensor HalvingMLP::forward(const Tensor& input) {
  Tensor X = layers(input);
  // Each test converts a tensor to bool on the host: when compiled, the graph breaks here.
  while (abs(X).sum() > 1) X = X / 2;
  return X;
}

Tensor HalvingMLPWhile::forward(const Tensor& input) {
  // The condition and the body are functions of the carry, so a trace records each once,
  // as regions of one while_loop node, and the decision stays inside the graph.
  return while_loop([](const TensorList& c) { return abs(c[0]).sum() > 1; },
                    [](const TensorList& c) { return TensorList{c[0] / 2}; }, {layers(input)})[0];
}

std::shared_ptr<HalvingMLP> build(const HalvingMLPConfig& config) {
  return std::make_shared<HalvingMLP>(config);
}

std::shared_ptr<HalvingMLPWhile> build(const HalvingMLPWhileConfig& config) {
  return std::make_shared<HalvingMLPWhile>(config);
}

}  // namespace kiln::models
