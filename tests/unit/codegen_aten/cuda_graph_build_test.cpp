// Backend "dynvm" on a graph whose tensors are on CUDA: it always builds. Where the CUDA
// target is usable here (a GPU, its driver and NVRTC), its fused group becomes a CUDA
// kernel; elsewhere (CI: no GPU) the group runs through ATen, and nothing crashes. The
// kernels' results are tested on the GPU machine (tests/python/test_cuda_kernels.py).
#include <memory>
#include <string>

#include "catch.h"
#include "dynvm/codegen/compiled_graph.h"
#include "dynvm/codegen/targets.h"
#include "dynvm/graph/graph_parser.h"

namespace dynvm::codegen {
namespace {

const char* kCudaGraph = R"(graph(%x: f32[64, 300] cuda:0, %w: f32[300, 300] cuda:0):
  %0: f32[64, 300] cuda:0 = aten::mm(%x, %w)
  %1: f32[64, 300] cuda:0 = aten::mul.Tensor(%0, 0.5)
  %2: f32[64, 300] cuda:0 = aten::_softmax(%1, -1, False)
  return (%2)
)";

bool cuda_usable() {
  for (const TargetInfo& t : targets()) {
    if (t.name == "cuda") return t.usable;
  }
  return false;
}

TEST_CASE("backend dynvm builds a CUDA graph: kernels where CUDA is usable, ATen elsewhere",
          "[codegen_aten][cuda]") {
  Expected<graph::Graph> graph = graph::parse_graph(kCudaGraph);
  REQUIRE(graph);
  auto compiled = CompiledGraph::build(*graph, "dynvm", /*grad_enabled=*/false);
  INFO((compiled ? std::string() : compiled.error().message));
  REQUIRE(compiled);
  CHECK((*compiled)->why_not_fused().empty());  // the graph itself is fusable
  CHECK((*compiled)->group_count() >= 1);       // the scaled softmax
  CHECK((*compiled)->kernel_count() == (cuda_usable() ? (*compiled)->group_count() : 0));
  // The graph drawn for --graphs says where each group runs (a CUDA kernel is named after
  // its source, dv_<hash>, so that equal kernels compile once).
  std::string dot = (*compiled)->to_dot(*graph, "g");
  CHECK(dot.find(cuda_usable() ? ": cuda kernel dv_" : ": runs through ATen") != std::string::npos);
}

TEST_CASE("graphs on several CUDA devices are not fused", "[codegen_aten][cuda]") {
  Expected<graph::Graph> graph = graph::parse_graph(R"(graph(%x: f32[4] cuda:0, %y: f32[4] cuda:1):
  %0: f32[4] cuda:0 = aten::add.Tensor(%x, %y)
  return (%0)
)");
  REQUIRE(graph);
  auto compiled = CompiledGraph::build(*graph, "dynvm", false);
  REQUIRE(compiled);
  CHECK((*compiled)->why_not_fused() == "the graph's inputs are on several CUDA devices");
  CHECK((*compiled)->kernel_count() == 0);
}

}  // namespace
}  // namespace dynvm::codegen
