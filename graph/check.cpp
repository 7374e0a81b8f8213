// The failure path of DYNVM_GRAPH_CHECK, out of line so checks stay small.
#include "dynvm/graph/check.h"

namespace dynvm::graph {

void fail_check(const char* file, int line, const char* condition, const std::string& message) {
  throw InternalError(std::string(file) + ":" + std::to_string(line) +
                      ": internal error: " + message + " (check failed: " + condition + ")");
}

}  // namespace dynvm::graph
