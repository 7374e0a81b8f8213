// The pass runner: unknown names, timings, verification, DYNVM_LOGS=graph dumps.
#include "dynvm/graph/pass_runner.h"

#include <cstdlib>
#include <sstream>

#include "catch.h"
#include "graph_test_util.h"

using namespace dynvm::graph;
using dynvm::graph::test::parse;

namespace {

const char* const kDead =
    "graph(%x: f32[2] cpu):\n"
    "  %0: f32[2] cpu = aten::relu(%x)\n"
    "  %1: f32[2] cpu = aten::neg(%x)\n"
    "  return (%0)\n";

// Sets an environment variable for the lifetime of the object.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    if (old != nullptr) old_ = old;
    had_old_ = old != nullptr;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_old_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::string old_;
  bool had_old_ = false;
};

}  // namespace

TEST_CASE("pass lists split on commas") {
  CHECK(split_pass_list("dce, cse,,dce ") == std::vector<std::string>{"dce", "cse", "dce"});
  CHECK(split_pass_list("").empty());
  CHECK(known_passes() == std::vector<std::string>{"dce", "cse", "functionalize", "attention",
                                                   "decompose", "channels_last"});
}

TEST_CASE("an unknown pass fails before anything runs") {
  Graph g = parse(kDead);
  auto result = run_passes(g, {"dce", "licm"});
  REQUIRE_FALSE(result.ok());
  CHECK(result.error().message ==
        "unknown graph pass 'licm' (known: dce, cse, functionalize, attention, decompose, "
        "channels_last)");
  CHECK(g.num_nodes() == 2);
}

TEST_CASE("each pass is timed and counted") {
  Graph g = parse(kDead);
  PassRunOptions options;
  options.verify = true;
  options.dump = false;
  auto result = run_passes(g, {"cse", "dce"}, options);
  REQUIRE(result.ok());
  REQUIRE(result->size() == 2);
  CHECK((*result)[0].pass == "cse");
  CHECK((*result)[1].pass == "dce");
  CHECK((*result)[1].nodes_before == 2);
  CHECK((*result)[1].nodes_after == 1);
  CHECK((*result)[1].milliseconds >= 0);
}

TEST_CASE("a malformed input graph is reported before the first pass") {
  Graph g = parse("graph(%x: Tensor):\n  %0: f32[2] cpu = aten::neg(%x)\n  return (%0)\n");
  PassRunOptions options;
  options.verify = true;
  auto result = run_passes(g, {"dce"}, options);
  REQUIRE_FALSE(result.ok());
  CHECK(result.error().message ==
        "the graph given to the passes is malformed:\n"
        "  graph input 0: tensor %x has no metadata (dtype, device, sizes)");
}

TEST_CASE("DYNVM_LOGS=graph dumps the graph around each pass") {
  Graph g = parse(kDead);
  std::ostringstream log;
  PassRunOptions options;
  options.dump_stream = &log;
  {
    ScopedEnv env("DYNVM_LOGS", "guards,graph");
    CHECK(graph_logging_enabled());
    REQUIRE(run_passes(g, {"dce"}, options).ok());
  }
  std::string text = log.str();
  CHECK(text.rfind("[dynvm graph] before dce:\n" + std::string(kDead), 0) == 0);
  CHECK(text.find("[dynvm graph] after dce (") != std::string::npos);
  CHECK(text.find(" ms, 2 -> 1 nodes):\n") != std::string::npos);
  {
    ScopedEnv env("DYNVM_LOGS", "graphs,guards");
    CHECK_FALSE(graph_logging_enabled());
  }
}
