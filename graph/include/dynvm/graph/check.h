// DYNVM_GRAPH_CHECK: the graph layer's checks of its own invariants (compiler bugs).
//
// A failed check throws InternalError naming file and line; the caller that started a
// compilation catches it and falls back to eager execution, so a bug never crashes the
// user's process. Bad input (malformed text) is reported through Expected instead.
#pragma once

#include <stdexcept>
#include <string>

namespace dynvm::graph {

class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

[[noreturn]] void fail_check(const char* file, int line, const char* condition,
                             const std::string& message);

}  // namespace dynvm::graph

#define DYNVM_GRAPH_CHECK(condition, message)                                              \
  do {                                                                                     \
    if (!(condition)) ::dynvm::graph::fail_check(__FILE__, __LINE__, #condition, message); \
  } while (false)
