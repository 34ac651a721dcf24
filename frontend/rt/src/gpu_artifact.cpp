// GPU artifacts in kiln_rt (gpu_artifact.h).
#include "gpu_artifact.h"

#include <mutex>

#include "kiln/cuda/device.h"
#include "kiln/cuda/exec/graph_runner.h"
#include "kiln/error.h"

namespace kiln::rt {

namespace {

// "sm_90" -> 90; -1 when it is not an architecture name.
int architecture_number(const std::string& chip) {
  if (chip.rfind("sm_", 0) != 0 || chip.size() < 5) return -1;
  int n = 0;
  for (size_t i = 3; i < chip.size(); ++i) {
    if (chip[i] < '0' || chip[i] > '9') return i > 4 ? n : -1;  // "sm_90a" is sm_90's
    n = n * 10 + (chip[i] - '0');
  }
  return n;
}

int gpu_architecture() {
  cuda::DeviceProperties p = cuda::get_device_properties(0);
  return p.major * 10 + p.minor;
}

}  // namespace

void check_gpu(const artifact::Manifest& m, const std::string& dir) {
  static std::once_flag installed;
  std::call_once(installed, [] { cuda::register_backend(); });
  const int needed = architecture_number(m.target.cpu);
  KILN_CHECK(m.target.arch == artifact::kGpuArtifactArch && needed > 0, "[kiln_rt] ", dir,
             ": expected a GPU target like nvptx64 sm_90, found ", m.target.arch, " ",
             m.target.cpu, ". Fix: export the model again with this kiln.");
  const std::string capability = std::to_string(needed / 10) + "." + std::to_string(needed % 10);
  KILN_CHECK(cuda::is_available(), "[kiln_rt] ", dir, " is a GPU artifact (kernels for ",
             m.target.cpu, ") and this process has no GPU: ", cuda::unavailable_reason(),
             " Fix: run it on a machine with an NVIDIA GPU of compute capability ", capability,
             " or newer, or export the model for the CPU.");
  const int have = gpu_architecture();
  KILN_CHECK(have >= needed, "[kiln_rt] ", dir, ": the kernels were compiled for ", m.target.cpu,
             ", and GPU 0 (", cuda::get_device_properties(0).name, ") is sm_", have,
             ", older: it cannot run them. Fix: run it on a GPU of compute capability ",
             capability, " or newer.");
}

std::shared_ptr<cuda::FusedKernelModule> load_gpu_kernels(const artifact::Manifest& m,
                                                          const ir::Graph& graph,
                                                          const std::string& ptx,
                                                          const std::string& cubin,
                                                          const std::string& dir) {
  const std::string target = ".target " + m.target.cpu;
  KILN_CHECK(ptx.find(target + "\n") != std::string::npos ||
                 ptx.find(target + ",") != std::string::npos,
             "[kiln_rt] ", dir, ": expected PTX for ", m.target.cpu,
             " as the manifest says, found none (its '.target' line differs). Fix: export the "
             "model again and copy the whole directory.");
  // A cubin runs on GPUs of its major generation; a newer one compiles the PTX.
  const bool same_generation = gpu_architecture() / 10 == architecture_number(m.target.cpu) / 10;
  return std::make_shared<cuda::FusedKernelModule>(same_generation ? cubin : ptx,
                                                   cuda::exec::fused_kernel_infos(graph), 0);
}

}  // namespace kiln::rt
