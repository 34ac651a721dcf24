// nn::RNN, LSTM, GRU and the cells beyond PyTorch parity (tests/frontend/parity_test.cpp): the
// compiled forward is one graph with a scan per layer and direction, whatever the sequence
// length; a dynamic sequence length does not recompile; lengths equal running each sequence
// alone; unbatched inputs; dropout between layers; the errors; and a seq2seq model that learns
// to copy.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

double max_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(shape_str(a.sizes()), shape_str(b.sizes()));
  return (a - b).abs().max().item<double>();
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(Recurrent, CompiledForwardIsOneGraphWithAScanPerLayerAndDirection) {
  nn::LSTM lstm(3, 4, {.num_layers = 2, .bidirectional = true});
  std::string short_text = ir::print_graph(*trace(lstm, randn({3, 2, 3}), Tensor(), Tensor()));
  std::string long_text = ir::print_graph(*trace(lstm, randn({40, 2, 3}), Tensor(), Tensor()));
  EXPECT_EQ(count_of(short_text, " = scan("), 4u) << short_text;
  EXPECT_EQ(count_of(short_text, "reverse=true"), 2u) << short_text;
  // The graph does not grow with the sequence: no unrolled copies of the cell.
  EXPECT_EQ(count_of(long_text, "\n"), count_of(short_text, "\n"));
}

TEST(Recurrent, ADynamicSequenceLengthDoesNotRecompile) {
  auto gru = std::make_shared<nn::GRU>(3, 5, nn::RNNOptions{.num_layers = 2, .bidirectional = true});
  auto compiled = compile(gru, {.fullgraph = true});
  Tensor lengths = tensor({2, 1});
  for (int64_t steps : {4, 7, 3, 9}) {
    Tensor x = mark_dynamic(randn({steps, 2, 3}), 0);
    auto [y, h] = compiled(x, Tensor(), lengths);
    auto [want_y, want_h] = nn::call(*gru, x, Tensor(), lengths);
    EXPECT_LE(max_diff(y, want_y), 1e-6) << steps << " steps";
    EXPECT_LE(max_diff(h, want_h), 1e-6) << steps << " steps";
  }
  ExplainReport report = explain(compiled);
  EXPECT_EQ(report.entries.size(), 1u) << report.str();
  EXPECT_TRUE(report.recompile_reasons.empty()) << report.str();
}

// A C++ loop over time steps calling a cell: the pattern a scan replaces.
struct LoopedCell : nn::Module {
  nn::ModulePtr<nn::GRUCell> cell = register_module("cell", std::make_shared<nn::GRUCell>(3, 4));
  Tensor forward(const Tensor& x) override {
    Tensor h;
    for (int64_t t = 0; t < x.size(0); ++t) h = cell(x[t], h);
    return h;
  }
};

TEST(Recurrent, AHandLoopUnrollsAndFallsBackToStaticLengthsQuickly) {
  auto model = std::make_shared<LoopedCell>();
  auto compiled = compile(model);  // dynamic = Auto: the second length tries a symbolic dim
  std::vector<std::string> recompiles;
  set_log_channels("recompiles");
  set_log_sink([&](std::string_view, std::string_view line) { recompiles.emplace_back(line); });
  auto start = std::chrono::steady_clock::now();
  for (int64_t steps : {3, 5, 7}) {
    Tensor x = randn({steps, 2, 3});
    EXPECT_LE(max_diff(compiled(x), (*model)(x)), 1e-6) << steps << " steps";
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  set_log_sink({});
  set_log_channels("");
  // Each length is its own graph, unrolled: one copy of the cell per step.
  ExplainReport report = explain(compiled);
  EXPECT_EQ(report.entries.size(), 3u) << report.str();
  EXPECT_GT(report.entries.back().ops, report.entries.front().ops);
  // The symbolic attempt stops at its op budget instead of tracing 100000+ steps.
  std::string all;
  for (const std::string& line : recompiles) all += line + "\n";
  EXPECT_NE(all.find("a host loop over a dynamic size"), std::string::npos) << all;
  std::cout << "[hand loop] 3 lengths compiled in " << seconds << " s\n";
}

TEST(Recurrent, LengthsEqualRunningEachSequenceAlone) {
  nn::LSTM lstm(3, 4, {.num_layers = 2, .batch_first = true, .bidirectional = true});
  Tensor x = randn({3, 6, 3}), h0 = randn({4, 3, 4}), c0 = randn({4, 3, 4});
  std::vector<int64_t> lengths{6, 2, 4};
  auto [y, state] = nn::call(lstm, x, h0, c0, tensor({6, 2, 4}));
  for (int64_t n = 0; n < 3; ++n) {
    int64_t len = lengths[static_cast<size_t>(n)];
    Tensor alone = x.slice(0, n, n + 1).slice(1, 0, len);
    auto [y1, s1] = nn::call(lstm, alone, h0.slice(1, n, n + 1), c0.slice(1, n, n + 1));
    EXPECT_LE(max_diff(y.slice(0, n, n + 1).slice(1, 0, len), y1), 1e-6) << "sequence " << n;
    if (len < 6) {
      EXPECT_EQ(y.slice(0, n, n + 1).slice(1, len, 6).abs().max().item<double>(), 0.0)
          << "zeros past the end of sequence " << n;
    }
    EXPECT_LE(max_diff(state.first.slice(1, n, n + 1), s1.first), 1e-6) << "h_n of " << n;
    EXPECT_LE(max_diff(state.second.slice(1, n, n + 1), s1.second), 1e-6) << "c_n of " << n;
  }
}

TEST(Recurrent, UnbatchedInputsAreOneSequence) {
  nn::RNN rnn(3, 4, {.num_layers = 2});
  Tensor x = randn({5, 3}), h0 = randn({2, 4});
  auto [y, h] = nn::call(rnn, x, h0);
  auto [yb, hb] = nn::call(rnn, x.unsqueeze(1), h0.unsqueeze(1));
  EXPECT_EQ(shape_str(y.sizes()), "[5, 4]");
  EXPECT_EQ(shape_str(h.sizes()), "[2, 4]");
  EXPECT_LE(max_diff(y, yb.squeeze(1)), 0.0);
  EXPECT_LE(max_diff(h, hb.squeeze(1)), 0.0);
  nn::GRUCell cell(3, 4);
  EXPECT_LE(max_diff(nn::call(cell, x[0], h0[0]),
                     nn::call(cell, x[0].unsqueeze(0), h0[0].unsqueeze(0)).squeeze(0)),
            0.0);
}

TEST(Recurrent, ACellStepEqualsOneStepOfTheLayer) {
  nn::LSTM layer(3, 4);
  nn::LSTMCell cell(3, 4);
  nn::NamedTensors state;
  for (auto& [key, t] : layer.named_parameters()) state.emplace_back(key.substr(0, key.size() - 3), t);
  cell.load_state_dict(state, true);
  Tensor x = randn({1, 2, 3}), h0 = randn({1, 2, 4}), c0 = randn({1, 2, 4});
  auto [y, s] = nn::call(layer, x, h0, c0);
  auto [h, c] = nn::call(cell, x[0], h0[0], c0[0]);
  EXPECT_LE(max_diff(s.first[0], h), 1e-6);
  EXPECT_LE(max_diff(s.second[0], c), 1e-6);
}

TEST(Recurrent, DropoutActsBetweenLayersWhileTrainingOnly) {
  nn::GRU with(3, 4, {.num_layers = 2, .dropout = 0.5});
  nn::GRU without(3, 4, {.num_layers = 2});
  without.load_state_dict(with.named_parameters(), true);
  Tensor x = randn({6, 2, 3});
  EXPECT_GT(max_diff(with(x), without(x)), 1e-3) << "training: the first layer's output is dropped";
  with.eval();
  EXPECT_LE(max_diff(with(x), without(x)), 0.0) << "eval: no dropout";
  nn::GRU one_layer(3, 4, {.dropout = 0.5});
  nn::GRU plain(3, 4);
  plain.load_state_dict(one_layer.named_parameters(), true);
  EXPECT_LE(max_diff(one_layer(x), plain(x)), 0.0) << "one layer: nothing between layers";
}

TEST(Recurrent, ParameterNamesShapesAndReprArePyTorchs) {
  nn::LSTM lstm(3, 4, {.num_layers = 2, .bidirectional = true});
  std::vector<std::string> names;
  for (auto& [key, t] : lstm.named_parameters()) names.push_back(key + shape_str(t.sizes()));
  EXPECT_EQ(names.size(), 16u);
  EXPECT_EQ(names[0], "weight_ih_l0[16, 3]");
  EXPECT_EQ(names[4], "weight_ih_l0_reverse[16, 3]");
  EXPECT_EQ(names[8], "weight_ih_l1[16, 8]");
  EXPECT_EQ(names[15], "bias_hh_l1_reverse[16]");
  EXPECT_EQ(lstm.extra_repr(), "3, 4, num_layers=2, bidirectional=true");
  EXPECT_EQ(nn::RNN(2, 3, {.nonlinearity = "relu", .bias = false}).named_parameters().size(), 2u);
  // Every weight in U(-1/sqrt(hidden), 1/sqrt(hidden)).
  for (auto& [key, t] : lstm.named_parameters()) EXPECT_LE(t.abs().max().item<double>(), 0.5) << key;
}

TEST(Recurrent, BadInputsNameWhatWasExpectedAndTheFix) {
  nn::LSTM lstm(3, 4, {.num_layers = 2});
  expect_error([&] { lstm(randn({5, 2, 7})); },
                        {"[LSTM] expected an input [seq, batch, 3]", "float32[5, 2, 7]", "Fix:"});
  expect_error([&] { nn::call(lstm, randn({5, 2, 3}), randn({1, 2, 4}), randn({1, 2, 4})); },
                        {"expected h0 of shape [2, 2, 4]", "float32[1, 2, 4]", "Fix:"});
  expect_error([&] { nn::call(lstm, randn({5, 2, 3}), randn({2, 2, 4}), Tensor()); },
                        {"h0 and c0 both given or both undefined", "got only h0"});
  expect_error([&] { nn::call(lstm, randn({5, 2, 3}), Tensor(), Tensor(), randn({2})); },
                        {"expected lengths int64 [2]", "float32[2]"});
  expect_error([&] { lstm(ones({5, 2, 3}, kInt64)); },
                        {"[LSTM] expected a floating-point input", "int64"});
  expect_error([] { nn::RNN(3, 4, {.nonlinearity = "gelu"}); },
                        {"expected nonlinearity \"tanh\" or \"relu\", got \"gelu\""});
  expect_error([] { nn::GRU(3, 0); }, {"hidden_size > 0", "GRU(3, 0"});
  nn::GRUCell cell(3, 4);
  expect_error([&] { nn::call(cell, randn({2, 3}), randn({3, 4})); },
                        {"[GRUCell] expected a state float32[2, 4]", "float32[3, 4]"});
}

// Embedding -> LSTM encoder -> LSTM decoder (teacher forcing) -> Linear, on a copy task:
// the decoder must reproduce the source from the encoder's final state alone.
struct CopyModel : nn::Module {
  static constexpr int64_t kVocab = 10;  // 0 is the start token, 1..9 the symbols
  nn::ModulePtr<nn::Embedding> embed =
      register_module("embed", std::make_shared<nn::Embedding>(kVocab, 16));
  nn::ModulePtr<nn::LSTM> encoder = register_module("encoder", std::make_shared<nn::LSTM>(16, 96));
  nn::ModulePtr<nn::LSTM> decoder = register_module("decoder", std::make_shared<nn::LSTM>(16, 96));
  nn::ModulePtr<nn::Linear> out = register_module("out", std::make_shared<nn::Linear>(96, kVocab));

  using Module::forward;
  // source and decoder_input [seq, batch] int64 -> logits [seq, batch, vocab].
  Tensor forward(const Tensor& source, const Tensor& decoder_input) {
    auto [encoded, state] = nn::call(*encoder, embed(source), Tensor(), Tensor());
    auto [decoded, unused] = nn::call(*decoder, embed(decoder_input), state.first, state.second);
    return out(decoded);
  }
};

TEST(Recurrent, Seq2SeqLearnsToCopy) {
  manual_seed(7);
  auto model = std::make_shared<CopyModel>();
  optim::Adam adam(model->parameters(), {.lr = 1e-2});
  const int64_t steps = 5, batch = 64;
  auto sample = [&] { return randint(1, CopyModel::kVocab, {steps, batch}); };
  auto shifted = [&](const Tensor& target) {  // the start token, then the target minus its end
    return cat({zeros({1, batch}, kInt64), target.slice(0, 0, steps - 1)}, 0);
  };
  auto start = std::chrono::steady_clock::now();
  double accuracy = 0;
  int iterations = 0;
  for (; iterations < 1500 && accuracy < 0.995; ++iterations) {
    Tensor source = sample();
    Tensor logits = nn::call(*model, source, shifted(source));
    Tensor loss = nn::functional::cross_entropy(logits.reshape({-1, CopyModel::kVocab}),
                                                source.reshape({-1}));
    adam.zero_grad();
    loss.backward();
    adam.step();
    if (iterations % 25 == 24) {
      NoGradGuard no_grad;
      Tensor test = sample();
      Tensor predicted = nn::call(*model, test, shifted(test)).argmax(-1);
      accuracy = (predicted == test).to(kFloat32).mean().item<double>();
    }
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "[seq2seq copy] token accuracy " << accuracy << " after " << iterations
            << " steps (" << seconds << " s)\n";
  EXPECT_GE(accuracy, 0.99);
}

}  // namespace
}  // namespace kiln
