// The target machine: the CPU LLVM compiles the kernels for (the host's, with its vector
// features, or a generic one), how it is described to users, exported models and the cache
// key, and LLVM's one-time native-target setup. LLVM only, no MLIR: it is what the JIT
// (jit.cpp) and the object emission (lowering.cpp) share, and it compiles in seconds.
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "kiln/error.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"
#include "stages.h"

namespace kiln::cpu::codegen::detail {

void init_llvm_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

std::string llvm_error_text(llvm::Error error) {
  return llvm::toString(std::move(error));
}

std::string describe_target(const llvm::TargetMachine& tm) {
  std::string cpu = tm.getTargetCPU().str();
  std::string out = cpu.empty() ? "generic" : cpu;
  std::string features = "," + tm.getTargetFeatureString().str() + ",";
  std::string listed;
  for (const char* f : {"+avx2", "+fma", "+avx512f"})
    if (features.find(std::string(",") + f + ",") != std::string::npos)
      listed += (listed.empty() ? "" : ",") + std::string(f);
  return listed.empty() ? out : out + " " + listed;
}

llvm::orc::JITTargetMachineBuilder target_builder(bool host_cpu_features) {
  llvm::orc::JITTargetMachineBuilder jtmb(llvm::Triple(llvm::sys::getProcessTriple()));
  if (host_cpu_features) {
    llvm::Expected<llvm::orc::JITTargetMachineBuilder> host =
        llvm::orc::JITTargetMachineBuilder::detectHost();
    KILN_CHECK(bool(host), "[codegen] expected LLVM to detect the host CPU, got: ",
               llvm_error_text(host.takeError()), ". Fix: check that LLVM supports this host.");
    jtmb = std::move(*host);
  }
  jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  return jtmb;
}

std::unique_ptr<llvm::TargetMachine> make_target_machine(llvm::orc::JITTargetMachineBuilder& jtmb) {
  llvm::Expected<std::unique_ptr<llvm::TargetMachine>> tm = jtmb.createTargetMachine();
  KILN_CHECK(bool(tm), "[codegen] expected an LLVM TargetMachine for the host, got: ",
             llvm_error_text(tm.takeError()), ". Fix: check that LLVM supports this host.");
  return std::move(*tm);
}

std::string full_target(const llvm::TargetMachine& tm) {
  return tm.getTargetTriple().str() + " " + tm.getTargetCPU().str() + " " +
         tm.getTargetFeatureString().str();
}

}  // namespace kiln::cpu::codegen::detail
