// The compiled CPU backend on IR graphs: results equal the reference executor's, the
// planned executor's reused buffers never leak into results a caller holds, symbolic sizes
// resize them, random ops draw afresh every call, and graphs with control flow run node by
// node with their kernels.
#include <gtest/gtest.h>

#include "frontend/compare_bits.h"
#include "kiln/cpu/compiler/cpu_backend.h"
#include "kiln/cpu/gemm/conv2d.h"
#include "kiln/interp/interp.h"
#include "kiln/kiln.h"
#include "kiln/ops/reduction.h"
#include "test_util.h"

namespace kiln::cpu::compiler {
namespace {

std::vector<Tensor> reference(const std::string& text, const std::vector<Tensor>& inputs) {
  return interp::Executable(ir::parse_graph(text)).run(inputs);
}

void expect_close(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(close_to(got[i], want[i])) << "output " << i;
}

CompilerOptions verified() {
  init();  // the eager kernels the plan calls
  CompilerOptions options;
  options.verify_passes = true;
  return options;
}

// Two fusion groups around a matmul, an intermediate view and a result that is a view.
const char* kMlp = R"(graph mlp {
  input %0 "x": float32[4, 6]
  input %1 "w": float32[6, 5]
  input %2 "b": float32[5]
  %3: float32[4, 6] = tanh(%0) {}
  %4: float32[4, 5] = matmul(%3, %1) {}
  %5: float32[4, 5] = add(%4, %2) {}
  %6: float32[4, 5] = relu(%5) {}
  %7: float32[20] = view(%6) {shape=[20]}
  %8: float32[20] = exp(%7) {}
  %9: float32[5, 4] = view(%8) {shape=[5, 4]}
  return %9, %6
})";

TEST(CpuCompiledGraph, PlannedRunsMatchTheReferenceAndKeepEarlierResults) {
  CompiledGraph compiled(*ir::parse_graph(kMlp), verified());
  EXPECT_TRUE(compiled.stats().planned);
  EXPECT_EQ(compiled.stats().kernels, 3);
  Generator gen(3);
  std::vector<Tensor> first_in{randn({4, 6}, {}, &gen), randn({6, 5}, {}, &gen),
                               randn({5}, {}, &gen)};
  std::vector<Tensor> first = compiled.run(first_in);
  std::vector<Tensor> kept{first[0].clone(), first[1].clone()};
  expect_close(first, reference(kMlp, first_in));
  // A second call reuses the intermediate buffers; the first call's results stay intact.
  std::vector<Tensor> second_in{randn({4, 6}, {}, &gen), first_in[1], first_in[2]};
  std::vector<Tensor> second = compiled.run(second_in);
  expect_close(second, reference(kMlp, second_in));
  EXPECT_TRUE(same_bits(first[0], kept[0]));
  EXPECT_TRUE(same_bits(first[1], kept[1]));
  EXPECT_NE(first[0].raw_data(), second[0].raw_data());
}

// Intermediates share buffers by liveness; a view keeps the value it aliases alive.
TEST(CpuCompiledGraph, IntermediatesShareBuffersByLiveness) {
  const char* chain = R"(graph chain {
  input %0 "x": float32[4, 4]
  input %1 "w": float32[4, 4]
  %2: float32[4, 4] = matmul(%0, %1) {}
  %3: float32[4, 4] = matmul(%2, %1) {}
  %4: float32[4, 4] = matmul(%3, %1) {}
  %5: float32[4, 4] = matmul(%4, %1) {}
  return %5
})";
  CompiledGraph compiled(*ir::parse_graph(chain), verified());
  // %2 and %3 overlap (step 1 reads %2 and writes %3); %4 takes %2's buffer.
  EXPECT_NE(compiled.stats().memory.find(
                "2 buffers, 128 B for 3 intermediates (192 B unshared, eager peak 128 B)"),
            std::string::npos)
      << compiled.stats().memory;
  std::vector<Tensor> in{randn({4, 4}), randn({4, 4})};
  expect_close(compiled.run(in), reference(chain, in));

  // The view %3 of %2 is read at the last step, so %2's buffer stays taken until then.
  const char* viewed = R"(graph viewed {
  input %0 "x": float32[4, 4]
  input %1 "w": float32[4, 4]
  %2: float32[4, 4] = matmul(%0, %1) {}
  %3: float32[16] = view(%2) {shape=[16]}
  %4: float32[4, 4] = matmul(%0, %1) {}
  %5: float32[4, 4] = matmul(%4, %1) {}
  %6: float32[4, 4] = matmul(%5, %1) {}
  %7: float32[16] = view(%6) {shape=[16]}
  %8: float32[16] = sub(%7, %3) {}
  return %8
})";
  CompilerOptions no_cse = verified();
  no_cse.pipeline = "fuse";
  CompiledGraph with_view(*ir::parse_graph(viewed), no_cse);
  EXPECT_NE(with_view.stats().memory.find("3 buffers"), std::string::npos)
      << with_view.stats().memory;
  for (int i = 0; i < 2; ++i) {
    std::vector<Tensor> vin{randn({4, 4}), randn({4, 4})};
    expect_close(with_view.run(vin), reference(viewed, vin));
  }
}

// An op whose CPU kernel slot is empty (a backend that did not register it): compiling names
// the op and the fix. amin's slot is emptied for the test and restored after.
TEST(CpuCompiledGraph, AnOpWithoutACpuKernelIsReportedAtCompileTime) {
  init();
  KernelFn& slot = ops::amin.kernels[static_cast<size_t>(DeviceType::CPU)];
  struct Restore {
    KernelFn& slot;
    KernelFn saved;
    ~Restore() { slot = saved; }
  } restore{slot, slot};
  slot = nullptr;
  const char* text = R"(graph g {
  input %0 "x": float32[4, 3]
  %1: float32[3] = amin(%0) {dims=[0], keepdim=false}
  return %1
})";
  expect_error(
      [&] { CompiledGraph compiled(*ir::parse_graph(text), verified()); },
      {"[cpu] amin has no CPU kernel registered", "Fix: call kiln::init() before compiling"});
}

// An elementwise kernel that reads an intermediate for the last time, at the elements it
// writes, writes its result into that intermediate's buffer.
TEST(CpuCompiledGraph, ElementwiseKernelsWriteInPlaceOfWhatTheyReadLast) {
  const char* text = R"(graph g {
  input %0 "x": float32[4, 4]
  %1: float32[1, 4] = sum(%0) {dims=[0], keepdim=true}
  %2: float32[1, 4] = exp(%1) {}
  %3: float32[1, 4] = amax(%2) {dims=[0], keepdim=true}
  %4: float32[4, 4] = mul(%0, %3) {}
  return %4
})";
  CompiledGraph compiled(*ir::parse_graph(text), verified());
  // exp writes over the sum; amax's result has its own buffer (amax still reads exp's).
  EXPECT_NE(compiled.stats().memory.find(
                "2 buffers, 32 B for 3 intermediates (48 B unshared, eager peak 32 B), 1 in place"),
            std::string::npos)
      << compiled.stats().memory;
  for (int i = 0; i < 2; ++i) {
    std::vector<Tensor> in{randn({4, 4})};
    expect_close(compiled.run(in), reference(text, in));
  }
  // Not when the value is read again later, nor into a value of another shape (the mul
  // broadcasts amax's result), nor by a row kernel (it reads a row before writing it).
  const char* kept = R"(graph g {
  input %0 "x": float32[4, 4]
  input %9 "y": float32[3, 4, 4]
  %1: float32[1, 4] = sum(%0) {dims=[0], keepdim=true}
  %2: float32[1, 4] = exp(%1) {}
  %3: float32[4, 4] = mul(%0, %1) {}
  %4: float32[4, 4] = sub(%3, %2) {}
  %10: float32[4, 4] = sum(%9) {dims=[0], keepdim=false}
  %5: float32[4, 4] = relu(%10) {}
  %6: float32[4, 1] = sum(%5) {dims=[1], keepdim=true}
  %7: float32[4, 4] = div(%5, %6) {}
  %8: float32[4, 4] = add(%7, %4) {}
  %11: float32[4] = sum(%8) {dims=[0], keepdim=false}
  return %11
})";
  CompilerOptions fuse_only = verified();
  fuse_only.pipeline = "fuse";
  CompiledGraph none(*ir::parse_graph(kept), fuse_only);
  EXPECT_EQ(none.stats().memory.find("in place"), std::string::npos) << none.stats().memory;
  std::vector<Tensor> in{randn({4, 4}), randn({3, 4, 4})};
  expect_close(none.run(in), reference(kept, in));
  // Nor when another operand views the value: the kernel would read its first row, broadcast,
  // after overwriting it.
  const char* viewed = R"(graph g {
  input %0 "x": float32[3, 4, 4]
  input %1 "y": float32[4, 4]
  %2: float32[4, 4] = sum(%0) {dims=[0], keepdim=false}
  %3: float32[1, 4] = slice(%2) {dim=0, start=0, end=1, step=1}
  %4: float32[4, 4] = add(%2, %3) {}
  %5: float32[4, 4] = mul(%4, %1) {}
  %6: float32[4] = sum(%5) {dims=[0], keepdim=false}
  return %6
})";
  CompiledGraph broadcast_row(*ir::parse_graph(viewed), fuse_only);
  EXPECT_EQ(broadcast_row.stats().memory.find("in place"), std::string::npos)
      << broadcast_row.stats().memory;
  std::vector<Tensor> xw{randn({3, 4, 4}), randn({4, 4})};
  expect_close(broadcast_row.run(xw), reference(viewed, xw));
}

// A matmul followed by a fusion group over its product runs as one step, block of rows by
// block of rows; a transposed left operand and rows merged with columns are fine.
TEST(CpuCompiledGraph, GemmEpiloguesRunBlockByBlock) {
  const char* text = R"(graph epilogue {
  input %0 "x": float32[6, 64]
  input %1 "w": float32[64, 64]
  input %2 "b": float32[64]
  %3: float32[64, 6] = permute(%0) {dims=[1, 0]}
  %4: float32[64, 64] = matmul(%3, %0) {}
  %5: float32[64, 64] = sin(%4) {}
  %6: float32[6, 64] = matmul(%0, %1) {}
  %7: float32[6, 64] = add(%6, %2) {}
  %8: float32[6, 64] = relu(%7) {}
  return %5, %8
})";
  CompiledGraph compiled(*ir::parse_graph(text), verified());
  EXPECT_EQ(compiled.stats().epilogues, 2) << compiled.stats().str();
  Generator gen(8);
  for (int i = 0; i < 2; ++i) {
    std::vector<Tensor> in{randn({6, 64}, {}, &gen), randn({64, 64}, {}, &gen),
                           randn({64}, {}, &gen)};
    expect_close(compiled.run(in), reference(text, in));
  }
}

// A linear layer over a batch of sequences (x [B, T, K] @ w [K, N]): blocks of the batch
// are blocks of the product, so its bias and activation are an epilogue too.
TEST(CpuCompiledGraph, BatchedLinearLayersTakeEpilogues) {
  const char* text = R"(graph g {
  input %0 "x": float32[8, 12, 32]
  input %1 "w": float32[32, 24]
  input %2 "b": float32[24]
  %3: float32[8, 12, 24] = matmul(%0, %1) {}
  %4: float32[8, 12, 24] = add(%3, %2) {}
  %5: float32[8, 12, 24] = gelu(%4) {tanh=false}
  return %5
})";
  CompiledGraph compiled(*ir::parse_graph(text), verified());
  EXPECT_EQ(compiled.stats().epilogues, 1) << compiled.stats().str();
  Generator gen(12);
  for (int i = 0; i < 2; ++i) {
    std::vector<Tensor> in{randn({8, 12, 32}, {}, &gen), randn({32, 24}, {}, &gen),
                           randn({24}, {}, &gen)};
    expect_close(compiled.run(in), reference(text, in));
  }
  // Both operands batched: not an epilogue (the weight differs per block of the batch).
  const char* both = R"(graph g {
  input %0 "x": float32[8, 12, 32]
  input %1 "y": float32[8, 32, 24]
  %2: float32[8, 12, 24] = matmul(%0, %1) {}
  %3: float32[8, 12, 24] = relu(%2) {}
  return %3
})";
  CompiledGraph batched(*ir::parse_graph(both), verified());
  EXPECT_EQ(batched.stats().epilogues, 0) << batched.stats().str();
}

// kiln's Linear over [B, T, K] flattens to [B*T, K], multiplies and views the product back
// as [B, T, N]: the view runs first, and the group reading it is the matmul's epilogue, as
// long as its first iteration dim covers whole rows of the product.
TEST(CpuCompiledGraph, EpiloguesReadTheProductThroughAView) {
  const char* text = R"(graph g {
  input %0 "x": float32[24, 32]
  input %1 "w": float32[32, 16]
  input %2 "b": float32[16]
  %3: float32[24, 16] = matmul(%0, %1) {}
  %4: float32[4, 6, 16] = view(%3) {shape=[4, 6, 16]}
  %5: float32[4, 6, 16] = add(%4, %2) {}
  %6: float32[4, 6, 16] = relu(%5) {}
  return %6
})";
  CompiledGraph compiled(*ir::parse_graph(text), verified());
  EXPECT_EQ(compiled.stats().epilogues, 1) << compiled.stats().str();
  Generator gen(13);
  for (int i = 0; i < 2; ++i) {
    std::vector<Tensor> in{randn({24, 32}, {}, &gen), randn({32, 16}, {}, &gen),
                           randn({16}, {}, &gen)};
    expect_close(compiled.run(in), reference(text, in));
  }
  // Not when the group's rows cut across the product's ([4, 96]: each of its rows holds six
  // of the product's), nor when the view is read again later.
  const char* across = R"(graph g {
  input %0 "x": float32[24, 32]
  input %1 "w": float32[32, 16]
  input %2 "b": float32[96]
  %3: float32[24, 16] = matmul(%0, %1) {}
  %4: float32[4, 96] = view(%3) {shape=[4, 96]}
  %5: float32[4, 96] = add(%4, %2) {}
  return %5
})";
  const char* reread = R"(graph g {
  input %0 "x": float32[24, 32]
  input %1 "w": float32[32, 16]
  %3: float32[24, 16] = matmul(%0, %1) {}
  %4: float32[4, 6, 16] = view(%3) {shape=[4, 6, 16]}
  %5: float32[4, 6, 16] = relu(%4) {}
  %6: float32[6, 16] = sum(%4) {dims=[0], keepdim=false}
  return %5, %6
})";
  for (const char* other : {across, reread}) {
    CompiledGraph unpaired(*ir::parse_graph(other), verified());
    EXPECT_EQ(unpaired.stats().epilogues, 0) << unpaired.stats().str() << "\n" << other;
    std::vector<Tensor> in{randn({24, 32}, {}, &gen), randn({32, 16}, {}, &gen)};
    if (other == across) in.push_back(randn({96}, {}, &gen));
    expect_close(unpaired.run(in), reference(other, in));
  }
}

// A linear layer followed by layer_norm: decompose and fuse make the norm one row group
// over the product's rows, which runs block by block with the matmul like any epilogue.
TEST(CpuCompiledGraph, RowGroupsAreGemmEpiloguesToo) {
  const char* text = R"(graph g {
  input %0 "x": float32[96, 64]
  input %1 "w": float32[64, 128]
  input %2 "gamma": float32[128]
  input %3 "beta": float32[128]
  %4: float32[96, 128] = matmul(%0, %1) {}
  %5, %6, %7: float32[96, 128], float32[96, 1], float32[96, 1] = layer_norm(%4, %2, %3) {normalized_shape=[128], eps=1e-05}
  return %5
})";
  CompiledGraph compiled(*ir::parse_graph(text), verified());
  EXPECT_EQ(compiled.stats().epilogues, 1) << compiled.stats().str();
  EXPECT_EQ(compiled.stats().kernels, 1) << compiled.stats().str();
  EXPECT_NE(ir::print_graph(compiled.optimized_graph()).find("kind=\"row\""), std::string::npos);
  Generator gen(9);
  for (int i = 0; i < 2; ++i) {
    std::vector<Tensor> in{randn({96, 64}, {}, &gen), randn({64, 128}, {}, &gen),
                           randn({128}, {}, &gen), randn({128}, {}, &gen)};
    expect_close(compiled.run(in), reference(text, in));
  }
}

// An eval-mode batch_norm becomes a per-channel scale and shift that fuses with the ReLU
// after it: one pass over the convolution's output. (The convolution does not run it as an
// epilogue: blocks of images convolved one at a time were slower than the convolution
// kernel's own parallel run, docs/perf.md.)
TEST(CpuCompiledGraph, BatchNormAfterAConvolutionFusesWithItsRelu) {
  const char* text = R"(graph g {
  input %0 "x": float32[6, 3, 10, 10]
  input %1 "w": float32[8, 3, 3, 3]
  input %2 "gamma": float32[8]
  input %3 "beta": float32[8]
  input %4 "mean": float32[8]
  input %5 "var": float32[8]
  %6: float32[6, 8, 10, 10] = conv2d(%0, %1, _) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=1}
  %7, %8, %9: float32[6, 8, 10, 10], float32[8], float32[8] = batch_norm(%6, %2, %3, %4, %5) {training=false, momentum=0.1, eps=1e-05}
  %10: float32[6, 8, 10, 10] = relu(%7) {}
  return %10
})";
  CompiledGraph compiled(*ir::parse_graph(text), verified());
  // The per-channel scale and shift, then x * scale + shift and the ReLU.
  EXPECT_EQ(compiled.stats().kernels, 2) << compiled.stats().str();
  EXPECT_EQ(compiled.stats().epilogues, 0) << compiled.stats().str();
  Generator gen(10);
  for (int i = 0; i < 2; ++i) {
    std::vector<Tensor> in{randn({6, 3, 10, 10}, {}, &gen),
                           randn({8, 3, 3, 3}, {}, &gen),
                           randn({8}, {}, &gen),
                           randn({8}, {}, &gen),
                           randn({8}, {}, &gen),
                           randn({8}, {}, &gen).abs()};
    expect_close(compiled.run(in), reference(text, in));
  }
}

// A linear layer, an eval-mode batch_norm over its features and a ReLU: the norm's
// per-feature scale and shift (computed from parameters after the matmul in graph order)
// move before the matmul, so the matmul and the per-element group run as one epilogue step.
TEST(CpuCompiledGraph, BatchNormAfterALinearLayerIsItsEpilogue) {
  const char* text = R"(graph g {
  input %0 "x": float32[64, 32]
  input %1 "w": float32[32, 48]
  input %2 "gamma": float32[48]
  input %3 "beta": float32[48]
  input %4 "mean": float32[48]
  input %5 "var": float32[48]
  %6: float32[64, 48] = matmul(%0, %1) {}
  %7, %8, %9: float32[64, 48], float32[48], float32[48] = batch_norm(%6, %2, %3, %4, %5) {training=false, momentum=0.1, eps=1e-05}
  %10: float32[64, 48] = relu(%7) {}
  return %10
})";
  CompiledGraph compiled(*ir::parse_graph(text), verified());
  EXPECT_EQ(compiled.stats().epilogues, 1) << compiled.stats().str();
  Generator gen(11);
  for (int i = 0; i < 2; ++i) {
    std::vector<Tensor> in{randn({64, 32}, {}, &gen), randn({32, 48}, {}, &gen),
                           randn({48}, {}, &gen),     randn({48}, {}, &gen),
                           randn({48}, {}, &gen),     randn({48}, {}, &gen).abs()};
    expect_close(compiled.run(in), reference(text, in));
  }
}

// The epilogue writes its results while later blocks of its matmul still read the matmul's
// operands: no result may take an operand's buffer (exp's buffer here, free after the
// matmul when the steps run one after the other).
TEST(CpuCompiledGraph, EpilogueResultsNeverReuseTheMatmulOperands) {
  const char* text = R"(graph g {
  input %0 "x": float32[8, 8]
  %1: float32[8, 8] = exp(%0) {}
  %2: float32[8, 8] = permute(%1) {dims=[1, 0]}
  %3: float32[8, 8] = matmul(%2, %1) {}
  %4: float32[8, 8] = sin(%3) {}
  %5: float32[8, 8] = matmul(%4, %4) {}
  return %5
})";
  CompiledGraph compiled(*ir::parse_graph(text), verified());
  EXPECT_EQ(compiled.stats().epilogues, 1) << compiled.stats().str();
  // Small inputs keep sin's arguments small: its error grows with them.
  std::vector<Tensor> in{randn({8, 8}) * 0.1};
  expect_close(compiled.run(in), reference(text, in));
}

TEST(CpuCompiledGraph, SymbolicSizesResizeTheBuffers) {
  const char* text = R"(graph dyn {
  input %0 "x": float32[s0, 3]
  input %1 "w": float32[3, 3]
  %2: float32[s0, 3] = sigmoid(%0) {}
  %3: float32[s0, 3] = matmul(%2, %1) {}
  %4: float32[s0, 3] = mul(%3, %2) {}
  %5: float32[s0*3] = view(%4) {shape=[s0*3]}
  return %5
})";
  CompiledGraph compiled(*ir::parse_graph(text), verified());
  Generator gen(4);
  Tensor w = randn({3, 3}, {}, &gen);
  for (int64_t rows : {5, 2, 9, 5}) {
    std::vector<Tensor> in{randn({rows, 3}, {}, &gen), w};
    std::vector<Tensor> out = compiled.run(in);
    ASSERT_EQ(out[0].size(0), rows * 3);
    expect_close(out, reference(text, in));
  }
}

TEST(CpuCompiledGraph, RandomOpsDrawAfreshEveryCallAsEagerDoes) {
  const char* text = R"(graph drop {
  input %0 "x": float32[64]
  %1: float32[64] = exp(%0) {}
  %2, %3: float32[64], bool[64] = dropout(%1) {p=0.5, seed=0, offset=0}
  %4: float32[64] = add(%2, %0) {}
  return %4
})";
  CompiledGraph compiled(*ir::parse_graph(text), verified());
  interp::Executable ref(ir::parse_graph(text));
  Tensor x = ones({64});
  manual_seed(9);
  Tensor a = compiled.run(std::vector<Tensor>{x})[0], b = compiled.run(std::vector<Tensor>{x})[0];
  manual_seed(9);
  Tensor ra = ref.run(std::vector<Tensor>{x})[0], rb = ref.run(std::vector<Tensor>{x})[0];
  EXPECT_TRUE(close_to(a, ra));
  EXPECT_TRUE(close_to(b, rb));
  EXPECT_FALSE(same_bits(a, b)) << "the second call must draw a new mask";
}

TEST(CpuCompiledGraph, ControlFlowRunsNodeByNodeWithItsKernels) {
  const char* text = R"(graph branch {
  input %0 "p": bool[]
  input %1 "x": float32[8]
  %2: float32[8] = cond(%0, %1) {} {
    region (%3: float32[8]) {
      %4: float32[8] = exp(%3) {}
      %5: float32[8] = neg(%4) {}
      yield %5
    }
    region (%6: float32[8]) {
      %7: float32[8] = tanh(%6) {}
      yield %7
    }
  }
  return %2
})";
  CompiledGraph compiled(*ir::parse_graph(text), verified());
  EXPECT_FALSE(compiled.stats().planned);
  EXPECT_EQ(compiled.stats().kernels, 2);
  EXPECT_NE(compiled.stats().str().find("node-by-node executor"), std::string::npos);
  Tensor x = randn({8});
  for (bool p : {true, false}) {
    std::vector<Tensor> in{Tensor::scalar(p, kBool), x};
    expect_close(compiled.run(in), reference(text, in));
  }
}

TEST(CpuCompiledGraph, FoldedConstantsNeedNoArgument) {
  const char* text = R"(graph folded {
  input %0 "x": float32[3]
  const %1 "c": float32[3] = [1, 2, 3]
  %2: float32[3] = exp(%1) {}
  %3: float32[3] = mul(%0, %2) {}
  return %3
})";
  CompiledGraph compiled(*ir::parse_graph(text), verified());
  EXPECT_GT(compiled.optimized_graph().inputs().size(), 2u) << "exp(c) was folded";
  std::vector<Tensor> in{randn({3}), Tensor()};
  expect_close(compiled.run(in), reference(text, in));
  expect_error([&] { compiled.run(std::vector<Tensor>{randn({3})}); },
               {"[cpu]", "expected 2 inputs, got 1"});
}

}  // namespace
}  // namespace kiln::cpu::compiler

namespace kiln::cpu::compiler {
namespace {

// Products of 40 terms of size ~1 summed in another order (each micro-kernel has its own)
// differ by a few float32 roundings: 1e-5, the bound compiled == eager is held to.
void expect_product_close(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(close_to(got[i], want[i], 1e-5, 1e-5)) << "output " << i;
}

// A linear layer whose weight is a parameter: the plan keeps it packed for kiln's GEMM,
// the bias and activation run on each block of rows as it completes, and the packed copy
// follows every change of the weight that kiln can see.
std::string packed_linear(int64_t rows, int64_t in = 40, int64_t out = 24) {
  const std::string r = std::to_string(rows), k = std::to_string(in), n = std::to_string(out);
  return "graph g {\n  input %0 \"x\": float32[" + r + ", " + k + "]\n" +
         "  param %1 \"weight\": float32[" + n + ", " + k + "]\n" +
         "  param %2 \"bias\": float32[" + n + "]\n" +
         "  %3: float32[" + k + ", " + n + "] = permute(%1) {dims=[1, 0]}\n" +
         "  %4: float32[" + r + ", " + n + "] = matmul(%0, %3) {}\n" +
         "  %5: float32[" + r + ", " + n + "] = add(%4, %2) {}\n" +
         "  %6: float32[" + r + ", " + n + "] = relu(%5) {}\n  return %6\n}";
}

TEST(CpuCompiledGraph, WeightsArePackedOnceAndFollowInPlaceChanges) {
  for (int threads : {1, 2}) {
    ScopedThreads scope(threads);
    for (int64_t rows : {1, 7, 64, 300, 600}) {  // 600: past kMaxRows, a small weight
      SCOPED_TRACE(::testing::Message() << "rows=" << rows << " threads=" << threads);
      const std::string text = packed_linear(rows);
      CompiledGraph compiled(*ir::parse_graph(text), verified());
      EXPECT_EQ(compiled.stats().packed_weights, 1) << compiled.stats().str();
      Generator gen(20);
      Tensor w = randn({24, 40}, {}, &gen), b = randn({24}, {}, &gen);
      for (int call = 0; call < 3; ++call) {
        std::vector<Tensor> in{randn({rows, 40}, {}, &gen), w, b};
        expect_product_close(compiled.run(in), reference(text, in));
      }
      EXPECT_EQ(compiled.weight_packs(), 1) << "packed again although the weight is unchanged";
      w.mul_(0.5);  // what an optimizer step does: a new storage version
      std::vector<Tensor> in{randn({rows, 40}, {}, &gen), w, b};
      expect_product_close(compiled.run(in), reference(text, in));
      EXPECT_EQ(compiled.weight_packs(), 2);
      Tensor other = randn({24, 40}, {}, &gen);  // another tensor in the parameter's place
      in = {randn({rows, 40}, {}, &gen), other, b};
      expect_product_close(compiled.run(in), reference(text, in));
      EXPECT_EQ(compiled.weight_packs(), 3);
    }
  }
}

// conv2d by a parameter weight, an eval batch_norm and a ReLU, over `batch` images.
// `out`: the output's height and width ("11, 9").
std::string conv_bn_relu(int64_t batch, const std::string& conv_attrs, const std::string& o,
                         int64_t groups, const std::string& activation = "relu") {
  const std::string n = std::to_string(batch);
  const std::string cg = std::to_string(4 / groups);
  return "graph g {\n  input %0 \"x\": float32[" + n + ", 4, 11, 9]\n" +
         "  param %1 \"w\": float32[12, " + cg + ", 3, 3]\n" + "  param %2 \"b\": float32[12]\n" +
         "  input %3 \"gamma\": float32[12]\n  input %4 \"beta\": float32[12]\n" +
         "  input %5 \"mean\": float32[12]\n  input %6 \"var\": float32[12]\n" + "  %7: float32[" +
         n + ", 12, " + o + "] = conv2d(%0, %1, %2) {" + conv_attrs + "}\n" +
         "  %8, %9, %10: float32[" + n + ", 12, " + o + "], float32[12], float32[12] = " +
         "batch_norm(%7, %3, %4, %5, %6) {training=false, momentum=0.1, eps=1e-05}\n" +
         "  %11: float32[" + n + ", 12, " + o + "] = " + activation + "(%8) {}\n  return %11\n}";
}

// A convolution by a parameter runs through the direct convolution with its weight packed
// once (again after an in-place change), and the batch_norm + ReLU group as its epilogue,
// applied by the convolution's store; results equal the reference executor's at every batch
// and thread count. A group the store cannot apply (a tanh) runs on blocks of images.
TEST(CpuCompiledGraph, ConvolutionsByAParameterRunDirectWithTheirEpilogue) {
  if (!gemm::has_direct_conv()) GTEST_SKIP() << "no direct-convolution kernel for this CPU";
  struct Variant {
    std::string attrs, out;
    int64_t groups;
  };
  const std::vector<Variant> variants = {
      {"stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=1", "11, 9", 1},
      {"stride=[2, 1], padding=[0, 2], dilation=[1, 2], groups=2", "5, 9", 2}};
  for (int threads : {1, 2}) {
    ScopedThreads scope(threads);
    for (const Variant& v : variants)
      for (const std::string activation : {"relu", "tanh"})
        for (int64_t batch : {1, 2, 7, 33}) {
          SCOPED_TRACE(::testing::Message() << v.attrs << " " << activation << " batch=" << batch
                                            << " threads=" << threads);
          const std::string graph = conv_bn_relu(batch, v.attrs, v.out, v.groups, activation);
          CompiledGraph compiled(*ir::parse_graph(graph), verified());
          EXPECT_EQ(compiled.stats().packed_weights, 1) << compiled.stats().str();
          // x * scale + shift and a ReLU run in the convolution's store, at any batch; with a
          // tanh, the group runs on blocks of images (one image: after the convolution).
          EXPECT_EQ(compiled.stats().epilogues, activation == "relu" || batch > 1 ? 1 : 0)
              << compiled.stats().str();
          Generator gen(30);
          Tensor w = randn({12, 4 / v.groups, 3, 3}, {}, &gen), b = randn({12}, {}, &gen);
          auto args = [&] {
            return std::vector<Tensor>{randn({batch, 4, 11, 9}, {}, &gen),
                                       w,
                                       b,
                                       randn({12}, {}, &gen),
                                       randn({12}, {}, &gen),
                                       randn({12}, {}, &gen),
                                       randn({12}, {}, &gen).abs()};
          };
          for (int call = 0; call < 2; ++call) {
            std::vector<Tensor> in = args();
            expect_product_close(compiled.run(in), reference(graph, in));
          }
          EXPECT_EQ(compiled.weight_packs(), 1) << "packed again although the weight is unchanged";
          w.mul_(0.5);
          std::vector<Tensor> in = args();
          expect_product_close(compiled.run(in), reference(graph, in));
          EXPECT_EQ(compiled.weight_packs(), 2);
        }
  }
}

// The store reads a per-channel scale as a dense run of floats: a strided one (every other
// element of a longer tensor) makes the steps run one by one, with the same results.
TEST(CpuCompiledGraph, AStridedChannelScaleIsNotReadByTheStore) {
  if (!gemm::has_direct_conv()) GTEST_SKIP() << "no direct-convolution kernel for this CPU";
  const char* text = R"(graph g {
  input %0 "x": float32[3, 4, 9, 9]
  param %1 "w": float32[12, 4, 3, 3]
  input %2 "wide": float32[24, 1, 1]
  %3: float32[12, 1, 1] = slice(%2) {dim=0, start=0, end=24, step=2}
  %4: float32[3, 12, 9, 9] = conv2d(%0, %1, _) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=1}
  %5: float32[3, 12, 9, 9] = mul(%4, %3) {}
  %6: float32[3, 12, 9, 9] = relu(%5) {}
  return %6
})";
  CompiledGraph compiled(*ir::parse_graph(text), verified());
  Generator gen(60);
  std::vector<Tensor> in{randn({3, 4, 9, 9}, {}, &gen), randn({12, 4, 3, 3}, {}, &gen),
                         randn({24, 1, 1}, {}, &gen)};
  expect_product_close(compiled.run(in), reference(text, in));
}

// max_pool2d's indices are an optional output: unread, the plan gives them no buffer and
// the kernel skips them (every pooling path: the 2x2 vector rows, other tiled windows,
// overlapping windows); returned or read, they are computed as before.
TEST(CpuCompiledGraph, UnreadOptionalOutputsAreNotComputed) {
  const std::vector<std::pair<std::string, std::string>> windows = {
      {"kernel_size=[2, 2], stride=[2, 2], padding=[0, 0]", "5, 6"},
      {"kernel_size=[3, 3], stride=[3, 3], padding=[0, 0]", "3, 4"},
      {"kernel_size=[3, 3], stride=[2, 2], padding=[1, 1]", "6, 7"}};
  for (const auto& [window, pooled] : windows) {
    SCOPED_TRACE(window);
    const std::string attrs = "{" + window + ", dilation=[1, 1], ceil_mode=false}";
    const std::string values_only = "graph g {\n  input %0 \"x\": float32[3, 4, 11, 13]\n" +
                                    std::string("  %1, %2: float32[3, 4, ") + pooled +
                                    "], int64[3, 4, " + pooled + "] = max_pool2d(%0) " + attrs +
                                    "\n  %3: float32[3, 4, " + pooled +
                                    "] = relu(%1) {}\n  return %3\n}";
    const std::string both = "graph g {\n  input %0 \"x\": float32[3, 4, 11, 13]\n" +
                             std::string("  %1, %2: float32[3, 4, ") + pooled + "], int64[3, 4, " +
                             pooled + "] = max_pool2d(%0) " + attrs + "\n  return %1, %2\n}";
    Generator gen(40);
    for (const std::string& text : {values_only, both}) {
      CompiledGraph compiled(*ir::parse_graph(text), verified());
      std::vector<Tensor> in{randn({3, 4, 11, 13}, {}, &gen)};
      expect_close(compiled.run(in), reference(text, in));
    }
  }
}

// BatchNormCNN's features at `batch` images of 40 x 40: 2 x (conv, per-channel scale, ReLU,
// 2x2 max-pool), then a flatten and a tanh that reads the last pooling outside the chain.
// About 190 KiB of intermediates per image: a block holds two images.
std::string cnn_features(int64_t batch, const std::string& returns = "%16") {
  const std::string n = std::to_string(batch);
  auto pool = [](const std::string& out) {
    return " = max_pool2d(" + out + ") {kernel_size=[2, 2], stride=[2, 2], padding=[0, 0], " +
           "dilation=[1, 1], ceil_mode=false}\n";
  };
  const std::string conv = " {stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=1}\n";
  return "graph g {\n  input %0 \"x\": float32[" + n + ", 2, 40, 40]\n" +
         "  param %1 \"w1\": float32[8, 2, 3, 3]\n  param %2 \"w2\": float32[16, 8, 3, 3]\n" +
         "  input %3 \"scale1\": float32[8, 1, 1]\n  input %4 \"scale2\": float32[16, 1, 1]\n" +
         "  %5: float32[" + n + ", 8, 40, 40] = conv2d(%0, %1, _)" + conv + "  %6: float32[" + n +
         ", 8, 40, 40] = mul(%5, %3) {}\n" + "  %7: float32[" + n + ", 8, 40, 40] = relu(%6) {}\n" +
         "  %8, %9: float32[" + n + ", 8, 20, 20], int64[" + n + ", 8, 20, 20]" + pool("%7") +
         "  %10: float32[" + n + ", 16, 20, 20] = conv2d(%8, %2, _)" + conv + "  %11: float32[" +
         n + ", 16, 20, 20] = mul(%10, %4) {}\n" + "  %12: float32[" + n +
         ", 16, 20, 20] = relu(%11) {}\n" + "  %13, %14: float32[" + n + ", 16, 10, 10], int64[" +
         n + ", 16, 10, 10]" + pool("%12") + "  %15: float32[" + n +
         ", 1600] = view(%13) {shape=[" + n + ", 1600]}\n" + "  %16: float32[" + n +
         ", 1600] = tanh(%15) {}\n  return " + returns + "\n}";
}

// The convolutions, their epilogues and the poolings run as one image chain: block of images
// by block across the threads, intermediates in one block per thread. Results equal the
// reference executor's at any batch and thread count (also when the threads change between
// calls), and a strided input falls back to running the steps one by one.
TEST(CpuCompiledGraph, ConvolutionsAndPoolingsRunAsAnImageChain) {
  if (!gemm::has_direct_conv()) GTEST_SKIP() << "no direct-convolution kernel for this CPU";
  // Also with the second convolution's result returned: the chain then ends at that
  // convolution, whose output is a fresh tensor each call.
  for (const std::string returns : {"%16", "%16, %10"})
    for (int64_t batch : {2, 7, 13}) {
      SCOPED_TRACE(::testing::Message() << "batch=" << batch << " returns " << returns);
      const std::string text = cnn_features(batch, returns);
      CompiledGraph compiled(*ir::parse_graph(text), verified());
      EXPECT_EQ(compiled.stats().image_chains, 1) << compiled.stats().str();
      Generator gen(50);
      Tensor w1 = randn({8, 2, 3, 3}, {}, &gen), w2 = randn({16, 8, 3, 3}, {}, &gen);
      for (int threads : {2, 1, 2}) {
        ScopedThreads scope(threads);
        std::vector<Tensor> in{randn({batch, 2, 40, 40}, {}, &gen), w1, w2,
                               randn({8, 1, 1}, {}, &gen), randn({16, 1, 1}, {}, &gen)};
        expect_product_close(compiled.run(in), reference(text, in));
      }
      // A strided input: the direct convolution does not apply, the steps run one by one.
      Tensor wide = randn({batch, 2, 40, 80}, {}, &gen);
      std::vector<Tensor> in{wide.slice(3, 0, 80, 2), w1, w2, randn({8, 1, 1}, {}, &gen),
                             randn({16, 1, 1}, {}, &gen)};
      ASSERT_FALSE(in[0].is_contiguous());
      expect_product_close(compiled.run(in), reference(text, in));
    }
  // A single image is no chain (nothing to block).
  CompiledGraph one(*ir::parse_graph(cnn_features(1)), verified());
  EXPECT_EQ(one.stats().image_chains, 0) << one.stats().str();
}

TEST(CpuCompiledGraph, ManyRowsByALargeWeightOrAWeightComputedPerCallUseTheLibraryGemm) {
  // Past PackedMatmul::kMaxRows, by a weight larger than kSmallWeight, the library GEMM runs
  // (one call per block of rows), with the epilogue after each block.
  const std::string text = packed_linear(600, 400, 400);
  CompiledGraph compiled(*ir::parse_graph(text), verified());
  EXPECT_EQ(compiled.stats().epilogues, 1) << compiled.stats().str();
  Generator gen(21);
  std::vector<Tensor> in{randn({600, 400}, {}, &gen), randn({400, 400}, {}, &gen),
                         randn({400}, {}, &gen)};
  expect_product_close(compiled.run(in), reference(text, in));
  EXPECT_EQ(compiled.weight_packs(), 0);
  // A weight computed from a parameter on every call lives in a plan buffer that the
  // generated kernels rewrite without a version bump: never kept packed.
  const char* scaled = R"(graph g {
  input %0 "x": float32[8, 40]
  param %1 "weight": float32[40, 24]
  input %2 "scale": float32[]
  %3: float32[40, 24] = mul(%1, %2) {}
  %4: float32[8, 24] = matmul(%0, %3) {}
  return %4
})";
  CompiledGraph per_call(*ir::parse_graph(scaled), verified());
  EXPECT_EQ(per_call.stats().packed_weights, 0) << per_call.stats().str();
  for (float s : {1.0f, 3.0f}) {
    std::vector<Tensor> args{randn({8, 40}, {}, &gen), randn({40, 24}, {}, &gen),
                             Tensor::scalar(s, kFloat32)};
    expect_product_close(per_call.run(args), reference(scaled, args));
  }
}

}  // namespace
}  // namespace kiln::cpu::compiler
