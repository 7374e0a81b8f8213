// The loop-pass runner: text tests (tests/data/loop_passes), and its errors.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "catch.h"
#include "dynvm/codegen/loop_ir_parser.h"
#include "dynvm/codegen/loop_ir_printer.h"
#include "dynvm/codegen/loop_pass_runner.h"
#include "text_sections.h"

namespace dynvm::codegen {
namespace {

using dynvm::testing::read_file;
using dynvm::testing::section;

std::vector<std::string> split_names(const std::string& line) {
  std::vector<std::string> names;
  std::stringstream in(line);
  std::string name;
  while (in >> name) names.push_back(name);
  return names;
}

TEST_CASE("loop passes on tests/data/loop_passes", "[codegen][loop_passes]") {
  bool update = std::getenv("DYNVM_UPDATE_GOLDENS") != nullptr;
  std::vector<std::filesystem::path> files = dynvm::testing::text_files("loop_passes");
  REQUIRE(files.size() >= 3);
  for (const auto& file : files) {
    INFO(file.string());
    std::string text = read_file(file);
    size_t at = text.find("# passes: ");
    REQUIRE(at != std::string::npos);
    std::string line = text.substr(at + 10, text.find('\n', at) - at - 10);
    Expected<LoopKernel> kernel = parse_loop_kernel(section(text, "# input"));
    INFO((kernel ? std::string() : kernel.error().message));
    REQUIRE(kernel);
    auto ran = run_loop_passes(*kernel, split_names(line), {false, nullptr});
    INFO((ran ? std::string() : ran.error().message));
    REQUIRE(ran);
    std::string output = to_text(*kernel);
    if (update) {
      std::ofstream(file) << text.substr(0, text.find("# output\n")) << "# output\n" << output;
      continue;
    }
    CHECK(output == section(text, "# output"));
  }
}

const char* kAdd = R"(kernel add(@x: f32[4] in, @out0: f32[4] out) {
  parallel for %i0 in 0..4 {
    %0: f32 = load @x[%i0]
    store @out0[%i0] = %0
  }
}
)";

TEST_CASE("loop pass runner: unknown names, dumps, a kernel that does not verify",
          "[codegen][loop_passes]") {
  Expected<LoopKernel> kernel = parse_loop_kernel(kAdd);
  REQUIRE(kernel);
  auto unknown = run_loop_passes(*kernel, {"coalesce", "vectorise"});
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().message.find("unknown loop pass 'vectorise'") != std::string::npos);
  CHECK(unknown.error().message.find("coalesce") != std::string::npos);  // the known ones

  std::string dump;
  auto ran = run_loop_passes(*kernel, {"coalesce"}, {true, &dump});
  REQUIRE(ran);
  REQUIRE(ran->size() == 1);
  CHECK((*ran)[0].pass == "coalesce");
  CHECK(dump.find("[dynvm loops] add before the passes:") != std::string::npos);
  CHECK(dump.find("[dynvm loops] add after coalesce:") != std::string::npos);

  // A store of a value that was never defined: refused before any pass runs.
  Expected<LoopKernel> broken = parse_loop_kernel(kAdd);
  REQUIRE(broken);
  broken->body[0]->body[1]->operands[0] = 7;
  auto refused = run_loop_passes(*broken, {"coalesce"});
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message.find("not well formed before the loop passes") !=
        std::string::npos);

  std::vector<LoopPassInfo> known = known_loop_passes();
  REQUIRE_FALSE(known.empty());
  CHECK(known[0].name == "coalesce");
  CHECK_FALSE(known[0].summary.empty());
}

}  // namespace
}  // namespace dynvm::codegen
