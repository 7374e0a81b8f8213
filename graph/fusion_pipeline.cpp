// lower_for_fusion: the graph passes, partitioning and memory planning in sequence.
#include "dynvm/graph/fusion_pipeline.h"

#include <iostream>
#include <utility>

#include "dynvm/graph/check.h"
#include "dynvm/graph/graph_printer.h"
#include "dynvm/graph/in_place_outputs.h"
#include "dynvm/graph/verify.h"

namespace dynvm::graph {

std::vector<std::string> fusion_pipeline_passes(const FusionOptions& fusion) {
  if (!fusion.channels_last) return {"functionalize", "attention", "decompose", "cse", "dce"};
  return {"functionalize", "attention", "decompose", "channels_last", "cse", "dce"};
}

Expected<FusionProgram> lower_for_fusion(Graph graph, const PassRunOptions& options,
                                         const FusionOptions& fusion) {
  auto timings = run_passes(graph, fusion_pipeline_passes(fusion), options);
  if (!timings) return timings.error();
  FusionProgram program;
  program.timings = std::move(timings).value();
  program.graph = std::move(graph);
  try {
    program.fusion = partition_for_fusion(program.graph);
    for (const FusionGroup& group : program.fusion.groups) {
      program.groups.push_back(extract_group(program.graph, group));
    }
    program.outer = build_outer_graph(program.graph, program.fusion);
    mark_in_place_outputs(program.outer, program.fusion, program.groups);
    program.memory = plan_memory(program.outer);
  } catch (const InternalError& bug) {
    return make_error(std::string("fusion planning failed: ") + bug.what());
  }
  std::vector<Error> problems = verify(program.outer);
  for (const Graph& group : program.groups) {
    std::vector<Error> more = verify(group);
    problems.insert(problems.end(), more.begin(), more.end());
  }
  if (!problems.empty()) {
    return make_error("fusion planning left a malformed graph: " + problems.front().message);
  }
  if (options.dump.value_or(graph_logging_enabled())) {
    std::ostream& log = options.dump_stream != nullptr ? *options.dump_stream : std::cerr;
    log << "[dynvm graph] fusion plan:\n" << to_text(program);
  }
  return program;
}

std::string to_text(const FusionProgram& program) {
  std::string text = "# graph\n" + to_text(program.graph);
  text += "# groups\n" + to_text(program.graph, program.fusion);
  text += "# outer\n" + to_text(program.outer);
  text += "# " + to_text(program.outer, program.memory);
  return text;
}

}  // namespace dynvm::graph
