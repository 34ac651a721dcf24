// nn::RNN, LSTM, GRU and their cells. One time step is `step` below, shared by the cells and
// the layers; a layer runs it inside kiln::scan, once per layer and direction.
#include "kiln/nn/layers/recurrent.h"

#include <cmath>

#include "../layer_util.h"
#include "kiln/control_flow.h"
#include "kiln/nn/functional.h"
#include "kiln/tensor_ops/cumulative.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/factory.h"
#include "kiln/tensor_ops/layout.h"
#include "kiln/tensor_ops/linalg.h"

namespace kiln::nn {
namespace {

enum class StepKind { Tanh, Relu, Lstm, Gru };

int64_t gates_of(StepKind kind) {
  switch (kind) {
    case StepKind::Lstm: return 4;
    case StepKind::Gru: return 3;
    default: return 1;
  }
}

StepKind rnn_kind(const std::string& nonlinearity, const char* layer) {
  KILN_CHECK(nonlinearity == "tanh" || nonlinearity == "relu", "[", layer,
             "] expected nonlinearity \"tanh\" or \"relu\", got \"", nonlinearity,
             "\". Fix: pass one of those two.");
  return nonlinearity == "tanh" ? StepKind::Tanh : StepKind::Relu;
}

// The bias added to the input projection: b_ih, plus b_hh where it can be folded in (every
// cell but the GRU, whose b_hn sits inside r * (...)).
Tensor input_bias(StepKind kind, const Tensor& b_ih, const Tensor& b_hh) {
  if (!b_ih.defined()) return Tensor();
  return kind == StepKind::Gru ? b_ih : b_ih + b_hh;
}

struct State {
  Tensor h, c;  // c: the LSTM's cell state only
};

// One step from gx = x W_ih^T + input_bias (gates * hidden wide) and the previous state.
State step(StepKind kind, const Tensor& gx, const State& prev, const Tensor& w_hh,
           const Tensor& b_hh) {
  switch (kind) {
    case StepKind::Tanh: return {kiln::tanh(gx + linear(prev.h, w_hh)), Tensor()};
    case StepKind::Relu: return {kiln::relu(gx + linear(prev.h, w_hh)), Tensor()};
    case StepKind::Lstm: {
      std::vector<Tensor> g = chunk(gx + linear(prev.h, w_hh), 4, -1);
      Tensor c = sigmoid(g[1]) * prev.c + sigmoid(g[0]) * kiln::tanh(g[2]);
      return {sigmoid(g[3]) * kiln::tanh(c), c};
    }
    case StepKind::Gru: {
      std::vector<Tensor> x = chunk(gx, 3, -1);
      std::vector<Tensor> h = chunk(linear(prev.h, w_hh, b_hh), 3, -1);
      Tensor r = sigmoid(x[0] + h[0]);
      Tensor z = sigmoid(x[1] + h[1]);
      Tensor n = kiln::tanh(x[2] + r * h[2]);
      return {n + z * (prev.h - n), Tensor()};
    }
  }
  return {};
}

void check_state(const Tensor& state, IntList expected, const char* what, const char* layer,
                 const Tensor& input) {
  KILN_CHECK(Shape(state.sizes()) == Shape(expected), "[", layer, "] expected ", what, " of shape ",
             shape_str(expected), " for input ", input.type_str(), ", got ", state.type_str(),
             ". Fix: pass [num_layers * directions, batch, hidden_size] ([num_layers * "
             "directions, hidden_size] for an unbatched input), or an undefined tensor for zeros.");
  KILN_CHECK(state.dtype() == input.dtype() && state.device() == input.device(), "[", layer,
             "] expected ", what, " with the input's dtype and device (", input.type_str(),
             "), got ", state.type_str(), ". Fix: convert it with .to(...).");
}

}  // namespace

// ---- RNNBase ----

RNNBase::RNNBase(Cell cell, int64_t input_size, int64_t hidden_size, RNNOptions options)
    : input_size(input_size), hidden_size(hidden_size), options(std::move(options)), cell_(cell) {
  const RNNOptions& o = this->options;
  KILN_CHECK(input_size >= 0 && hidden_size > 0 && o.num_layers > 0, "[", name(),
             "] expected input_size >= 0, hidden_size > 0 and num_layers > 0, got ", name(), "(",
             input_size, ", ", hidden_size, ", num_layers=", o.num_layers,
             "). Fix: pass positive sizes.");
  KILN_CHECK(o.dropout >= 0 && o.dropout <= 1, "[", name(), "] expected dropout in [0, 1], got ",
             o.dropout, ". Fix: pass a probability.");
  if (cell_ == Cell::Tanh || cell_ == Cell::Relu) rnn_kind(o.nonlinearity, name());
  directions_ = o.bidirectional ? 2 : 1;
  const int64_t gates = gates_of(static_cast<StepKind>(cell_)) * hidden_size;
  for (int64_t layer = 0; layer < o.num_layers; ++layer) {
    for (int64_t d = 0; d < directions_; ++d) {
      std::string suffix = "_l" + std::to_string(layer) + (d == 1 ? "_reverse" : "");
      int64_t in = layer == 0 ? input_size : hidden_size * directions_;
      std::vector<Tensor> w{register_parameter("weight_ih" + suffix, Tensor::empty({gates, in})),
                            register_parameter("weight_hh" + suffix,
                                               Tensor::empty({gates, hidden_size}))};
      if (o.bias) {
        w.push_back(register_parameter("bias_ih" + suffix, Tensor::empty({gates})));
        w.push_back(register_parameter("bias_hh" + suffix, Tensor::empty({gates})));
      } else {
        w.resize(4);
      }
      weights_.push_back(std::move(w));
    }
  }
  reset_parameters();
}

const char* RNNBase::name() const {
  switch (cell_) {
    case Cell::Lstm: return "LSTM";
    case Cell::Gru: return "GRU";
    default: return "RNN";
  }
}

void RNNBase::reset_parameters() {
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  NoGradGuard no_grad;
  for (auto& w : weights_)
    for (Tensor& t : w)
      if (t.defined()) t.detach().copy_(detail::uniform_tensor(t.sizes(), bound));
}

std::vector<std::vector<Tensor>> RNNBase::all_weights() const {
  return weights_;
}

std::string RNNBase::extra_repr() const {
  std::string s = std::to_string(input_size) + ", " + std::to_string(hidden_size);
  const RNNOptions& o = options;
  if (o.num_layers != 1) s += ", num_layers=" + std::to_string(o.num_layers);
  if (cell_ == Cell::Relu) s += ", nonlinearity=relu";
  if (!o.bias) s += ", bias=false";
  if (o.batch_first) s += ", batch_first=true";
  if (o.dropout != 0) s += ", dropout=" + detail::float_str(o.dropout);
  if (o.bidirectional) s += ", bidirectional=true";
  return s;
}

Tensor RNNBase::forward(const Tensor& input) {
  return std::get<0>(run(input, Tensor(), Tensor(), Tensor()));
}

std::tuple<Tensor, Tensor, Tensor> RNNBase::run(const Tensor& input, const Tensor& h0,
                                                const Tensor& c0, const Tensor& lengths) {
  const char* layer = name();
  const StepKind kind = static_cast<StepKind>(cell_);  // the two enums list the cells alike
  const bool lstm = cell_ == Cell::Lstm;
  const RNNOptions& o = options;
  KILN_CHECK(input.defined(), "[", layer, "] got an undefined input. Fix: pass a tensor.");
  detail::check_floating_input(input, weights_[0][0].dtype(), layer);
  KILN_CHECK((input.dim() == 2 || input.dim() == 3) && input.size(-1) == input_size, "[", layer,
             "] expected an input [", o.batch_first ? "batch, seq" : "seq, batch", ", ",
             input_size, "] (or unbatched [seq, ", input_size, "]), got ", input.type_str(),
             ". Fix: pass a sequence whose last dim is input_size = ", input_size, ".");
  KILN_CHECK(lstm || !c0.defined(), "[", layer, "] only the LSTM takes a cell state.");
  KILN_CHECK(!lstm || h0.defined() == c0.defined(), "[", layer,
             "] expected h0 and c0 both given or both undefined, got only ",
             h0.defined() ? "h0" : "c0", ". Fix: pass both, or neither for zeros.");
  const bool unbatched = input.dim() == 2;
  // Time-major, batched: [seq, batch, input].
  Tensor x = unbatched ? input.unsqueeze(1) : o.batch_first ? input.transpose(0, 1) : input;
  const int64_t batch = x.size(1);
  const int64_t states = o.num_layers * directions_;
  std::vector<int64_t> state_shape = unbatched ? std::vector<int64_t>{states, hidden_size}
                                               : std::vector<int64_t>{states, batch, hidden_size};
  Tensor h_init = h0, c_init = c0;
  if (h0.defined()) {
    check_state(h0, state_shape, lstm ? "h0" : "hx", layer, input);
    if (unbatched) h_init = h0.unsqueeze(1);
  }
  if (c0.defined()) {
    check_state(c0, state_shape, "c0", layer, input);
    if (unbatched) c_init = c0.unsqueeze(1);
  }
  // mask[t, n]: step t is inside sequence n. The step count comes from a cumsum over the
  // input (not arange(seq)), so a dynamic sequence length stays symbolic.
  Tensor mask;
  if (lengths.defined()) {
    KILN_CHECK(!unbatched, "[", layer, "] lengths needs a batched input, got ", input.type_str(),
               ". Fix: add a batch dim of size 1.");
    KILN_CHECK(lengths.dim() == 1 && lengths.size(0) == batch &&
                   (lengths.dtype() == kInt64 || lengths.dtype() == kInt32),
               "[", layer, "] expected lengths int64 [", batch, "] (one per sequence), got ",
               lengths.type_str(), ". Fix: pass each sequence's length as an integer tensor.");
    Tensor steps = cumsum(ones_like(x.select(2, 0)), 0);  // 1, 2, ... along time
    mask = (steps <= lengths.to(x.dtype()).to(x.device()).unsqueeze(0)).unsqueeze(-1);
  }
  Tensor zeros = kiln::zeros({batch, hidden_size}, TensorOptions(x.dtype()).with_device(x.device()));

  Tensor layer_input = x;
  std::vector<Tensor> h_n, c_n;
  for (int64_t l = 0; l < o.num_layers; ++l) {
    std::vector<Tensor> outputs;
    for (int64_t d = 0; d < directions_; ++d) {
      const int64_t index = l * directions_ + d;
      const std::vector<Tensor>& w = weights_[static_cast<size_t>(index)];
      const Tensor& w_hh = w[1];
      const Tensor b_hh = kind == StepKind::Gru ? w[3] : Tensor();
      // All time steps' input projections in one matmul.
      Tensor gx = linear(layer_input, w[0], input_bias(kind, w[2], w[3]));
      TensorList init{h_init.defined() ? h_init.select(0, index) : zeros};
      if (lstm) init.push_back(c_init.defined() ? c_init.select(0, index) : zeros);
      TensorList xs{gx};
      if (mask.defined()) xs.push_back(mask);
      auto body = [&](const TensorList& carry, const TensorList& slice) {
        State next = step(kind, slice[0], {carry[0], lstm ? carry[1] : Tensor()}, w_hh, b_hh);
        if (slice.size() == 1) {
          TensorList c{next.h};
          if (lstm) c.push_back(next.c);
          return std::pair<TensorList, TensorList>{c, {next.h}};
        }
        // Past a sequence's end its state stays and its output is zero.
        const Tensor& inside = slice[1];
        TensorList c{where(inside, next.h, carry[0])};
        if (lstm) c.push_back(where(inside, next.c, carry[1]));
        return std::pair<TensorList, TensorList>{c, {where(inside, next.h, 0.0)}};
      };
      auto [carry, ys] = scan(body, init, xs, {.reverse = d == 1});
      outputs.push_back(ys[0]);
      h_n.push_back(carry[0]);
      if (lstm) c_n.push_back(carry[1]);
    }
    layer_input = directions_ == 2 ? cat(outputs, -1) : outputs[0];
    if (l + 1 < o.num_layers && o.dropout > 0 && is_training())
      layer_input = functional::dropout(layer_input, o.dropout, true);
  }
  Tensor output = unbatched ? layer_input.squeeze(1)
                  : o.batch_first ? layer_input.transpose(0, 1) : layer_input;
  Tensor h = stack(h_n, 0), c = lstm ? stack(c_n, 0) : Tensor();
  if (unbatched) {
    h = h.squeeze(1);
    if (lstm) c = c.squeeze(1);
  }
  return {output, h, c};
}

RNN::RNN(int64_t input_size, int64_t hidden_size, RNNOptions options)
    : RNNBase(rnn_kind(options.nonlinearity, "RNN") == StepKind::Tanh ? Cell::Tanh : Cell::Relu,
              input_size, hidden_size, options) {}

std::pair<Tensor, Tensor> RNN::forward(const Tensor& input, const Tensor& h0,
                                       const Tensor& lengths) {
  auto [output, h, c] = run(input, h0, Tensor(), lengths);
  return {output, h};
}

LSTM::LSTM(int64_t input_size, int64_t hidden_size, RNNOptions options)
    : RNNBase(Cell::Lstm, input_size, hidden_size, options) {}

std::pair<Tensor, std::pair<Tensor, Tensor>> LSTM::forward(const Tensor& input, const Tensor& h0,
                                                           const Tensor& c0,
                                                           const Tensor& lengths) {
  auto [output, h, c] = run(input, h0, c0, lengths);
  return {output, {h, c}};
}

GRU::GRU(int64_t input_size, int64_t hidden_size, RNNOptions options)
    : RNNBase(Cell::Gru, input_size, hidden_size, options) {}

std::pair<Tensor, Tensor> GRU::forward(const Tensor& input, const Tensor& h0,
                                       const Tensor& lengths) {
  auto [output, h, c] = run(input, h0, Tensor(), lengths);
  return {output, h};
}

// ---- cells ----

RNNCellBase::RNNCellBase(const char* name, int64_t input_size, int64_t hidden_size,
                         int64_t gates, RNNCellOptions options)
    : input_size(input_size), hidden_size(hidden_size), options(std::move(options)), name_(name) {
  KILN_CHECK(input_size >= 0 && hidden_size > 0, "[", name, "] expected input_size >= 0 and "
             "hidden_size > 0, got ", name, "(", input_size, ", ", hidden_size,
             "). Fix: pass positive sizes.");
  weight_ih = register_parameter("weight_ih", Tensor::empty({gates * hidden_size, input_size}));
  weight_hh = register_parameter("weight_hh", Tensor::empty({gates * hidden_size, hidden_size}));
  if (this->options.bias) {
    bias_ih = register_parameter("bias_ih", Tensor::empty({gates * hidden_size}));
    bias_hh = register_parameter("bias_hh", Tensor::empty({gates * hidden_size}));
  }
  reset_parameters();
}

void RNNCellBase::reset_parameters() {
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  NoGradGuard no_grad;
  for (Tensor* t : {&weight_ih, &weight_hh, &bias_ih, &bias_hh})
    if (t->defined()) t->detach().copy_(detail::uniform_tensor(t->sizes(), bound));
}

std::string RNNCellBase::extra_repr() const {
  std::string s = std::to_string(input_size) + ", " + std::to_string(hidden_size);
  if (!options.bias) s += ", bias=false";
  if (options.nonlinearity != "tanh") s += ", nonlinearity=" + options.nonlinearity;
  return s;
}

std::pair<Tensor, Tensor> RNNCellBase::batched(const Tensor& input, const Tensor& hx,
                                               bool& unbatched) const {
  KILN_CHECK(input.defined(), "[", name_, "] got an undefined input. Fix: pass a tensor.");
  detail::check_floating_input(input, weight_ih.dtype(), name_);
  KILN_CHECK((input.dim() == 1 || input.dim() == 2) && input.size(-1) == input_size, "[", name_,
             "] expected an input [batch, ", input_size, "] (or unbatched [", input_size,
             "]), got ", input.type_str(), ". Fix: pass one time step whose last dim is "
             "input_size = ", input_size, " (the layers nn::RNN/LSTM/GRU take whole sequences).");
  unbatched = input.dim() == 1;
  Tensor x = unbatched ? input.unsqueeze(0) : input;
  if (!hx.defined())
    return {x, kiln::zeros({x.size(0), hidden_size},
                           TensorOptions(x.dtype()).with_device(x.device()))};
  std::vector<int64_t> want = unbatched ? std::vector<int64_t>{hidden_size}
                                        : std::vector<int64_t>{x.size(0), hidden_size};
  KILN_CHECK(Shape(hx.sizes()) == Shape(want) && hx.dtype() == input.dtype(), "[", name_,
             "] expected a state ", dtype_name(input.dtype()), shape_str(want), " for input ",
             input.type_str(), ", got ", hx.type_str(),
             ". Fix: pass [batch, hidden_size] (or [hidden_size] unbatched) with the input's dtype.");
  return {x, unbatched ? hx.unsqueeze(0) : hx};
}

RNNCell::RNNCell(int64_t input_size, int64_t hidden_size, RNNCellOptions options)
    : RNNCellBase("RNNCell", input_size, hidden_size, 1, options) {
  rnn_kind(this->options.nonlinearity, "RNNCell");
}

Tensor RNNCell::forward(const Tensor& input) {
  return forward(input, Tensor());
}

Tensor RNNCell::forward(const Tensor& input, const Tensor& hx) {
  bool unbatched = false;
  auto [x, h] = batched(input, hx, unbatched);
  StepKind kind = rnn_kind(options.nonlinearity, "RNNCell");
  Tensor gx = linear(x, weight_ih, input_bias(kind, bias_ih, bias_hh));
  Tensor next = step(kind, gx, {h, Tensor()}, weight_hh, Tensor()).h;
  return unbatched ? next.squeeze(0) : next;
}

LSTMCell::LSTMCell(int64_t input_size, int64_t hidden_size, RNNCellOptions options)
    : RNNCellBase("LSTMCell", input_size, hidden_size, 4, options) {}

Tensor LSTMCell::forward(const Tensor& input) {
  return forward(input, Tensor(), Tensor()).first;
}

std::pair<Tensor, Tensor> LSTMCell::forward(const Tensor& input, const Tensor& h,
                                            const Tensor& c) {
  KILN_CHECK(h.defined() == c.defined(), "[LSTMCell] expected h and c both given or both "
             "undefined, got only ", h.defined() ? "h" : "c", ". Fix: pass both, or neither for zeros.");
  bool unbatched = false;
  auto [x, h_prev] = batched(input, h, unbatched);
  Tensor c_prev = batched(input, c, unbatched).second;
  Tensor gx = linear(x, weight_ih, input_bias(StepKind::Lstm, bias_ih, bias_hh));
  State next = step(StepKind::Lstm, gx, {h_prev, c_prev}, weight_hh, Tensor());
  if (unbatched) return {next.h.squeeze(0), next.c.squeeze(0)};
  return {next.h, next.c};
}

GRUCell::GRUCell(int64_t input_size, int64_t hidden_size, RNNCellOptions options)
    : RNNCellBase("GRUCell", input_size, hidden_size, 3, options) {}

Tensor GRUCell::forward(const Tensor& input) {
  return forward(input, Tensor());
}

Tensor GRUCell::forward(const Tensor& input, const Tensor& hx) {
  bool unbatched = false;
  auto [x, h] = batched(input, hx, unbatched);
  Tensor gx = linear(x, weight_ih, bias_ih);
  Tensor next = step(StepKind::Gru, gx, {h, Tensor()}, weight_hh, bias_hh).h;
  return unbatched ? next.squeeze(0) : next;
}

}  // namespace kiln::nn
