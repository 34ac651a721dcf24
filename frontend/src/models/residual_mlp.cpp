// ResidualMLP and its block.
#include "kiln/models/residual_mlp.h"

#include "config_checks.h"
#include "kiln/tensor_ops/elementwise.h"

namespace kiln::models {

ResidualBlock::ResidualBlock(int64_t width)
    : up(register_module("up", std::make_shared<nn::Linear>(width, width))),
      down(register_module("down", std::make_shared<nn::Linear>(width, width))) {}

Tensor ResidualBlock::forward(const Tensor& x) {
  return x + down(relu(up(x)));
}

ResidualMLP::ResidualMLP(const MLPConfig& cfg) : config(cfg) {
  detail::check_positive("MLPConfig", "d_in", cfg.d_in);
  detail::check_positive("MLPConfig", "d_hidden", cfg.d_hidden);
  KILN_CHECK(cfg.num_blocks >= 0, "[MLPConfig] expected num_blocks >= 0, found ", cfg.num_blocks,
             ". Fix: set \"num_blocks\" to 0 or more.");
  detail::check_positive("MLPConfig", "d_out", cfg.d_out);
  flatten = register_module("flatten", std::make_shared<nn::Flatten>());
  stem = register_module("stem", std::make_shared<nn::Linear>(cfg.d_in, cfg.d_hidden));
  blocks = register_module("blocks", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < cfg.num_blocks; ++i)
    blocks->push_back(std::make_shared<ResidualBlock>(cfg.d_hidden));
  head = register_module("head", std::make_shared<nn::Linear>(cfg.d_hidden, cfg.d_out));
}

Tensor ResidualMLP::forward(const Tensor& input) {
  Tensor x = relu(stem(flatten(input)));
  for (const auto& block : *blocks) x = (*block)(x);
  return head(x);
}

std::shared_ptr<ResidualMLP> build(const MLPConfig& config) {
  return std::make_shared<ResidualMLP>(config);
}

}  // namespace kiln::models
