// An artifact loaded for running: the manifest checked against this host, every file checked
// against its digest, the graphs parsed with their weights bound and their kernels loaded.
// Calls check their inputs against the signature, pick the graph serving their sizes and
// borrow one of that graph's runners (an executor's buffers belong to one call at a time).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kiln/artifact/manifest.h"
#include "kiln/tensor.h"

namespace kiln::rt {

class LoadedModel {
 public:
  // Throws kiln::Error naming the artifact and the problem (missing or damaged files, a
  // newer format, a CPU without the features its kernels use; for a GPU artifact no GPU, or
  // one older than its kernels).
  explicit LoadedModel(const std::string& dir);
  ~LoadedModel();

  // Thread-safe. Inputs are contiguous cpu tensors, in the signature's order. Outputs are
  // contiguous and owned by the caller. A GPU artifact copies the inputs to GPU 0, runs there
  // and copies the outputs back (waiting for them).
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);
  // A GPU artifact on tensors already on GPU 0, with no copies through the host: inputs are
  // contiguous GPU tensors, outputs stay on the GPU (contiguous, owned by the caller: never
  // the memory of an input or a weight). The work is queued on `stream` (a CUstream; null:
  // the default stream) and the call returns without waiting for it. Thread-safe.
  std::vector<Tensor> run_on_device(const std::vector<Tensor>& inputs, void* stream);
  // Where the artifact runs: kCPU, or GPU 0 for a GPU artifact.
  Device device() const { return device_; }

  const artifact::Manifest& manifest() const { return manifest_; }
  const std::string& manifest_text() const { return manifest_text_; }
  const std::vector<std::string>& input_signatures() const { return input_signatures_; }
  const std::vector<std::string>& output_signatures() const { return output_signatures_; }

 private:
  struct Graph;
  // The index of the graph serving these symbol values; throws when none does.
  size_t choose_graph(const std::vector<std::pair<std::string, int64_t>>& symbols) const;
  // Checks the inputs against the signature (and that they live on `where`), then runs the
  // graph serving their sizes; its outputs stay on the artifact's device when `keep_on_device`.
  std::vector<Tensor> checked_run(const std::vector<Tensor>& inputs, Device where,
                                  bool keep_on_device);

  std::string dir_;
  artifact::Manifest manifest_;
  std::string manifest_text_;
  std::vector<std::string> input_signatures_, output_signatures_;
  std::vector<std::unique_ptr<Graph>> graphs_;
  Device device_ = kCPU;
};

}  // namespace kiln::rt
