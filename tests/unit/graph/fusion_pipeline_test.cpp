// Fusion partitioning, group extraction, memory planning and the pipeline: golden text
// files under tests/data/graph_fusion/ (input graph → everything lower_for_fusion makes),
// plus API tests of the properties the goldens cannot show.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "catch.h"
#include "dynvm/graph/fusion_partition.h"
#include "dynvm/graph/fusion_pipeline.h"
#include "dynvm/graph/graph_analysis.h"
#include "dynvm/graph/graph_dot.h"
#include "dynvm/graph/memory_planning.h"
#include "dynvm/graph/primitive_ops.h"
#include "dynvm/graph/verify.h"
#include "graph_test_util.h"

using namespace dynvm::graph;
using dynvm::graph::test::parse;
namespace fs = std::filesystem;

namespace {

// A golden file: description lines, "# input", a graph, "# expected", the text of
// lower_for_fusion's result. DYNVM_UPDATE_GOLDENS=1 rewrites the expected section.
struct Golden {
  std::string head;
  std::string input;
  std::string expected;
};

Golden read_golden(const std::string& text) {
  Golden g;
  std::istringstream lines(text);
  std::string line;
  int section = 0;  // 0 head, 1 input, 2 expected
  while (std::getline(lines, line)) {
    if (section < 2 && line == "# expected") {
      section = 2;
      continue;
    }
    if (section == 2) {
      g.expected += line + "\n";
      continue;
    }
    g.head += line + "\n";
    if (line == "# input") {
      section = 1;
    } else if (section == 1) {
      g.input += line + "\n";
    }
  }
  return g;
}

FusionProgram lower(const std::string& text) {
  PassRunOptions options;
  options.verify = true;
  auto program = lower_for_fusion(parse(text), options);
  if (!program) FAIL(program.error().message);
  return std::move(program).value();
}

}  // namespace

TEST_CASE("fusion pipeline goldens in tests/data/graph_fusion") {
  const char* update_env = std::getenv("DYNVM_UPDATE_GOLDENS");
  bool update = update_env != nullptr && std::string(update_env) == "1";
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(fs::path(DYNVM_TEST_DATA_DIR) / "graph_fusion")) {
    if (entry.path().extension() == ".txt") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 5);
  for (const fs::path& path : files) {
    std::ifstream in(path);
    std::stringstream buffer;
    buffer << in.rdbuf();
    Golden g = read_golden(buffer.str());
    INFO(path.filename().string());
    FusionProgram program = lower(g.input);
    std::string actual = to_text(program);
    if (update) {
      std::ofstream out(path, std::ios::trunc);
      out << g.head << "# expected\n" << actual;
      continue;
    }
    CHECK(actual == g.expected);
    // Every group is a graph of primitives that verifies on its own.
    for (const Graph& group : program.groups) {
      CHECK(verify(group).empty());
      for (const Node* node : group.nodes()) CHECK(primitive_kind(*node) != PrimitiveKind::Extern);
    }
  }
}

TEST_CASE("a merge that would make a cycle through an extern node is refused") {
  // %0 feeds both mm (extern) and %2, and %2 reads mm's result: fusing %0 with %2 would
  // make the group run both before and after mm.
  Graph g = parse(R"(
graph(%x: f32[4, 4] cpu, %w: f32[4, 4] cpu):
  %0: f32[4, 4] cpu = aten::exp(%x)
  %1: f32[4, 4] cpu = aten::mm(%0, %w)
  %2: f32[4, 4] cpu = aten::add.Tensor(%0, %1, alpha=1)
  %3: f32[4, 4] cpu = aten::relu(%2)
  return (%3)
)");
  FusionPlan plan = partition_for_fusion(g);
  REQUIRE(plan.groups.size() == 2);
  CHECK(plan.groups[0].nodes.size() == 1);
  CHECK(plan.groups[1].nodes.size() == 2);
  Graph outer = build_outer_graph(g, plan);
  CHECK(verify(outer).empty());
  CHECK(topological_order(outer).ok());
  CHECK(to_text(outer) == R"(graph(%x: f32[4, 4] cpu, %w: f32[4, 4] cpu):
  %0: f32[4, 4] cpu = dynvm::fused(%x, group=0)
  %1: f32[4, 4] cpu = aten::mm(%0, %w)
  %2: f32[4, 4] cpu = dynvm::fused(%0, %1, group=1)
  return (%2)
)");
}

TEST_CASE("no group spans a node with side effects") {
  // uniform_ (random, in place) stays: reads of %x before and after it must not meet in
  // one kernel, and the outer graph keeps them on their sides of it.
  Graph g = parse(R"(
graph(%x: f32[4] cpu):
  %0: f32[4] cpu = aten::exp(%x)
  %1: f32[4] cpu = aten::uniform_(%x, 0.0, 1.0)
  %2: f32[4] cpu = aten::exp(%x)
  %3: f32[4] cpu = aten::add.Tensor(%0, %2, alpha=1)
  return (%3)
)");
  FusionPlan plan = partition_for_fusion(g);
  REQUIRE(plan.groups.size() == 2);
  CHECK(plan.groups[0].nodes.size() == 1);
  CHECK(plan.groups[1].nodes.size() == 2);
  CHECK(to_text(build_outer_graph(g, plan)) == R"(graph(%x: f32[4] cpu):
  %0: f32[4] cpu = dynvm::fused(%x, group=0)
  %1: f32[4] cpu = aten::uniform_(%x, 0.0, 1.0)
  %2: f32[4] cpu = dynvm::fused(%x, %0, group=1)
  return (%2)
)");
}

TEST_CASE("groups of different sizes or reductions stay apart") {
  Graph g = parse(R"(
graph(%x: f32[4, 6] cpu):
  %0: f32[4, 6] cpu = aten::exp(%x)
  %1: f32[6] cpu = aten::sum.dim_IntList(%0, [0], False)
  %2: f32[4] cpu = aten::sum.dim_IntList(%0, [1], False)
  %3: f32[6] cpu = aten::neg(%1)
  return (%2, %3)
)");
  FusionPlan plan = partition_for_fusion(g);
  REQUIRE(plan.groups.size() == 2);
  CHECK(plan.groups[0].kind == FusionGroupKind::Reduction);
  CHECK(plan.groups[0].numel == 6);
  CHECK(plan.groups[0].reduction_numel == 4);
  CHECK(plan.groups[0].sizes == std::vector<int64_t>{4, 6});
  CHECK(plan.groups[0].reduction_dims == std::vector<int64_t>{0});
  CHECK(plan.groups[0].nodes.size() == 3);  // exp, sum over rows, neg
  CHECK(plan.groups[1].numel == 4);
  CHECK(plan.groups[1].reduction_numel == 6);
  // exp's result is read by the second group, so the first one outputs it.
  CHECK(plan.groups[0].outputs.size() == 2);
}

TEST_CASE("memory planning reuses a slot once its value is dead") {
  Graph g = parse(R"(
graph(%x: f32[8, 8] cpu, %w: f32[8, 8] cpu):
  %0: f32[8, 8] cpu = aten::mm(%x, %w)
  %1: f32[8, 8] cpu = aten::mm(%0, %w)
  %2: f32[8, 8] cpu = aten::mm(%1, %w)
  %3: f32[8, 8] cpu = aten::mm(%2, %w)
  %4: f32[2, 8] cpu = aten::slice.Tensor(%3, 0, 0, 2)
  %5: f32[2, 8] cpu = aten::mm(%4, %w)
  return (%5)
)");
  MemoryPlan plan = plan_memory(g);
  REQUIRE(plan.buffers.size() == 4);
  CHECK(plan.slots.size() == 2);
  CHECK(plan.buffers[0].slot == 0);
  CHECK(plan.buffers[1].slot == 1);
  CHECK(plan.buffers[2].slot == 0);
  CHECK(plan.buffers[3].slot == 1);
  // %3 lives until its slice is read by the last mm.
  CHECK(plan.buffers[3].last_use == 5);
  CHECK(plan.slot_bytes() == 2 * 256);
  CHECK(plan.buffer_bytes() == 4 * 256);
  CHECK(plan.caller_owned.size() == 1);
  CHECK(to_text(g, plan) == R"(memory: 2 slots, 512 bytes (1024 without reuse)
  slot 0: 256 bytes cpu: %0 [0-1], %2 [2-3]
  slot 1: 256 bytes cpu: %1 [1-2], %3 [3-5]
  caller-owned: %5
)");
}

TEST_CASE("a smaller buffer reuses a larger free slot, never the reverse") {
  Graph g = parse(R"(
graph(%x: f32[64] cpu):
  %0: f32[64] cpu = aten::exp(%x)
  %1: f32[64] cpu = aten::exp(%0)
  %2: f32[16] cpu = aten::slice.Tensor(%x, 0, 0, 16)
  %3: f32[16] cpu = aten::exp(%2)
  %4: f32[128] cpu = aten::repeat(%1, [2])
  %5: f32[128] cpu = aten::exp(%4)
  %6: f32[1] cpu = aten::sum.dim_IntList(%3, [0], True)
  return (%5, %6)
)");
  MemoryPlan plan = plan_memory(g);
  REQUIRE(plan.buffers.size() == 4);
  CHECK(plan.buffers[0].slot == 0);  // %0
  CHECK(plan.buffers[1].slot == 1);  // %1, while %0 is read
  CHECK(plan.buffers[2].slot == 0);  // %3 (64 bytes) in %0's free 256-byte slot
  CHECK(plan.buffers[3].slot == 2);  // %4 needs 512 bytes; %1's slot is still read by its node
  CHECK(plan.slots.size() == 3);
  CHECK(plan.caller_owned.size() == 2);
}

TEST_CASE("a result that may alias several tensors keeps every one of them alive") {
  // broadcast_tensors views each tensor of its list, not only the first; an opaque
  // operator may return any tensor it reads.
  for (const char* op : {"aten::broadcast_tensors([%0, %1])", "my::pair(%0, %1)"}) {
    INFO(op);
    Graph g = parse(std::string(R"(
graph(%x: f32[16] cpu, %y: f32[16] cpu):
  %0: f32[16] cpu = aten::exp(%x)
  %1: f32[16] cpu = aten::exp(%y)
  %2: f32[16] cpu, %3: f32[16] cpu = )") +
                    op + R"(
  %4: f32[16] cpu = aten::exp(%x)
  %5: f32[16] cpu = aten::add.Tensor(%3, %4)
  return (%5)
)");
    MemoryPlan plan = plan_memory(g);
    REQUIRE(plan.buffers.size() == 3);
    CHECK(plan.buffers[0].last_use == 4);
    CHECK(plan.buffers[1].last_use == 4);  // %3 may be %1
    CHECK(plan.buffers[2].slot == 2);      // so %4 cannot take %1's slot
    CHECK(plan.caller_owned.size() == 1);
  }
}

TEST_CASE("memory planning places only what the storage rule says is planned") {
  Graph g = parse(R"(
graph(%x: f32[8, 8] cpu, %w: f32[8, 8] cpu):
  %0: f32[8, 8] cpu = aten::exp(%x)
  %1: f32[8, 8] cpu = aten::mm(%0, %w)
  %2: f32[8, 8] cpu = aten::tanh(%1)
  %3: f32[8, 8] cpu = aten::mm(%2, %w)
  %4: f32[8, 8] cpu = aten::view(%3, [64])
  %5: f32[64] cpu = aten::neg(%4)
  return (%5, %1)
)");
  CHECK(default_output_storage(*g.value(2)->producer()) == OutputStorage::Planned);
  CHECK(default_output_storage(*g.value(6)->producer()) == OutputStorage::AliasesFirst);
  // Matmuls allocating their own results: only the pointwise results take slots.
  MemoryPlan plan = plan_memory(g, [](const Node& node) {
    OutputStorage storage = default_output_storage(node);
    if (node.op() == "aten::mm") return OutputStorage::Fresh;
    return storage;
  });
  REQUIRE(plan.buffers.size() == 2);
  CHECK(plan.slots.size() == 1);
  CHECK(plan.buffers[0].value_id == g.value(2)->id());
  CHECK(plan.buffers[1].value_id == g.value(4)->id());
  CHECK(plan.caller_owned.size() == 1);  // %5; %1 is the matmul's own
  CHECK(plan_memory(g).slots.size() == 2);
}

TEST_CASE("the DOT export draws fused groups as clusters and marks extern calls") {
  Graph g = parse(R"(
graph(%x: f32[4, 4] cpu, %w: f32[4, 4] cpu):
  %0: f32[4, 4] cpu = aten::exp(%x)
  %1: f32[4, 4] cpu = aten::mm(%0, %w)
  %2: f32[4, 4] cpu = aten::relu(%1)
  %3: f32[4, 4] cpu = aten::neg(%2)
  return (%3)
)");
  FusionPlan plan = partition_for_fusion(g);
  std::string dot = to_dot(g, fusion_dot_options(plan));
  CHECK(dot.find("  n1 [label=\"extern aten::mm\\n%1: f32[4, 4] cpu\", style=filled, "
                 "fillcolor=lightsalmon];\n") != std::string::npos);
  CHECK(dot.find("  subgraph cluster_1 {\n    label=\"group 1\"; style=dashed;\n    n2;\n    "
                 "n3;\n  }\n") != std::string::npos);
  std::string outer = to_dot(build_outer_graph(g, plan));
  CHECK(outer.find("  n0 [label=\"fused group 0\\n%0: f32[4, 4] cpu\", style=\"filled,bold\", "
                   "fillcolor=lightyellow];\n") != std::string::npos);
}

TEST_CASE("partitioning a large graph stays fast and acyclic") {
  // 400 blocks of mm (extern) followed by eight pointwise ops reading the block input and
  // the product: 3600 nodes, 400 groups.
  std::string text = "graph(%x: f32[16, 16] cpu, %w: f32[16, 16] cpu):\n";
  std::string last = "%x";
  int n = 0;
  for (int block = 0; block < 400; ++block) {
    std::string product = "%" + std::to_string(n++);
    text += "  " + product + ": f32[16, 16] cpu = aten::mm(" + last + ", %w)\n";
    std::string value = product;
    for (int i = 0; i < 8; ++i) {
      std::string next = "%" + std::to_string(n++);
      text += "  " + next + ": f32[16, 16] cpu = aten::add.Tensor(" + value + ", " + last +
              ", alpha=1)\n";
      value = next;
    }
    last = value;
  }
  text += "  return (" + last + ")\n";
  Graph g = parse(text);
  FusionPlan plan = partition_for_fusion(g);
  CHECK(plan.groups.size() == 400);
  Graph outer = build_outer_graph(g, plan);
  CHECK(outer.num_nodes() == 800);
  CHECK(verify(outer).empty());
}

TEST_CASE("a returned view stays outside groups, so it still aliases its base") {
  Graph g = parse(R"(
graph(%x: f32[2, 3] cpu):
  %0: f32[6] cpu = aten::view(%x, [6])
  %1: f32[6] cpu = aten::relu(%0)
  %2: f32[3, 2] cpu = aten::view(%1, [3, 2])
  %3: f32[3, 2] cpu = aten::neg(%2)
  return (%0, %3)
)");
  FusionPlan plan = partition_for_fusion(g);
  REQUIRE(plan.groups.size() == 1);
  CHECK(plan.groups[0].nodes.size() == 3);  // relu, the inner view, neg
  CHECK(plan.group_of(*g.first_node()) == -1);
}

// Functionalization leaves a write into an expand view in place: fused, the view was a
// copy the add_ wrote, and the input kept its value (found by the fusion fuzzer).
TEST_CASE("a view written in place stays outside groups (also behind another view)") {
  Graph g = parse(R"(
graph(%x: f32[4, 1] cpu):
  %0: f32[4, 1] cpu = aten::expand(%x, [4, 1])
  %1: f32[4, 1] cpu = aten::expm1(%0)
  %2: f32[4, 1] cpu = aten::add_.Tensor(%0, 3)
  %3: f32[4] cpu = aten::view(%x, [4])
  %4: f32[4] cpu = aten::exp(%3)
  %5: f32[2, 2] cpu = aten::view(%3, [2, 2])
  %6: f32[2, 2] cpu = aten::mul_.Scalar(%5, 2)
  return (%1, %4)
)");
  FusionPlan plan = partition_for_fusion(g);
  INFO(to_text(g, plan));
  for (const Node* node : g.nodes()) {
    if (node->op() == "aten::expand" || node->op() == "aten::view") {
      CHECK(plan.group_of(*node) == -1);
    }
  }
  CHECK(plan.groups.size() == 2);  // expm1; exp
}

TEST_CASE("lower_for_fusion dumps the plan when asked") {
  std::ostringstream log;
  PassRunOptions options;
  options.dump = true;
  options.dump_stream = &log;
  auto program = lower_for_fusion(parse(R"(
graph(%x: f32[4] cpu):
  %0: f32[4] cpu = aten::silu(%x)
  return (%0)
)"),
                                  options);
  REQUIRE(program.ok());
  CHECK(log.str().find("[dynvm graph] before functionalize:") != std::string::npos);
  CHECK(log.str().find("[dynvm graph] fusion plan:\n# graph\n") != std::string::npos);
  CHECK(log.str().find("group 0: pointwise [4], 2 nodes") != std::string::npos);
}

TEST_CASE("the pipeline lowers every input graph of the pass tests into verified graphs") {
  size_t lowered = 0;
  for (const auto& entry :
       fs::recursive_directory_iterator(fs::path(DYNVM_TEST_DATA_DIR) / "graph")) {
    if (entry.path().extension() != ".txt") continue;
    std::ifstream in(entry.path());
    std::stringstream buffer;
    buffer << in.rdbuf();
    std::string text = buffer.str();
    size_t begin = text.find("# input\n");
    size_t end = text.find("\n# expected");
    if (begin == std::string::npos || end == std::string::npos) continue;
    auto graph = parse_graph(text.substr(begin + 8, end - begin - 8));
    if (!graph) continue;  // the parser's error tests
    INFO(entry.path().filename().string());
    PassRunOptions options;
    options.verify = true;
    auto program = lower_for_fusion(std::move(graph).value(), options);
    if (!program) {
      // Only graphs the verifier rejects may fail.
      CHECK(program.error().message.find("malformed") != std::string::npos);
      continue;
    }
    ++lowered;
    CHECK(verify(program->outer).empty());
    CHECK(topological_order(program->outer).ok());
    for (const Graph& group : program->groups) CHECK(verify(group).empty());
  }
  CHECK(lowered > 20);
}

TEST_CASE("a scalar value read inside a group becomes a group input") {
  Graph g = parse(R"(
graph(%x: f32[6] cpu, %n: int):
  %0: f32[6] cpu = aten::relu(%x)
  %1: f32[2, 3] cpu = aten::view(%0, [%n, 3])
  %2: f32[2, 3] cpu = aten::neg(%1)
  return (%2)
)");
  FusionPlan plan = partition_for_fusion(g);
  REQUIRE(plan.groups.size() == 1);
  CHECK(to_text(extract_group(g, plan.groups[0])) == R"(graph(%in0: f32[6] cpu, %in1: int):
  %0: f32[6] cpu = aten::relu(%in0)
  %1: f32[2, 3] cpu = aten::view(%0, [%in1, 3])
  %2: f32[2, 3] cpu = aten::neg(%1)
  return (%2)
)");
  CHECK(to_text(build_outer_graph(g, plan)) == R"(graph(%x: f32[6] cpu, %n: int):
  %0: f32[2, 3] cpu = dynvm::fused(%x, %n, group=0)
  return (%0)
)");
}

TEST_CASE("a small pointwise group joins the one group that reads it, not two") {
  std::string one_reader = R"(
graph(%x: f32[4, 8] cpu, %s: f32[8] cpu, %w: f32[8, 8] cpu):
  %0: f32[8] cpu = aten::sigmoid(%s)
  %1: f32[4, 8] cpu = aten::mul.Tensor(%x, %0)
  %2: f32[4, 8] cpu = aten::relu(%1)
  return (%2)
)";
  Graph g = parse(one_reader);
  FusionPlan plan = partition_for_fusion(g);
  REQUIRE(plan.groups.size() == 1);
  CHECK(plan.groups[0].nodes.size() == 3);
  CHECK(plan.groups[0].sizes == std::vector<int64_t>{4, 8});

  Graph two = parse(R"(
graph(%x: f32[4, 8] cpu, %s: f32[8] cpu, %w: f32[8, 8] cpu):
  %0: f32[8] cpu = aten::sigmoid(%s)
  %1: f32[4, 8] cpu = aten::mul.Tensor(%x, %0)
  %2: f32[4, 8] cpu = aten::mm(%1, %w)
  %3: f32[4, 8] cpu = aten::add.Tensor(%2, %0, alpha=1)
  return (%3)
)");
  FusionPlan split = partition_for_fusion(two);
  CHECK(split.groups.size() == 3);
}
