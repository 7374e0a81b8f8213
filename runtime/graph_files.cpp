// graph_files: Graphviz (and SVG through `dot`) of each compiled graph.
#include "dynvm/runtime/graph_files.h"

#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>

#include "dynvm/runtime/variant.h"

extern char** environ;

namespace dynvm::runtime {

namespace {

std::optional<std::string> g_dir;  // unset: DYNVM_GRAPHS decides
int g_count = 0;

const std::string& graphs_dir() {
  if (!g_dir) {
    const char* env = std::getenv("DYNVM_GRAPHS");
    g_dir = env != nullptr ? env : "";
  }
  return *g_dir;
}

// A file-name-safe rendering of a function's qualified name.
std::string file_stem(const std::string& function) {
  std::string out;
  for (char c : function) {
    if (c == ' ') break;  // "name (file:line)": the name
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    out += ok ? c : '_';
  }
  return out.empty() ? "graph" : out;
}

// Runs `dot -Tsvg in -o out`; false when dot is missing or fails.
bool render_svg(const std::string& in, const std::string& out) {
  std::string a0 = "dot", a1 = "-Tsvg", a3 = "-o";
  std::string a2 = in, a4 = out;
  char* argv[] = {a0.data(), a1.data(), a2.data(), a3.data(), a4.data(), nullptr};
  pid_t pid = 0;
  if (posix_spawnp(&pid, "dot", nullptr, nullptr, argv, environ) != 0) return false;
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

void set_graphs_dir(const std::string& dir) { g_dir = dir; }

void write_graph_files(const std::string& function, const std::string& location,
                       const Variant& variant) {
  const std::string& dir = graphs_dir();
  if (dir.empty()) return;
  ::mkdir(dir.c_str(), 0777);  // may exist already
  char number[16];
  std::snprintf(number, sizeof number, "%03d", g_count++);
  std::string base = dir + "/" + number + "-" + file_stem(function);
  std::string dot = variant.to_dot(function + " from " + location);
  if (dot.empty()) return;
  {
    std::ofstream file(base + ".dot");
    if (!file) {
      std::fprintf(stderr, "dynvm: cannot write graphs to %s\n", dir.c_str());
      return;
    }
    file << dot;
  }
  render_svg(base + ".dot", base + ".svg");  // where Graphviz is installed
}

}  // namespace dynvm::runtime
