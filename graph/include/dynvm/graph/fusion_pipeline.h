// The graph half of compilation: functionalize → attention → decompose → channels_last → CSE →
// DCE → partition into fused groups → build the outer graph → plan its memory.
#pragma once

#include <string>
#include <vector>

#include "dynvm/graph/fusion_partition.h"
#include "dynvm/graph/graph.h"
#include "dynvm/graph/memory_planning.h"
#include "dynvm/graph/pass_runner.h"
#include "dynvm/support/expected.h"

namespace dynvm::graph {

// What code generation and the runtime need. `fusion` points into `graph`; moving the
// whole object keeps those pointers valid.
struct FusionProgram {
  Graph graph;                // after the graph passes
  FusionPlan fusion;          // groups of `graph`
  std::vector<Graph> groups;  // extract_group() of each group, by group id
  Graph outer;                // groups as kFusedOp calls, everything else as in `graph`
  MemoryPlan memory;          // over `outer`
  std::vector<PassTiming> timings;
};

// What the pipeline may change beyond the passes every graph gets.
struct FusionOptions {
  // Run convolutions channels-last (graph/channels_last.h). Off for the halves of a
  // forward/backward pair: their saved values cross from one graph to the other in the
  // layout the split recorded.
  bool channels_last = true;
};

// The passes run before partitioning, in order.
std::vector<std::string> fusion_pipeline_passes(const FusionOptions& fusion = {});

// Runs the pipeline on `graph`. Fails like run_passes (the caller then runs the graph
// eagerly). With DYNVM_LOGS=graph (or options.dump) the plan is dumped after the passes.
Expected<FusionProgram> lower_for_fusion(Graph graph, const PassRunOptions& options = {},
                                         const FusionOptions& fusion = {});

// The whole result as text: the graph after the passes, the groups, the outer graph and
// the memory plan. Deterministic, for golden tests and logs.
std::string to_text(const FusionProgram& program);

}  // namespace dynvm::graph
