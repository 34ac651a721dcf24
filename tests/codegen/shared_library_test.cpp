// Generated kernels exported as a shared library (ahead-of-time export's machine code): a
// position-independent module linked with link_shared_library and loaded with
// cpu::exec::KernelLibrary computes exactly what the JIT runs, libm calls included; and the
// errors of linking and loading name the file and the fix.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "codegen/five_op_kernel.h"
#include "kiln/cpu/codegen/kernels.h"
#include "kiln/cpu/exec/kernel_library.h"
#include "kiln/ir/graph.h"
#include "kiln/ops/fused.h"
#include "test_util.h"

namespace kiln::cpu::codegen {
namespace {

namespace fs = std::filesystem;

// A fresh directory, removed with its contents.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    std::string pattern = (fs::temp_directory_path() / "kiln-so-test.XXXXXX").string();
    EXPECT_NE(::mkdtemp(pattern.data()), nullptr);
    path = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// The one fused node of `text`, as a spec named `name`, compiled position-independent.
struct Compiled {
  std::shared_ptr<ir::Graph> graph;
  exec::FusedKernelSpec spec;
  std::unique_ptr<KernelModule> module;
};
Compiled compile_text(const char* text, const std::string& name) {
  Compiled c;
  c.graph = ir::parse_graph(text);
  for (const auto& node : c.graph->nodes())
    if (node->op == &ops::fused) c.spec = exec::fused_kernel_spec(*node, name);
  CodegenOptions options;
  options.position_independent = true;  // no cache: the test compiles what it links
  c.module = compile_kernels({&c.spec, 1}, options);
  return c;
}

// Runs a one-dim kernel over `x` with the given scalar operands.
std::vector<float> run(exec::FusedKernelFn fn, const std::vector<float>& x,
                       std::vector<float> scalars) {
  std::vector<float> out(x.size());
  std::vector<void*> buffers{const_cast<float*>(x.data())};
  for (float& s : scalars) buffers.push_back(&s);
  buffers.push_back(out.data());
  int64_t n = static_cast<int64_t>(x.size());
  fn(buffers.data(), &n, 0, n);
  return out;
}

std::vector<float> ramp(size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = 0.37f * static_cast<float>(i % 41) - 7.0f;
  return x;
}

TEST(CodegenSharedLibrary, ExportedKernelsComputeWhatTheJitComputes) {
  ScratchDir dir;
  Compiled five = compile_text(testing::kFiveOpKernel, "fused_0");
  const std::string path = dir.path + "/libkernels.so";
  link_shared_library(five.module->object(), path);
  cpu::exec::KernelLibrary library(path);
  std::vector<float> x = ramp(1003);  // not a multiple of any vector width
  EXPECT_EQ(run(library.lookup("fused_0"), x, {1.5f, -2.0f, 0.5f, 3.0f}),
            run(five.module->lookup("fused_0"), x, {1.5f, -2.0f, 0.5f, 3.0f}));
  // Only the library is left: the object and the linker log were temporaries.
  size_t files = 0;
  for (const auto& f : fs::directory_iterator(dir.path)) files += f.is_regular_file();
  EXPECT_EQ(files, 1u);
}

TEST(CodegenSharedLibrary, KernelsThatCallLibmLinkAgainstIt) {
  ScratchDir dir;
  Compiled sines = compile_text(R"(graph g {
  input %0 "x": float32[s0]
  %1: float32[s0] = fused(%0) {kind="elementwise"} {
    region (%2: float32[s0]) {
      %3: float32[s0] = sin(%2) {}
      %4: float32[s0] = cos(%3) {}
      yield %4
    }
  }
  return %1
})",
                                "waves");
  const std::string path = dir.path + "/libwaves.so";
  link_shared_library(sines.module->object(), path);
  cpu::exec::KernelLibrary library(path);
  std::vector<float> x = ramp(257);
  std::vector<float> got = run(library.lookup("waves"), x, {});
  EXPECT_EQ(got, run(sines.module->lookup("waves"), x, {}));
  EXPECT_FLOAT_EQ(got[5], std::cos(std::sin(x[5])));
}

TEST(CodegenSharedLibrary, LoadingErrorsNameTheFileAndTheFix) {
  ScratchDir dir;
  expect_error([&] { cpu::exec::KernelLibrary missing(dir.path + "/nothing.so"); },
               {"[kernels] expected a shared library of kernels at", "nothing.so",
                "cannot be opened", "Fix: point at the kernels file an export wrote"});
  const std::string junk = dir.path + "/junk.so";
  std::ofstream(junk) << "not a library";
  expect_error([&] { cpu::exec::KernelLibrary bad(junk); },
               {"junk.so is not a complete ELF shared library", "shorter than an ELF header"});

  Compiled five = compile_text(testing::kFiveOpKernel, "fused_0");
  const std::string path = dir.path + "/libkernels.so";
  link_shared_library(five.module->object(), path);
  // A truncated copy is refused before the loader maps its missing pages (SIGBUS).
  const std::string truncated = dir.path + "/truncated.so";
  std::filesystem::copy_file(path, truncated);
  std::filesystem::resize_file(truncated, std::filesystem::file_size(path) / 2);
  expect_error([&] { cpu::exec::KernelLibrary bad(truncated); },
               {"truncated.so is not a complete ELF shared library", "truncated or damaged"});
  std::filesystem::resize_file(truncated, 200);
  expect_error([&] { cpu::exec::KernelLibrary bad(truncated); }, {"lie outside the file"});

  cpu::exec::KernelLibrary library(path);
  expect_error([&] { library.lookup("fused_7"); },
               {"[kernels] expected", "libkernels.so to define kernel 'fused_7'",
                "Fix: the library and the graph that names its kernels must come from the same "
                "export"});
}

TEST(CodegenSharedLibrary, LinkingErrorsNameTheCompilerAndItsOutput) {
  ScratchDir dir;
  expect_error([&] { link_shared_library("", dir.path + "/a.so"); },
               {"[export] expected a module's object file", "found none"});
  expect_error([&] { link_shared_library("not an object file", dir.path + "/b.so"); },
               {"[export] expected 'cc -shared' to link the kernels into", "b.so", "failed (exit",
                "Fix: install a C compiler"});
  setenv("CC", "/nonexistent/kiln-cc", 1);
  std::string object = compile_text(testing::kFiveOpKernel, "fused_0").module->object();
  expect_error([&] { link_shared_library(object, dir.path + "/c.so"); },
               {"'/nonexistent/kiln-cc -shared'", "did not run", "point CC at one"});
  unsetenv("CC");
  EXPECT_FALSE(fs::exists(dir.path + "/c.so"));
}

}  // namespace
}  // namespace kiln::cpu::codegen
