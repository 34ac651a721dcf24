// export_model: the driver of ahead-of-time export (kiln/export.h). Each stage is a file of
// its own: the signature (export_signature), trace -> passes with frozen state ->
// position-independent kernels checked against eager (export_graphs), the artifact's files
// (artifact_files), written atomically (atomic_dir).
#include <chrono>
#include <filesystem>
#include <sstream>

#include "artifact_files.h"
#include "atomic_dir.h"
#include "export_graphs.h"
#include "export_signature.h"
#include "kiln/autograd.h"
#include "kiln/export.h"
#include "kiln/init.h"

namespace kiln {

namespace fs = std::filesystem;

std::string default_export_pipeline() {
  return "canonicalize,decompose,canonicalize,dce,cse,fuse";
}

std::string ExportResult::summary() const {
  std::ostringstream os;
  os << "wrote " << dir << " (" << manifest.model << ", " << manifest.graphs.size()
     << (manifest.graphs.size() == 1 ? " graph" : " graphs") << ", "
     << (manifest.device == "cpu" ? "" : manifest.device + " ") << "target " << manifest.target.cpu
     << ", exported in " << static_cast<int64_t>(export_ms) << " ms; ";
  if (unchecked.empty())
    os << "compiled vs eager max |diff| " << max_abs_diff << ")\n";
  else
    os << unchecked << ")\n";
  for (const auto& [name, bytes] : files) os << "  " << name << "  " << bytes << " bytes\n";
  for (const artifact::TensorSpec& s : manifest.inputs)
    os << "  input  " << s.name << ": " << artifact::spec_str(s) << "\n";
  for (const artifact::TensorSpec& s : manifest.outputs)
    os << "  output " << s.name << ": " << artifact::spec_str(s) << "\n";
  for (const artifact::SymbolRange& s : manifest.symbols)
    os << "  " << s.name << " in [" << s.min << ", "
       << (s.max == detail::kUnboundedSize ? std::string("inf)") : std::to_string(s.max) + "]")
       << "\n";
  os << "  sha256 " << manifest.artifact_sha256 << "\n";
  return os.str();
}

ExportResult export_model(std::shared_ptr<nn::Module> model,
                          const std::vector<Tensor>& example_inputs, const std::string& dir,
                          const ExportOptions& options) {
  auto start = std::chrono::steady_clock::now();
  init();
  detail::check_export_arguments(model, example_inputs, dir);
  NoGradGuard no_grad;
  detail::ExportRequest request = detail::make_export_request(model, example_inputs, options);
  detail::ExportedGraphs graphs = detail::compile_export_graphs(request, options);
  artifact::Manifest manifest = detail::artifact_manifest(*model, graphs, options);

  // Write everything to a scratch directory beside `dir`, then move it into place.
  fs::path target = fs::path(dir).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();
  detail::write_dir_atomically(target, [&](const fs::path& scratch) {
    detail::write_artifact_files(scratch, graphs, options, manifest);
  });

  ExportResult result;
  result.dir = target.string();
  result.manifest = std::move(manifest);
  for (const std::string& file : result.manifest.files())
    result.files.push_back({file, fs::file_size(target / file)});
  result.files.push_back(
      {artifact::kManifestFile, fs::file_size(target / artifact::kManifestFile)});
  result.max_abs_diff = graphs.max_abs_diff;
  result.unchecked = graphs.unchecked;
  result.export_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace kiln
