// MLIR's diagnostics collected as text, for kiln::Errors. The handler runs inside MLIR, which
// is built without exceptions, so it only appends; the code generators throw at the kiln
// boundary with what it collected.
#pragma once

#include <memory>
#include <string>
#include <utility>

namespace mlir {
class MLIRContext;
class ScopedDiagnosticHandler;
}  // namespace mlir

namespace kiln::codegen_common {

class DiagnosticCollector {
 public:
  explicit DiagnosticCollector(mlir::MLIRContext* ctx);
  ~DiagnosticCollector();
  DiagnosticCollector(const DiagnosticCollector&) = delete;
  DiagnosticCollector& operator=(const DiagnosticCollector&) = delete;
  std::string take() { return std::exchange(text_, std::string()); }

 private:
  std::string text_;
  std::unique_ptr<mlir::ScopedDiagnosticHandler> handler_;
};

}  // namespace kiln::codegen_common
