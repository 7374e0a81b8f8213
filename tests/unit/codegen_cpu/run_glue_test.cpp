// A compiled graph's run lowered to glue (run_glue.h) and compiled: the same results as
// CompiledGraph::run for graphs mixing kernels, ATen calls and planned memory; kernels
// called straight from the glue or through the parallel helper; failures reported with the
// step's message; the caller's grad mode restored.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "catch.h"
#include "cpu_test_util.h"
#include "dynvm/codegen/compiled_graph.h"
#include "dynvm/codegen/glue_ir.h"
#include "dynvm/codegen/glue_jit.h"
#include "dynvm/codegen/run_glue.h"
#include "dynvm/graph/graph_printer.h"

namespace dynvm::codegen {
namespace {

using testing::check_close;
using testing::compile;
using testing::kMixed;
using testing::parse;
using testing::random_input;

constexpr int64_t kFailed = 7;

// Graph input `index` is the at::Tensor at `tensor` (what the runtime's helper does with a
// Python tensor).
int64_t bind_tensor(int64_t frame, int64_t index, int64_t tensor) noexcept {
  run_frame_set_input(*reinterpret_cast<RunFrame*>(frame), static_cast<size_t>(index),
                      *reinterpret_cast<const at::Tensor*>(tensor));
  return 0;
}

// The glue a native function would hold for `graph`: a frame in slot 0, input i bound from
// the at::Tensor param i points to, then every step.
GlueProgram run_program(const CompiledGraph& graph, size_t inputs) {
  GlueProgram program;
  program.name = "run";
  program.param_count = static_cast<int>(inputs);
  program.slot_count = 1;
  int frame = graph.lower_run_begin(program, 0, kFailed);
  int bind = program.add_helper("bind", 3, reinterpret_cast<const void*>(&bind_tensor));
  int zero = program.constant(0);
  for (size_t i = 0; i < inputs; ++i) {
    auto index = static_cast<int64_t>(i);
    program.check_eq(program.call(bind, {frame, program.constant(index), program.param(index)}),
                     zero, kFailed);
  }
  graph.lower_run_steps(program, frame, kFailed);
  return program;
}

struct GlueRun {
  int64_t code = 0;
  std::string error;
  std::vector<at::Tensor> outputs;
};

GlueRun run_glue(GlueFunction function, const std::vector<at::Tensor>& inputs, size_t slots) {
  std::vector<int64_t> words(slots, 0);
  std::vector<int64_t> params;
  for (const at::Tensor& t : inputs) {
    params.push_back(static_cast<int64_t>(reinterpret_cast<intptr_t>(&t)));
  }
  GlueRun result;
  result.code = function(params.data(), words.data());
  auto* frame = reinterpret_cast<RunFrame*>(words[0]);
  REQUIRE(frame != nullptr);
  if (result.code == kGluePassed) {
    result.outputs = run_frame_outputs(*frame);
  } else {
    result.error = run_frame_error(*frame);
  }
  delete_run_frame(frame);
  return result;
}

// The outputs' layout too: the glue allocates kernel outputs itself.
void check_same_layout(const std::vector<at::Tensor>& actual,
                       const std::vector<at::Tensor>& expected) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    CHECK(actual[i].strides() == expected[i].strides());
    CHECK(actual[i].scalar_type() == expected[i].scalar_type());
  }
}

// One pointwise group over 4M values: more work than one call of the loop should do.
constexpr const char* kLarge = R"(
graph(%x: f32[1024, 4096] cpu):
  %0: f32[1024, 4096] cpu = aten::tanh(%x)
  %1: f32[1024, 4096] cpu = aten::mul.Scalar(%0, 0.5)
  %2: f32[1024, 4096] cpu = aten::add.Tensor(%1, %x)
  return (%2)
)";

std::vector<at::Tensor> inputs_for(const graph::Graph& graph, int64_t seed) {
  std::vector<at::Tensor> inputs;
  for (const graph::Value* input : graph.inputs()) {
    inputs.push_back(random_input(*input->meta(), seed++));
  }
  // %ix indexes rows of a 64-row matrix after *3 and abs: keep it in range.
  for (at::Tensor& t : inputs) {
    if (t.scalar_type() == at::kLong) t = t.remainder(21);
  }
  return inputs;
}

TEST_CASE("run glue: kernels, ATen calls and planned memory give CompiledGraph::run's results",
          "[codegen_cpu][run_glue]") {
  for (const char* text : {kMixed, kLarge}) {
    INFO(text);
    graph::Graph graph = parse(text);
    std::unique_ptr<CompiledGraph> fused = compile(graph, "dynvm");
    REQUIRE(fused->kernel_count() >= 1);
    GlueProgram program = run_program(*fused, graph.inputs().size());
    std::string listing = to_text(program);
    INFO(listing);
    Expected<CompiledGlue> compiled = compile_glue(program);
    REQUIRE(compiled);
    for (int64_t run = 0; run < 3; ++run) {
      std::vector<at::Tensor> inputs = inputs_for(graph, 10 * run);
      GlueRun result =
          run_glue(compiled->function, inputs, static_cast<size_t>(program.slot_count));
      REQUIRE(result.code == kGluePassed);
      std::vector<at::Tensor> expected = fused->run(inputs);
      check_close(result.outputs, expected);
      check_same_layout(result.outputs, expected);
    }
    if (text == kMixed) {
      // Small kernels are called straight from the glue, ATen calls step by step.
      CHECK(listing.find("= call fused_") != std::string::npos);
      CHECK(listing.find("call run_step(") != std::string::npos);
      CHECK(listing.find("call new_output(") != std::string::npos);
      CHECK(fused->planned_outputs() >= 1);
      CHECK(fused->arena_allocations() == 1);  // the glue's runs used the same arena
    } else {
      // 4M values: the loop is split across threads by the helper.
      CHECK(listing.find("call run_kernel(") != std::string::npos);
      CHECK(listing.find("= call fused_") == std::string::npos);
    }
  }
}

TEST_CASE("run glue: groups write the inputs they update in place", "[codegen_cpu][run_glue]") {
  graph::Graph graph = parse(R"(
graph(%p: f32[64, 32] cpu, %g: f32[64, 32] cpu, %m: f32[64, 32] cpu):
  %0: f32[64, 32] cpu = aten::mul_.Scalar(%m, 0.9)
  %1: f32[64, 32] cpu = aten::add_.Tensor(%0, %g, alpha=1)
  %2: f32[64, 32] cpu = aten::add_.Tensor(%p, %1, alpha=-0.1)
  return (%1)
)");
  std::unique_ptr<CompiledGraph> fused = compile(graph, "dynvm");
  std::unique_ptr<CompiledGraph> eager = compile(graph, "eager");
  INFO(graph::to_text(*fused->outer_graph()));
  REQUIRE(graph::to_text(*fused->outer_graph()).find("into=[") != std::string::npos);
  GlueProgram program = run_program(*fused, graph.inputs().size());
  Expected<CompiledGlue> compiled = compile_glue(program);
  REQUIRE(compiled);
  for (int64_t run = 0; run < 3; ++run) {
    std::vector<at::Tensor> inputs = inputs_for(graph, 10 * run);
    std::vector<at::Tensor> expected_inputs;
    std::vector<at::Tensor> glue_inputs;
    for (const at::Tensor& t : inputs) {
      expected_inputs.push_back(t.clone());
      glue_inputs.push_back(t.clone());
    }
    const void* p_data = glue_inputs[0].data_ptr();
    std::vector<at::Tensor> expected = eager->run(expected_inputs);
    GlueRun result =
        run_glue(compiled->function, glue_inputs, static_cast<size_t>(program.slot_count));
    REQUIRE(result.code == kGluePassed);
    check_close(result.outputs, expected);
    check_close(glue_inputs, expected_inputs);
    CHECK(glue_inputs[0].data_ptr() == p_data);
    // The returned value is the momentum buffer itself, as in eager.
    CHECK(result.outputs[0].is_alias_of(glue_inputs[2]));
  }
}

// kMixed under `backend`, its run lowered to glue and compiled.
struct CompiledRun {
  explicit CompiledRun(const std::string& backend)
      : graph(parse(kMixed)),
        executor(compile(graph, backend)),
        program(run_program(*executor, graph.inputs().size())) {
    Expected<CompiledGlue> compiled = compile_glue(program);
    REQUIRE(compiled);
    function = compiled->function;
  }
  GlueRun run(const std::vector<at::Tensor>& inputs) const {
    return run_glue(function, inputs, static_cast<size_t>(program.slot_count));
  }

  graph::Graph graph;
  std::unique_ptr<CompiledGraph> executor;
  GlueProgram program;
  GlueFunction function = nullptr;
};

TEST_CASE("run glue: the eager backend runs every step through the helper",
          "[codegen_cpu][run_glue]") {
  CompiledRun eager("eager");
  std::vector<at::Tensor> inputs = inputs_for(eager.graph, 3);
  GlueRun result = eager.run(inputs);
  REQUIRE(result.code == kGluePassed);
  check_close(result.outputs, eager.executor->run(inputs));
  CHECK(to_text(eager.program).find("call fused_") == std::string::npos);
}

TEST_CASE("run glue: a failing step stops the run with its message; grad mode is restored",
          "[codegen_cpu][run_glue]") {
  CompiledRun fused("dynvm");
  const graph::Graph& graph = fused.graph;

  SECTION("an ATen error") {
    std::vector<at::Tensor> inputs = inputs_for(graph, 5);
    inputs[2] = at::full({16}, 100, at::kLong);  // index_select out of range
    c10::GradMode::set_enabled(true);
    GlueRun result = fused.run(inputs);
    CHECK(result.code == kFailed);
    CHECK(result.error.find("index") != std::string::npos);
    CHECK(c10::GradMode::is_enabled());
  }
  SECTION("a kernel input laid out otherwise than compiled for") {
    std::vector<at::Tensor> inputs = inputs_for(graph, 5);
    inputs[0] = inputs[0].to(at::kDouble);
    GlueRun result = fused.run(inputs);
    CHECK(result.code == kFailed);
    CHECK(result.error.find("fused kernel's input") != std::string::npos);
  }
}

TEST_CASE("run glue: finishing a run keeps its outputs and gives the caller's grad mode back",
          "[codegen_cpu][run_glue]") {
  graph::Graph graph = parse(R"(
graph(%x: f32[8] cpu):
  %0: f32[8] cpu = aten::exp(%x)
  dynvm::set_grad_enabled(False)
  %1: f32[8] cpu = aten::cumsum(%0, 0)
  return (%1)
)");
  std::unique_ptr<CompiledGraph> fused = compile(graph, "dynvm");
  GlueProgram program = run_program(*fused, 1);
  Expected<CompiledGlue> compiled = compile_glue(program);
  REQUIRE(compiled);
  at::Tensor x = at::randn({8});
  std::vector<int64_t> words(static_cast<size_t>(program.slot_count), 0);
  int64_t params[1] = {glue_word(&x)};
  c10::GradMode::set_enabled(true);
  REQUIRE(compiled->function(params, words.data()) == kGluePassed);
  auto* frame = glue_pointer<RunFrame>(words[0]);
  CHECK_FALSE(c10::GradMode::is_enabled());  // the graph's own switch, still in force
  run_frame_finish(*frame);
  CHECK(c10::GradMode::is_enabled());
  at::Tensor out = run_frame_output(*frame, 0);
  delete_run_frame(frame);
  CHECK(at::allclose(out, at::cumsum(at::exp(x), 0)));
  CHECK(c10::GradMode::is_enabled());
}

}  // namespace
}  // namespace dynvm::codegen
