// graph_files: `dynvm run --graphs DIR` and DYNVM_GRAPHS=DIR — every graph compiled is
// written there as Graphviz (fused groups as clusters, extern calls marked) and, where the
// `dot` program is installed, as SVG.
#pragma once

#include <string>

namespace dynvm::runtime {

class Variant;

// Where graphs go from now on ("" stops writing them). The DYNVM_GRAPHS environment
// variable sets it at the first graph when this was never called.
void set_graphs_dir(const std::string& dir);

// Writes `variant`'s graph when a directory is set: NNN-<function>.dot (and .svg).
void write_graph_files(const std::string& function, const std::string& location,
                       const Variant& variant);

}  // namespace dynvm::runtime
