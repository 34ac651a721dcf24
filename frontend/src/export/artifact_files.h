// Export's artifact stage: the manifest's signature and the files of the artifact directory
// (docs/aot.md): per graph its IR text (graphN.kir) and generated kernels (kernelsN.o,
// kernelsN.so), the weights (weights.safetensors, or weights.so under embed_weights), and
// manifest.json with every file's digest.
#pragma once

#include <filesystem>

#include "export_graphs.h"
#include "kiln/artifact/manifest.h"
#include "kiln/export.h"

namespace kiln::detail {

// The manifest's signature, from the main graph as the artifact stores it (kiln_rt derives
// it from there again and refuses a manifest that says otherwise), with the model's name,
// config and metadata from `options`.
artifact::Manifest artifact_manifest(const nn::Module& model, const ExportedGraphs& graphs,
                                     const ExportOptions& options);

// Writes every file of the artifact into `dir` and completes `manifest` with the graphs'
// entries, the target CPU, the weights file and the digests; manifest.json is written last.
void write_artifact_files(const std::filesystem::path& dir, const ExportedGraphs& graphs,
                          const ExportOptions& options, artifact::Manifest& manifest);

}  // namespace kiln::detail
