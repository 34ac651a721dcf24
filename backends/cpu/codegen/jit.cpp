// The JIT: links a module's relocatable object file (just compiled by lowering.cpp, or read
// from the kernel cache) into an LLJIT and resolves its kernels, so both paths run the very
// same bytes; JitKernelModule is what compile_kernels returns. LLVM's ORC headers only, no
// MLIR: loading machine code is separate from generating it.
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/error.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/RTDyldObjectLinkingLayer.h"
#include "llvm/ExecutionEngine/SectionMemoryManager.h"
#include "llvm/IR/DataLayout.h"
#include "llvm/Support/MemoryBuffer.h"
#include "stages.h"

namespace kiln::cpu::codegen::detail {
namespace {

// The JIT only links objects (emit_object's or the cache's): it is never asked to compile IR.
class ObjectsOnly final : public llvm::orc::IRCompileLayer::IRCompiler {
 public:
  ObjectsOnly() : IRCompiler(llvm::orc::IRSymbolMapper::ManglingOptions()) {}
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> operator()(llvm::Module&) override {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "kiln's kernel JIT links object files only");
  }
};

}  // namespace

JitKernelModule::JitKernelModule() = default;
JitKernelModule::~JitKernelModule() = default;

exec::FusedKernelFn JitKernelModule::lookup(const std::string& name) const {
  auto it = kernels_.find(name);
  if (it != kernels_.end()) return it->second;
  std::string names;
  for (const auto& [n, fn] : kernels_) names += (names.empty() ? "" : ", ") + n;
  KILN_FAIL("[codegen] expected a kernel named '", name, "' in this module, found only: ", names,
            ". Fix: look up a name given in an exec::FusedKernelSpec.");
}

std::string link_object(JitKernelModule& module, std::string_view object,
                        const llvm::orc::JITTargetMachineBuilder& jtmb,
                        const llvm::DataLayout& layout, const std::vector<std::string>& names) {
  // RuntimeDyld with SectionMemoryManager, as mlir::ExecutionEngine links; no platform
  // runtime (kernels have no static constructors).
  llvm::Expected<std::unique_ptr<llvm::orc::LLJIT>> jit =
      llvm::orc::LLJITBuilder()
          .setJITTargetMachineBuilder(jtmb)
          .setDataLayout(layout)
          .setLinkProcessSymbolsByDefault(false)
          .setPlatformSetUp(llvm::orc::setUpInactivePlatform)
          .setCompileFunctionCreator(
              [](llvm::orc::JITTargetMachineBuilder)
                  -> llvm::Expected<std::unique_ptr<llvm::orc::IRCompileLayer::IRCompiler>> {
                return std::make_unique<ObjectsOnly>();
              })
          .setObjectLinkingLayerCreator(
              [](llvm::orc::ExecutionSession& session,
                 const llvm::Triple&) -> llvm::Expected<std::unique_ptr<llvm::orc::ObjectLayer>> {
                return std::make_unique<llvm::orc::RTDyldObjectLinkingLayer>(
                    session, [] { return std::make_unique<llvm::SectionMemoryManager>(); });
              })
          .create();
  if (!jit) return llvm_error_text(jit.takeError());
  // libm (sinf, log1p, ...) and the C library come from the process.
  auto process =
      llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(layout.getGlobalPrefix());
  if (!process) return llvm_error_text(process.takeError());
  (*jit)->getMainJITDylib().addGenerator(std::move(*process));
  if (llvm::Error error = (*jit)->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(
          llvm::StringRef(object.data(), object.size()), "kiln.kernels.o")))
    return llvm_error_text(std::move(error));
  std::map<std::string, exec::FusedKernelFn> kernels;
  for (const std::string& name : names) {
    llvm::Expected<llvm::orc::ExecutorAddr> address = (*jit)->lookup(name);
    if (!address) return "kernel '" + name + "': " + llvm_error_text(address.takeError());
    kernels[name] = address->toPtr<exec::FusedKernelFn>();
  }
  module.jit = std::move(*jit);
  module.kernels_ = std::move(kernels);
  return "";
}

}  // namespace kiln::cpu::codegen::detail
