// FashionMLP.
#include "kiln/models/fashion_mlp.h"

#include "config_checks.h"

namespace kiln::models {

FashionMLP::FashionMLP(const FashionMLPConfig& cfg) : config(cfg) {
  detail::check_positive("FashionMLPConfig", "d_in", cfg.d_in);
  detail::check_positive("FashionMLPConfig", "d_hidden", cfg.d_hidden);
  detail::check_positive("FashionMLPConfig", "d_out", cfg.d_out);
  detail::check_probability("FashionMLPConfig", "dropout", cfg.dropout);
  flatten = register_module("flatten", std::make_shared<nn::Flatten>());
  fc1 = register_module("fc1", std::make_shared<nn::Linear>(cfg.d_in, cfg.d_hidden));
  fc2 = register_module("fc2", std::make_shared<nn::Linear>(cfg.d_hidden, cfg.d_hidden));
  fc3 = register_module("fc3", std::make_shared<nn::Linear>(cfg.d_hidden, cfg.d_out));
  act = register_module("act", std::make_shared<nn::ReLU>());
  drop = register_module("drop", std::make_shared<nn::Dropout>(cfg.dropout));
}

Tensor FashionMLP::forward(const Tensor& input) {
  Tensor x = flatten(input);  // [N, 1, 28, 28] -> [N, 784]; [N, 784] unchanged
  x = drop(act(fc1(x)));
  x = drop(act(fc2(x)));
  return fc3(x);
}

std::shared_ptr<FashionMLP> build(const FashionMLPConfig& config) {
  return std::make_shared<FashionMLP>(config);
}

}  // namespace kiln::models
