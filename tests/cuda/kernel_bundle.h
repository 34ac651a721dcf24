// A GPU kernel bundle: generated kernels with their test data in one safetensors file, made
// where the code generator is (tests/codegen/ptx_test.cpp writes it; tests/gpu/prepare.sh
// asks for it with KILN_GPU_KERNEL_BUNDLE) and run where the GPU is
// (tests/cuda/fused_kernels_test.cpp, in the test binary built without the code generator).
//
//   metadata "ptx":     the PTX module's text
//   metadata "chip":    what it targets ("sm_90")
//   metadata "kernels": one line per kernel:
//                       name kind buffers ndims dim... inputs rtol atol
//   metadata "chain":   the kernel of relu(x * a + b) * c - d over float32[n] (scalars a, b,
//                       c, d), which the GPU check also times against a device copy
//   tensors "<name>.in<i>" (inputs) and "<name>.out<o>" (the CPU's results, to compare with)
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/cuda/fused_kernels.h"
#include "kiln/error.h"

namespace kiln::cuda::testing {

struct BundledKernel {
  FusedKernelInfo info;
  std::vector<int64_t> dims;  // the iteration dims to launch over
  size_t inputs = 0;          // of info.buffers; the rest are outputs
  double rtol = 0, atol = 0;  // |got - want| <= atol + rtol |want|; NaN and inf exact
};

inline std::string bundle_line(const BundledKernel& k) {
  std::ostringstream os;
  os.precision(17);
  os << k.info.name << ' ' << (k.info.kind == FusedKernelKind::Rows ? "rows" : "elementwise")
     << ' ' << k.info.buffers << ' ' << k.dims.size();
  for (int64_t d : k.dims) os << ' ' << d;
  os << ' ' << k.inputs << ' ' << k.rtol << ' ' << k.atol << '\n';
  return os.str();
}

inline std::vector<BundledKernel> parse_bundle_lines(const std::string& text) {
  std::vector<BundledKernel> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    std::istringstream in(line);
    BundledKernel k;
    std::string kind;
    size_t ndims = 0;
    in >> k.info.name >> kind >> k.info.buffers >> ndims;
    k.info.kind = kind == "rows" ? FusedKernelKind::Rows : FusedKernelKind::Elementwise;
    k.info.dims = ndims;
    k.dims.resize(ndims);
    for (int64_t& d : k.dims) in >> d;
    in >> k.inputs >> k.rtol >> k.atol;
    KILN_CHECK(!in.fail() && (kind == "rows" || kind == "elementwise"),
               "[gpu bundle] expected a kernel line 'name kind buffers ndims dims... inputs rtol "
               "atol', found '", line, "'. Fix: rewrite the bundle with tests/gpu/prepare.sh.");
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace kiln::cuda::testing
