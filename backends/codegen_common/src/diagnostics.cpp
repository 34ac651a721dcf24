// See diagnostics.h.
#include "kiln/codegen_common/diagnostics.h"

#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

namespace kiln::codegen_common {

DiagnosticCollector::DiagnosticCollector(mlir::MLIRContext* ctx)
    : handler_(std::make_unique<mlir::ScopedDiagnosticHandler>(ctx, [this](mlir::Diagnostic& diag) {
        llvm::raw_string_ostream os(text_);
        os << "  " << diag.getLocation() << ": " << diag << "\n";
        for (const mlir::Diagnostic& note : diag.getNotes())
          os << "    " << note.getLocation() << ": note: " << note << "\n";
        return mlir::success();
      })) {}

DiagnosticCollector::~DiagnosticCollector() = default;

}  // namespace kiln::codegen_common
