// Memory plans applied at run time: fused groups write their planned outputs into one
// arena kept across runs (AtenExecutor with a MemoryPlan, CompiledGraph backend "dynvm").
#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "catch.h"
#include "cpu_test_util.h"
#include "dynvm/codegen/aten_executor.h"
#include "dynvm/codegen/compiled_graph.h"
#include "dynvm/graph/fusion_pipeline.h"
#include "dynvm/graph/graph_printer.h"
#include "dynvm/graph/memory_planning.h"

namespace dynvm::codegen {
namespace {

using testing::check_close;
using testing::compile;
using testing::parse;
using testing::random_input;

// Five fused groups between matmuls. %t views group 0's output and is read last, so that
// output lives to the end; groups 1 and 3 share a slot; group 2's output is returned
// (caller-owned) and also read by a matmul.
constexpr const char* kChain = R"(
graph(%x: f32[32, 32] cpu, %w: f32[32, 32] cpu):
  %0: f32[32, 32] cpu = aten::exp(%x)
  %t: f32[32, 32]{1, 32} cpu = aten::t(%0)
  %1: f32[32, 32] cpu = aten::mm(%0, %w)
  %2: f32[32, 32] cpu = aten::tanh(%1)
  %3: f32[32, 32] cpu = aten::mm(%2, %w)
  %4: f32[32, 32] cpu = aten::sigmoid(%3)
  %5: f32[32, 32] cpu = aten::mm(%4, %w)
  %6: f32[32, 32] cpu = aten::neg(%5)
  %7: f32[32, 32] cpu = aten::mm(%6, %t)
  %8: f32[32, 32] cpu = aten::relu(%7)
  return (%8, %4)
)";

std::vector<at::Tensor> random_inputs(const graph::Graph& graph, int64_t seed) {
  std::vector<at::Tensor> inputs;
  for (const graph::Value* input : graph.inputs()) {
    inputs.push_back(random_input(*input->meta(), seed++));
  }
  return inputs;
}

// The bytes a tensor's elements occupy.
struct Span {
  const char* begin = nullptr;
  const char* end = nullptr;
  bool overlaps(const Span& other) const { return begin < other.end && other.begin < end; }
};

Span span_of(const at::Tensor& t) {
  const char* begin = static_cast<const char*>(t.data_ptr());
  return {begin, begin + t.numel() * static_cast<int64_t>(t.element_size())};
}

// Every output is its own fresh storage, apart from every other output.
void check_outputs_apart(const std::vector<at::Tensor>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (size_t j = i + 1; j < outputs.size(); ++j) {
      INFO("outputs " << i << " and " << j);
      CHECK_FALSE(outputs[i].storage().is_alias_of(outputs[j].storage()));
      CHECK_FALSE(span_of(outputs[i]).overlaps(span_of(outputs[j])));
    }
  }
}

TEST_CASE("planned memory: fused groups writing into shared slots compute what eager does",
          "[codegen_cpu][planned_memory]") {
  for (const char* text : {kChain, testing::kMixed}) {
    INFO(text);
    graph::Graph graph = parse(text);
    std::unique_ptr<CompiledGraph> fused = compile(graph, "dynvm");
    std::unique_ptr<CompiledGraph> eager = compile(graph, "eager");
    REQUIRE(fused->memory_plan() != nullptr);
    INFO(graph::to_text(*fused->outer_graph())
         << graph::to_text(*fused->outer_graph(), *fused->memory_plan()));
    CHECK(fused->kernel_count() >= 4);
    CHECK(fused->planned_outputs() >= 3);
    CHECK(fused->memory_plan()->slots.size() < fused->memory_plan()->buffers.size());
    CHECK(fused->planned_outputs() == fused->memory_plan()->buffers.size());
    CHECK(fused->arena_bytes() == fused->memory_plan()->slot_bytes());
    // Reused slots, and stale bytes from earlier runs, must not show in the results.
    for (int64_t run = 0; run < 3; ++run) {
      std::vector<at::Tensor> inputs = random_inputs(graph, 10 * run);
      check_close(fused->run(inputs), eager->run(inputs));
    }
  }
}

TEST_CASE("planned memory: values live at once get their own slots, dead ones share",
          "[codegen_cpu][planned_memory]") {
  graph::Graph graph = parse(kChain);
  std::unique_ptr<CompiledGraph> fused = compile(graph, "dynvm");
  const graph::Graph& outer = *fused->outer_graph();
  REQUIRE(fused->memory_plan() != nullptr);
  std::string plan = graph::to_text(outer, *fused->memory_plan());
  INFO(graph::to_text(outer) << plan);
  // Group 0's output lives through the view read by the last matmul; groups 1 and 3 take
  // turns in the other slot; group 2's output is returned and group 4's is the result.
  CHECK(plan == R"(memory: 2 slots, 8192 bytes (12288 without reuse)
  slot 0: 4096 bytes cpu: %0 [0-8]
  slot 1: 4096 bytes cpu: %3 [3-4], %7 [7-8]
  caller-owned: %5, %9
)");
}

TEST_CASE("planned memory: one arena serves every run", "[codegen_cpu][planned_memory]") {
  graph::Graph graph = parse(kChain);
  std::unique_ptr<CompiledGraph> fused = compile(graph, "dynvm");
  REQUIRE(fused->memory_plan() != nullptr);
  CHECK(fused->arena_allocations() == 0);
  CHECK(fused->arena_bytes() > 0);
  CHECK(fused->arena_bytes() < fused->memory_plan()->buffer_bytes());
  std::vector<at::Tensor> inputs = random_inputs(graph, 3);
  for (int run = 0; run < 20; ++run) fused->run(inputs);
  CHECK(fused->arena_allocations() == 1);
}

TEST_CASE("planned memory: outputs are fresh and survive later runs",
          "[codegen_cpu][planned_memory]") {
  for (const char* text : {kChain, testing::kMixed}) {
    INFO(text);
    graph::Graph graph = parse(text);
    std::unique_ptr<CompiledGraph> fused = compile(graph, "dynvm");
    std::unique_ptr<CompiledGraph> eager = compile(graph, "eager");
    std::vector<at::Tensor> inputs1 = random_inputs(graph, 1);
    std::vector<at::Tensor> first = fused->run(inputs1);
    std::vector<at::Tensor> expected1 = eager->run(inputs1);
    check_outputs_apart(first);
    std::vector<at::Tensor> inputs2 = random_inputs(graph, 100);
    std::vector<at::Tensor> second = fused->run(inputs2);
    check_outputs_apart(second);
    // Run 2 wrote the arena again with other values: run 1's outputs are untouched.
    check_close(first, expected1);
    check_close(second, eager->run(inputs2));
    for (const at::Tensor& a : first) {
      for (const at::Tensor& b : second) CHECK_FALSE(a.storage().is_alias_of(b.storage()));
    }
    CHECK(fused->arena_allocations() == 1);
  }
}

TEST_CASE("planned memory: a run that throws releases the arena", "[codegen_cpu][planned_memory]") {
  graph::Graph graph = parse(kChain);
  std::unique_ptr<CompiledGraph> fused = compile(graph, "dynvm");
  std::unique_ptr<CompiledGraph> eager = compile(graph, "eager");
  // The first matmul fails after group 0 has written its slot.
  std::vector<at::Tensor> bad = {at::randn({32, 32}), at::randn({31, 32})};
  CHECK_THROWS_AS(fused->run(bad), c10::Error);
  CHECK(fused->arena_allocations() == 1);
  std::vector<at::Tensor> inputs = random_inputs(graph, 5);
  check_close(fused->run(inputs), eager->run(inputs));
  // Had the failed run kept the arena busy, this run would have allocated another.
  CHECK(fused->arena_allocations() == 1);
}

TEST_CASE("planned memory: concurrent runs never share an arena", "[codegen_cpu][planned_memory]") {
  // kChain at 128 x 128, so that runs take long enough to overlap.
  std::string text = kChain;
  for (std::string from : {"[32, 32]", "{1, 32}"}) {
    std::string to = from == "[32, 32]" ? "[128, 128]" : "{1, 128}";
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at)) {
      text.replace(at, from.size(), to);
    }
  }
  graph::Graph graph = parse(text);
  std::unique_ptr<CompiledGraph> fused = compile(graph, "dynvm");
  constexpr int kThreads = 4;
  constexpr int kRuns = 50;
  // Each thread its own inputs; a run alone gives the exact expected outputs.
  std::vector<std::vector<at::Tensor>> inputs;
  std::vector<std::vector<at::Tensor>> expected;
  for (int t = 0; t < kThreads; ++t) {
    inputs.push_back(random_inputs(graph, 7 * t));
    expected.push_back(fused->run(inputs.back()));
  }
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  std::atomic<int> ready{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      for (int run = 0; run < kRuns; ++run) {
        std::vector<at::Tensor> out = fused->run(inputs[static_cast<size_t>(t)]);
        for (size_t i = 0; i < out.size(); ++i) {
          if (!at::equal(out[i], expected[static_cast<size_t>(t)][i])) {
            ++mismatches[static_cast<size_t>(t)];
          }
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) CHECK(mismatches[static_cast<size_t>(t)] == 0);
  CHECK(fused->arena_allocations() >= 1);
  CHECK(fused->arena_allocations() <= static_cast<size_t>(kThreads * kRuns));
}

// AtenExecutor with hand-written groups, to see the buffers the groups are given. They
// keep no tensor of a run: an arena view kept past its run stops the arena's reuse.
struct RecordingGroups {
  std::vector<AtenExecutor::GroupRunner> runners;
  std::vector<AtenExecutor::GroupIntoRunner> into;
  std::map<int64_t, Span> planned;  // by group: the output the last run gave it
  bool keep_views = false;          // keep the views in `kept` (as a buggy caller would)
  std::map<int64_t, at::Tensor> kept;
};

// Group g computes in0 * 2 + g (plus in1 when it has two inputs).
at::Tensor group_value(int64_t g, const std::vector<at::Tensor>& in) {
  at::Tensor value = in[0] * 2 + static_cast<double>(g);
  return in.size() > 1 ? value + in[1] : value;
}

std::unique_ptr<RecordingGroups> recording_groups(int64_t count) {
  auto groups = std::make_unique<RecordingGroups>();
  RecordingGroups* self = groups.get();
  for (int64_t g = 0; g < count; ++g) {
    groups->runners.push_back([g](const std::vector<at::Tensor>& in) {
      return std::vector<at::Tensor>{group_value(g, in)};
    });
    groups->into.push_back(
        [g, self](const std::vector<at::Tensor>& in, const std::vector<at::Tensor>& out) {
          out[0].copy_(group_value(g, in));
          self->planned[g] = span_of(out[0]);
          if (self->keep_views) self->kept[g] = out[0];
        });
  }
  return groups;
}

TEST_CASE("planned memory: groups sharing a slot write the same buffer, run after run",
          "[codegen_cpu][planned_memory]") {
  graph::Graph graph = parse(R"(
graph(%x: f32[64] cpu):
  %0: f32[64] cpu = dynvm::fused(%x, group=0)
  %1: f32[64] cpu = dynvm::fused(%0, group=1)
  %2: f32[64] cpu = dynvm::fused(%1, group=2)
  %3: f32[64] cpu = dynvm::fused(%2, group=3)
  %4: f32[64] cpu = dynvm::fused(%3, %x, group=4)
  return (%4)
)");
  graph::MemoryPlan plan = graph::plan_memory(graph);
  REQUIRE(graph::to_text(graph, plan) == R"(memory: 2 slots, 512 bytes (1024 without reuse)
  slot 0: 256 bytes cpu: %0 [0-1], %2 [2-3]
  slot 1: 256 bytes cpu: %1 [1-2], %3 [3-4]
  caller-owned: %4
)");
  std::unique_ptr<RecordingGroups> groups = recording_groups(5);
  auto executor = AtenExecutor::build(graph, groups->runners, groups->into, plan);
  REQUIRE(executor);
  AtenExecutor& exec = **executor;
  CHECK(exec.planned_outputs() == 4);
  CHECK(exec.arena_bytes() == 512);

  std::vector<const void*> first_buffers;
  std::vector<at::Tensor> earlier_outputs;
  std::vector<at::Tensor> earlier_expected;
  for (int run = 0; run < 5; ++run) {
    INFO("run " << run);
    at::Tensor x = at::randn({64});
    groups->planned.clear();
    std::vector<at::Tensor> out = exec.run({x});
    REQUIRE(groups->planned.size() == 4);  // group 4's output is the caller's
    std::vector<const void*> buffers;
    for (int64_t g = 0; g < 4; ++g) buffers.push_back(groups->planned[g].begin);
    CHECK(buffers[0] == buffers[2]);
    CHECK(buffers[1] == buffers[3]);
    CHECK(buffers[0] != buffers[1]);
    CHECK_FALSE(groups->planned[0].overlaps(groups->planned[1]));
    if (run == 0) first_buffers = buffers;
    CHECK(buffers == first_buffers);  // the same arena every run
    // The result is fresh: outside the arena, and kept intact by later runs.
    for (int64_t g = 0; g < 4; ++g) CHECK_FALSE(groups->planned[g].overlaps(span_of(out[0])));
    at::Tensor expected = ((((x * 2) * 2 + 1) * 2 + 2) * 2 + 3) * 2 + 4 + x;
    CHECK(at::allclose(out[0], expected));
    earlier_outputs.push_back(out[0]);
    earlier_expected.push_back(expected);
    for (size_t i = 0; i < earlier_outputs.size(); ++i) {
      CHECK(at::allclose(earlier_outputs[i], earlier_expected[i]));
    }
  }
  groups->planned.clear();
  CHECK(exec.arena_allocations() == 1);
}

TEST_CASE("planned memory: an arena a caller kept a view of is not written again",
          "[codegen_cpu][planned_memory]") {
  graph::Graph graph = parse(R"(
graph(%x: f32[64] cpu):
  %0: f32[64] cpu = dynvm::fused(%x, group=0)
  %1: f32[64] cpu = dynvm::fused(%0, group=1)
  return (%1)
)");
  std::unique_ptr<RecordingGroups> groups = recording_groups(2);
  auto executor =
      AtenExecutor::build(graph, groups->runners, groups->into, graph::plan_memory(graph));
  REQUIRE(executor);
  at::Tensor x = at::randn({64});
  (*executor)->run({x});
  CHECK((*executor)->arena_allocations() == 1);
  // The recording group holds on to its planned output past the run, as a buggy plan
  // handing a slot to the caller would: the next run must not write that arena.
  groups->keep_views = true;
  (*executor)->run({x + 1});
  groups->keep_views = false;
  at::Tensor kept = groups->kept.at(0);
  at::Tensor kept_values = kept.clone();
  (*executor)->run({x + 2});
  CHECK(at::equal(kept, kept_values));
  CHECK(groups->planned.at(0).begin != kept.data_ptr());
  CHECK((*executor)->arena_allocations() == 2);
  // Without a view kept, the new arena serves the runs after.
  (*executor)->run({x + 3});
  CHECK((*executor)->arena_allocations() == 2);
}

TEST_CASE("planned memory: an extern result that is its input after all is copied",
          "[codegen_cpu][planned_memory]") {
  // feature_dropout outside training returns its input itself, though the operator table
  // takes its result for fresh; group 1 then writes the slot that input had.
  at::Tensor probe = at::randn({4, 16});
  REQUIRE(at::feature_dropout(probe, 0.5, false).is_same(probe));
  graph::Graph graph = parse(R"(
graph(%x: f32[4, 16] cpu):
  %0: f32[4, 16] cpu = dynvm::fused(%x, group=0)
  %1: f32[4, 16] cpu = aten::feature_dropout(%0, 0.5, False)
  %2: f32[4, 16] cpu = dynvm::fused(%x, group=1)
  %3: f32[4, 16] cpu = aten::add.Tensor(%1, %2)
  return (%3)
)");
  graph::MemoryPlan plan = graph::plan_memory(graph);
  std::unique_ptr<RecordingGroups> groups = recording_groups(2);
  auto executor = AtenExecutor::build(graph, groups->runners, groups->into, plan);
  REQUIRE(executor);
  REQUIRE((*executor)->planned_outputs() == 2);
  REQUIRE(groups->planned.empty());
  at::Tensor x = at::randn({4, 16});
  std::vector<at::Tensor> out = (*executor)->run({x});
  REQUIRE(groups->planned.size() == 2);
  CHECK(groups->planned[0].begin == groups->planned[1].begin);  // one slot
  CHECK(at::allclose(out[0], (x * 2) + (x * 2 + 1)));
}

// An optimizer-like update: the momentum buffer and the parameter are written back, each
// by the group that computes it (graph/in_place_outputs.h).
constexpr const char* kUpdate = R"(
graph(%p: f32[64, 32] cpu, %g: f32[64, 32] cpu, %m: f32[64, 32] cpu):
  %0: f32[64, 32] cpu = aten::mul_.Scalar(%m, 0.9)
  %1: f32[64, 32] cpu = aten::add_.Tensor(%0, %g, alpha=1)
  %2: f32[64, 32] cpu = aten::add_.Tensor(%p, %1, alpha=-0.1)
  %3: f32[64, 32] cpu = aten::mul.Tensor(%g, %g)
  return (%3)
)";

TEST_CASE("planned memory: a group output written back into an input is stored in it",
          "[codegen_cpu][planned_memory]") {
  graph::Graph graph = parse(kUpdate);
  Expected<graph::FusionProgram> program = graph::lower_for_fusion(parse(kUpdate));
  REQUIRE(program);
  INFO(graph::to_text(*program));
  // No buffer for the two written-back outputs: they are the inputs.
  REQUIRE(program->memory.buffers.size() == 0);
  // The executor hands each group the inputs themselves as those outputs.
  std::vector<std::unique_ptr<AtenExecutor>> groups;
  std::vector<AtenExecutor::GroupRunner> runners;
  std::vector<AtenExecutor::GroupIntoRunner> into;
  size_t in_place = 0;
  for (const graph::Graph& group : program->groups) {
    auto built = AtenExecutor::build(group);
    REQUIRE(built);
    AtenExecutor* run_group = built->get();
    groups.push_back(std::move(built).value());
    runners.emplace_back(
        [run_group](const std::vector<at::Tensor>& in) { return run_group->run(in); });
    into.emplace_back([run_group, &in_place](const std::vector<at::Tensor>& in,
                                             const std::vector<at::Tensor>& out) {
      std::vector<at::Tensor> values = run_group->run(in);
      for (size_t i = 0; i < out.size(); ++i) {
        in_place += static_cast<size_t>(std::count_if(
            in.begin(), in.end(), [&](const at::Tensor& t) { return t.is_same(out[i]); }));
        out[i].copy_(values[i]);
      }
    });
  }
  auto executor = AtenExecutor::build(program->outer, runners, into, program->memory);
  REQUIRE(executor);
  std::unique_ptr<CompiledGraph> eager = compile(graph, "eager");
  std::unique_ptr<CompiledGraph> fused = compile(graph, "dynvm");
  REQUIRE(fused->kernel_count() == program->groups.size());
  for (int64_t run = 0; run < 3; ++run) {
    std::vector<at::Tensor> inputs = random_inputs(graph, 10 * run);
    std::vector<at::Tensor> expected_inputs = {inputs[0].clone(), inputs[1].clone(),
                                               inputs[2].clone()};
    std::vector<at::Tensor> expected = eager->run(expected_inputs);
    for (CompiledGraph* compiled : {fused.get(), static_cast<CompiledGraph*>(nullptr)}) {
      std::vector<at::Tensor> actual_inputs = {inputs[0].clone(), inputs[1].clone(),
                                               inputs[2].clone()};
      std::vector<const void*> addresses;
      for (const at::Tensor& t : actual_inputs) addresses.push_back(t.data_ptr());
      std::vector<at::Tensor> actual =
          compiled != nullptr ? compiled->run(actual_inputs) : (*executor)->run(actual_inputs);
      check_close(actual, expected);
      check_close(actual_inputs, expected_inputs);
      for (size_t i = 0; i < actual_inputs.size(); ++i)
        CHECK(actual_inputs[i].data_ptr() == addresses[i]);
    }
  }
  CHECK(in_place == 2 * 3);  // %p and %m, on each of the three runs
  CHECK(fused->arena_bytes() == 0);
}

// The group reads %x transposed through a view of a value computed from it: stored in
// place, its new %x would overwrite elements still to be read. It must keep its buffer
// (regression: the first version looked at the input's direct readers only).
TEST_CASE("planned memory: an input read through a view is not written in place",
          "[codegen_cpu][planned_memory]") {
  graph::Graph graph = parse(R"(
graph(%x: f32[8, 8] cpu, %y: f32[8, 8] cpu, %w: f32[8, 8] cpu):
  %0: f32[8, 8] cpu = aten::add_.Tensor(%x, %y, alpha=1)
  %1: f32[8, 8]{1, 8} cpu = aten::t(%0)
  %2: f32[8, 8]{1, 8} cpu = aten::mul.Scalar(%1, 2)
  %3: f32[8, 8] cpu = aten::add.Tensor(%2, %w, alpha=1)
  return (%3)
)");
  std::unique_ptr<CompiledGraph> fused = compile(graph, "dynvm");
  std::unique_ptr<CompiledGraph> eager = compile(graph, "eager");
  REQUIRE(fused->kernel_count() == 1);
  CHECK(graph::to_text(*fused->outer_graph()).find("into=") == std::string::npos);
  std::vector<at::Tensor> inputs = random_inputs(graph, 5);
  std::vector<at::Tensor> expected_inputs = {inputs[0].clone(), inputs[1].clone(),
                                             inputs[2].clone()};
  std::vector<at::Tensor> expected = eager->run(expected_inputs);
  check_close(fused->run(inputs), expected);
  check_close(inputs, expected_inputs);
}

}  // namespace
}  // namespace dynvm::codegen
