// Opening a CUDA toolkit library (NVRTC, cuBLASLt) with dlopen: an explicit path alone, else
// the dynamic loader's names (newest major version first), else the file in the lib64 folder
// of $CUDA_HOME, $CUDA_PATH and /usr/local/cuda, for toolkits outside the loader's path.
#pragma once

#include <string>
#include <vector>

namespace kiln::cuda {

// The handle of the first candidate that opens (its name or path in `opened`), or null, with
// `tried` holding dlopen's words for each attempt.
void* open_toolkit_library(const std::string& explicit_path,
                           const std::vector<std::string>& loader_names,
                           const std::string& lib64_file, std::string& opened,
                           std::vector<std::string>& tried);

// The parts joined by `separator`.
std::string joined(const std::vector<std::string>& parts, const char* separator);

}  // namespace kiln::cuda
