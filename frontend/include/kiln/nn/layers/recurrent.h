// Recurrent layers: RNN, LSTM and GRU (multi-layer, bidirectional, batch_first, dropout between
// layers, padded batches with per-sequence lengths) and their one-step cells RNNCell,
// LSTMCell and GRUCell. Parameter names, shapes, gate order and initialization are PyTorch's,
// so a PyTorch state dict loads by key (weight_ih_l0, weight_hh_l0_reverse, ...).
//
//   nn::LSTM lstm(32, 64, {.num_layers = 2, .batch_first = true, .bidirectional = true});
//   Tensor out = lstm(x);                                      // the output sequence only
//   auto [out, state] = nn::call(lstm, x, h0, c0);             // and (h_n, c_n)
//   auto [out, state] = nn::call(lstm, x, Tensor(), Tensor(), lengths);  // padded batch
//
// Each layer and direction is one kiln::scan over time, so a compiled forward is one graph
// with a loop region per layer and direction (not sequence-length copies of the cell), and
// the sequence length can be a dynamic dim (kiln::mark_dynamic): no recompile per length.
// The input projection of all time steps is one matmul before the loop; each step does only
// the hidden-to-hidden matmul and the gates.
//
// Differences from PyTorch:
// - Padded batches take a lengths tensor (int64 [batch]) instead of a PackedSequence: the
//   result equals pack_padded_sequence(enforce_sorted=false) -> layer -> pad_packed_sequence
//   (zeros past each length; h_n/c_n from each sequence's own last step; the reverse direction
//   starts at each sequence's last element). No sorting is needed.
// - LSTM has no proj_size.
#pragma once

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kiln/nn/module.h"

namespace kiln::nn {

struct RNNOptions {
  int64_t num_layers = 1;
  std::string nonlinearity = "tanh";  // nn::RNN only: "tanh" or "relu"
  bool bias = true;                   // bias_ih and bias_hh of every layer
  bool batch_first = false;           // input and output [batch, seq, feature]
  double dropout = 0.0;               // on each layer's output but the last, while training
  bool bidirectional = false;
};

// What RNN, LSTM and GRU share: the parameters of every layer and direction, the input
// checks, and the loop over layers and directions.
class RNNBase : public Module {
 public:
  // The output sequence alone ([seq, batch, directions * hidden], or batch first), starting
  // from a zero state: what Sequential calls.
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;  // 4, 6, num_layers=2, bidirectional=true
  // PyTorch's: every weight and bias U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)).
  void reset_parameters();
  // For layer l and direction d (0 forward, 1 reverse): {weight_ih, weight_hh, bias_ih,
  // bias_hh}, the biases undefined without bias. PyTorch's all_weights.
  std::vector<std::vector<Tensor>> all_weights() const;

  int64_t input_size, hidden_size;
  RNNOptions options;

 protected:
  enum class Cell { Tanh, Relu, Lstm, Gru };
  RNNBase(Cell cell, int64_t input_size, int64_t hidden_size, RNNOptions options);
  // Every layer over the sequence: (output, h_n, c_n), c_n undefined except for the LSTM.
  // h0/c0 undefined: zeros. lengths undefined: every sequence is full length.
  std::tuple<Tensor, Tensor, Tensor> run(const Tensor& input, const Tensor& h0, const Tensor& c0,
                                         const Tensor& lengths);
  const char* name() const;

  Cell cell_;
  int64_t directions_;
  std::vector<std::vector<Tensor>> weights_;  // [layer * directions + direction]
};

// Elman RNN: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (or relu).
class RNN : public RNNBase {
 public:
  RNN(int64_t input_size, int64_t hidden_size, RNNOptions options = {});
  using RNNBase::forward;
  // (output, h_n). h0: [num_layers * directions, batch, hidden] ([.., hidden] for an
  // unbatched [seq, input] input); undefined means zeros. lengths: int64 [batch].
  std::pair<Tensor, Tensor> forward(const Tensor& input, const Tensor& h0,
                                    const Tensor& lengths = Tensor());
};

// Gates i, f, g, o (in that order in weight_ih/weight_hh, as PyTorch):
// c_t = f * c_{t-1} + i * g, h_t = o * tanh(c_t).
class LSTM : public RNNBase {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, RNNOptions options = {});
  using RNNBase::forward;
  // (output, (h_n, c_n)). h0 and c0 as RNN's h0 (both given or both undefined).
  std::pair<Tensor, std::pair<Tensor, Tensor>> forward(const Tensor& input, const Tensor& h0,
                                                       const Tensor& c0,
                                                       const Tensor& lengths = Tensor());
};

// Gates r, z, n: n = tanh(x W_in^T + b_in + r * (h W_hn^T + b_hn)), h_t = (1 - z) * n + z * h.
class GRU : public RNNBase {
 public:
  GRU(int64_t input_size, int64_t hidden_size, RNNOptions options = {});
  using RNNBase::forward;
  std::pair<Tensor, Tensor> forward(const Tensor& input, const Tensor& h0,
                                    const Tensor& lengths = Tensor());
};

struct RNNCellOptions {
  bool bias = true;
  std::string nonlinearity = "tanh";  // nn::RNNCell only
};

// One time step; parameters weight_ih [gates * hidden, input], weight_hh [gates * hidden,
// hidden], bias_ih and bias_hh [gates * hidden]. Inputs [batch, input] or unbatched [input].
class RNNCellBase : public Module {
 public:
  std::string extra_repr() const override;
  void reset_parameters();

  int64_t input_size, hidden_size;
  RNNCellOptions options;
  Tensor weight_ih, weight_hh, bias_ih, bias_hh;  // biases undefined without bias

 protected:
  RNNCellBase(const char* name, int64_t input_size, int64_t hidden_size, int64_t gates,
              RNNCellOptions options);
  // The checked input and state, made batched: (input [N, in], h [N, hidden]); h undefined
  // becomes zeros. unbatched tells the caller to squeeze its results.
  std::pair<Tensor, Tensor> batched(const Tensor& input, const Tensor& hx, bool& unbatched) const;

  const char* name_;
};

class RNNCell : public RNNCellBase {
 public:
  RNNCell(int64_t input_size, int64_t hidden_size, RNNCellOptions options = {});
  Tensor forward(const Tensor& input) override;  // from a zero state
  Tensor forward(const Tensor& input, const Tensor& hx);
};

class LSTMCell : public RNNCellBase {
 public:
  LSTMCell(int64_t input_size, int64_t hidden_size, RNNCellOptions options = {});
  // h alone, from a zero state.
  Tensor forward(const Tensor& input) override;
  // (h', c'). h and c both given or both undefined (zeros).
  std::pair<Tensor, Tensor> forward(const Tensor& input, const Tensor& h, const Tensor& c);
};

class GRUCell : public RNNCellBase {
 public:
  GRUCell(int64_t input_size, int64_t hidden_size, RNNCellOptions options = {});
  Tensor forward(const Tensor& input) override;
  Tensor forward(const Tensor& input, const Tensor& hx);
};

}  // namespace kiln::nn
