// Runs the text-file pass tests under tests/data/graph/: input graph, pass list,
// expected graph or error. DYNVM_UPDATE_GOLDENS=1 rewrites the expected sections.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "catch.h"
#include "dynvm/graph/graph_parser.h"
#include "dynvm/graph/graph_printer.h"
#include "dynvm/graph/joint_partition.h"
#include "dynvm/graph/pass_runner.h"
#include "dynvm/graph/verify.h"

using namespace dynvm::graph;
using dynvm::Expected;
namespace fs = std::filesystem;

namespace {

// One test file:
//   # free description lines
//   # passes: dce, cse          (optional; none: parse and print only; a last entry
//                               "split_backward" derives and splits the backward
//                               (joint_partition.h) and prints both halves)
//   # input
//   <graph text>
//   # expected                  or  # expected-error
//   <graph text>                    <error message>
// The expected section comes last; everything before it is kept on update.
struct PassCase {
  std::string passes;
  std::string input;
  std::string expected;
  bool expects_error = false;
  std::string head;  // the file up to the expected section's header
  std::string problem;
};

std::string trim_trailing_newlines(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

PassCase read_case(const std::string& text) {
  PassCase c;
  enum class Section { Head, Input, Expected } section = Section::Head;
  std::istringstream lines(text);
  std::string line;
  bool have_input = false;
  bool have_expected = false;
  while (std::getline(lines, line)) {
    if (section != Section::Expected) {
      if (line.rfind("# passes:", 0) == 0) {
        c.passes = line.substr(9);
        c.head += line + "\n";
        continue;
      }
      if (line == "# input") {
        section = Section::Input;
        have_input = true;
        c.head += line + "\n";
        continue;
      }
      if (line == "# expected" || line == "# expected-error") {
        section = Section::Expected;
        have_expected = true;
        c.expects_error = line == "# expected-error";
        continue;
      }
      c.head += line + "\n";
      if (section == Section::Input) c.input += line + "\n";
    } else {
      c.expected += line + "\n";
    }
  }
  if (!have_input) c.problem = "no '# input' section";
  if (!have_expected) c.problem = "no '# expected' or '# expected-error' section";
  return c;
}

// The graph text after the passes, or "error" and the message.
std::pair<bool, std::string> run_case(const PassCase& c) {
  Expected<Graph> graph = parse_graph(c.input);
  if (!graph) return {true, graph.error().message};
  PassRunOptions options;
  options.verify = true;
  std::vector<std::string> passes = split_pass_list(c.passes);
  bool split = !passes.empty() && passes.back() == "split_backward";
  if (split) passes.pop_back();
  auto result = run_passes(*graph, passes, options);
  if (!result) return {true, result.error().message};
  if (!split) return {false, to_text(*graph)};
  auto halves = derive_forward_backward(*graph);
  if (!halves) return {true, halves.error().message};
  for (const Graph* half : {&halves->forward, &halves->backward}) {
    std::vector<dynvm::Error> problems = verify(*half);
    if (!problems.empty()) return {true, "malformed half: " + problems.front().message};
  }
  return {false, to_text(*halves)};
}

std::vector<fs::path> case_files() {
  std::vector<fs::path> files;
  for (const auto& entry :
       fs::recursive_directory_iterator(fs::path(DYNVM_TEST_DATA_DIR) / "graph")) {
    if (entry.is_regular_file() && entry.path().extension() == ".txt")
      files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TEST_CASE("graph pass tests in tests/data/graph") {
  const char* update_env = std::getenv("DYNVM_UPDATE_GOLDENS");
  bool update = update_env != nullptr && std::string(update_env) == "1";
  std::vector<fs::path> files = case_files();
  REQUIRE(files.size() > 10);
  for (const fs::path& path : files) {
    std::ifstream in(path);
    std::stringstream buffer;
    buffer << in.rdbuf();
    PassCase c = read_case(buffer.str());
    INFO(fs::relative(path, DYNVM_TEST_DATA_DIR).string());
    if (!c.problem.empty()) {
      FAIL_CHECK(c.problem);
      continue;
    }
    auto [is_error, actual] = run_case(c);
    if (update) {
      std::ofstream out(path, std::ios::trunc);
      out << c.head << (is_error ? "# expected-error\n" : "# expected\n")
          << trim_trailing_newlines(actual) << "\n";
      continue;
    }
    CHECK(is_error == c.expects_error);
    CHECK(trim_trailing_newlines(actual) == trim_trailing_newlines(c.expected));
    if (!is_error && c.passes.find("split_backward") == std::string::npos) {
      // Whatever a pass prints must read back to the same text.
      Expected<Graph> again = parse_graph(actual);
      REQUIRE(again.ok());
      CHECK(to_text(*again) == actual);
    }
  }
}
