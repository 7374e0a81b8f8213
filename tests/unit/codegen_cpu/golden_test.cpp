// Golden files for the CPU target: group -> loop IR -> LLVM IR (tests/data/codegen_cpu).
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "catch.h"
#include "dynvm/codegen/cpu_jit.h"
#include "dynvm/codegen/cpu_kernel.h"
#include "dynvm/codegen/loop_ir_printer.h"
#include "dynvm/codegen/loop_pass_runner.h"
#include "dynvm/codegen/lower_group.h"
#include "dynvm/graph/graph_parser.h"
#include "text_sections.h"

namespace dynvm::codegen {
namespace {

using dynvm::testing::read_file;
using dynvm::testing::section;

TEST_CASE("CPU golden files in tests/data/codegen_cpu", "[codegen_cpu][golden]") {
  bool update = std::getenv("DYNVM_UPDATE_GOLDENS") != nullptr;
  std::vector<std::filesystem::path> files = dynvm::testing::text_files("codegen_cpu");
  REQUIRE(files.size() >= 3);
  for (const auto& file : files) {
    INFO(file.string());
    std::string text = read_file(file);
    std::string lanes_line = text.substr(text.find("# lanes: ") + 9);
    int lanes = std::atoi(lanes_line.c_str());
    Expected<graph::Graph> group = graph::parse_graph(section(text, "# group"));
    REQUIRE(group);
    Expected<LoopKernel> kernel = lower_group(*group, file.stem().string());
    REQUIRE(kernel);
    REQUIRE(run_loop_passes(*kernel, CpuKernel::loop_passes()));
    std::string loop_ir = to_text(*kernel);
    Expected<std::string> llvm_ir = cpu_kernel_llvm_ir(*kernel, lanes);
    REQUIRE(llvm_ir);
    if (update) {
      std::string head = text.substr(0, text.find("# loop IR\n"));
      std::ofstream(file) << head << "# loop IR\n" << loop_ir << "# LLVM IR\n" << *llvm_ir;
      continue;
    }
    CHECK(loop_ir == section(text, "# loop IR"));
    CHECK(*llvm_ir == section(text, "# LLVM IR"));
  }
}

}  // namespace
}  // namespace dynvm::codegen
