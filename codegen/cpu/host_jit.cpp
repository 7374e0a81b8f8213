// The host CPU's JIT: created once per process for the host CPU and its features; object
// files are loaded into JITDylibs of their own, resolving libm and the process's symbols.
#ifdef DYNVM_HAVE_LLVM

#include "cpu/host_jit.h"

#include <llvm/ExecutionEngine/JITLink/EHFrameSupport.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace dynvm::codegen {

std::string llvm_error(llvm::Error error) { return llvm::toString(std::move(error)); }

namespace {

HostJit* create_host_jit() {
  auto* host = new HostJit();
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::StringMap<bool> features;
  llvm::sys::getHostCPUFeatures(features);
  std::vector<std::string> items;
  for (const auto& f : features) items.push_back((f.second ? "+" : "-") + f.first().str());
  std::sort(items.begin(), items.end());
  for (const std::string& item : items)
    host->features += (host->features.empty() ? "" : ",") + item;
  host->cpu = llvm::sys::getHostCPUName().str();
  auto has = [&](const char* name) { return features.count(name) && features.lookup(name); };
  host->lanes = has("avx512f") ? 16 : has("avx2") || has("avx") ? 8 : 4;

  llvm::orc::JITTargetMachineBuilder builder{llvm::Triple(llvm::sys::getProcessTriple())};
  builder.setCPU(host->cpu);
  builder.addFeatures(items);
  builder.setCodeGenOptLevel(llvm::CodeGenOpt::Aggressive);
  builder.setRelocationModel(llvm::Reloc::PIC_);
  builder.setCodeModel(llvm::CodeModel::Small);
  auto target_machine = builder.createTargetMachine();
  if (!target_machine) {
    host->error = llvm_error(target_machine.takeError());
    return host;
  }
  host->target_machine = std::move(*target_machine);
  llvm::orc::JITTargetMachineBuilder quick = builder;
  quick.setCodeGenOptLevel(llvm::CodeGenOpt::None);
  auto quick_machine = quick.createTargetMachine();
  if (!quick_machine) {
    host->error = llvm_error(quick_machine.takeError());
    return host;
  }
  host->quick_target_machine = std::move(*quick_machine);
  // JITLink, not RuntimeDyld (LLVM 16's default on x86-64 ELF): RuntimeDyld's memory
  // manager maps an object's code and its constants separately, and once they land more
  // than 2 GB apart (the process's other mappings between them) the code's 32-bit
  // PC-relative loads of its constants silently wrap to unmapped or foreign memory, which
  // crashed kernels loaded from the disk cache. JITLink maps each object in one block,
  // reaches other symbols through its own GOT and stubs, and fails a relocation out of
  // range instead of truncating it. The plugin registers each object's unwind tables, so
  // an exception thrown below the glue (an ATen call) unwinds through JIT frames.
  auto jit =
      llvm::orc::LLJITBuilder()
          .setJITTargetMachineBuilder(builder)
          .setObjectLinkingLayerCreator(
              [](llvm::orc::ExecutionSession& session,
                 const llvm::Triple&) -> llvm::Expected<std::unique_ptr<llvm::orc::ObjectLayer>> {
                auto layer = std::make_unique<llvm::orc::ObjectLinkingLayer>(session);
                // Registered in this process directly: the executor-side wrapper that
                // LLJIT's own JITLink set-up looks up by name is not visible to a lookup
                // from a Python extension module (loaded RTLD_LOCAL with libLLVM).
                layer->addPlugin(std::make_unique<llvm::orc::EHFrameRegistrationPlugin>(
                    session, std::make_unique<llvm::jitlink::InProcessEHFrameRegistrar>()));
                return std::unique_ptr<llvm::orc::ObjectLayer>(std::move(layer));
              })
          .create();
  if (!jit) {
    host->error = llvm_error(jit.takeError());
    return host;
  }
  host->jit = std::move(*jit);
  // Kernels call libm (sinf, powf, …): resolve from the process.
  auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      host->jit->getDataLayout().getGlobalPrefix());
  if (!process) {
    host->error = llvm_error(process.takeError());
    return host;
  }
  host->jit->getMainJITDylib().addGenerator(std::move(*process));
  return host;
}

}  // namespace

HostJit& host_jit() {
  static HostJit* host = create_host_jit();
  return *host;
}

std::string verify_module(const llvm::Module& module) {
  std::string problems;
  llvm::raw_string_ostream stream(problems);
  if (!llvm::verifyModule(module, &stream)) return "";
  stream.flush();
  return problems.empty() ? "invalid module" : problems;
}

std::string module_text(const llvm::Module& module) {
  std::string ir;
  llvm::raw_string_ostream stream(ir);
  module.print(stream, nullptr);
  stream.flush();
  return ir;
}

void optimize_module(llvm::Module& module, llvm::TargetMachine& target_machine, int level) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder builder(&target_machine);
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::OptimizationLevel opt = level <= 1   ? llvm::OptimizationLevel::O1
                                : level == 2 ? llvm::OptimizationLevel::O2
                                             : llvm::OptimizationLevel::O3;
  llvm::ModulePassManager passes = builder.buildPerModuleDefaultPipeline(opt);
  passes.run(module, mam);
}

Expected<std::string> emit_object(llvm::Module& module, llvm::TargetMachine& target_machine) {
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream stream(buffer);
  llvm::legacy::PassManager passes;
  if (target_machine.addPassesToEmitFile(passes, stream, nullptr, llvm::CGFT_ObjectFile)) {
    return make_error("the LLVM target cannot emit object files");
  }
  passes.run(module);
  return std::string(buffer.begin(), buffer.end());
}

Expected<LoadedSymbol> load_object(HostJit& host, const std::string& bytes,
                                   const std::string& symbol) {
  auto library = host.jit->createJITDylib("dynvm_code_" + std::to_string(host.next_library++));
  if (!library) return make_error(llvm_error(library.takeError()));
  library->addToLinkOrder(host.jit->getMainJITDylib());
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(bytes, symbol);
  if (llvm::Error error = host.jit->addObjectFile(*library, std::move(buffer))) {
    return make_error(llvm_error(std::move(error)));
  }
  auto address = host.jit->lookup(*library, symbol);
  if (!address) return make_error(llvm_error(address.takeError()));
  return LoadedSymbol{address->toPtr<const void*>()};
}

}  // namespace dynvm::codegen

#endif  // DYNVM_HAVE_LLVM
