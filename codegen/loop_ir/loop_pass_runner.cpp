// The loop-IR pass list and its runner.
#include "dynvm/codegen/loop_pass_runner.h"

#include <chrono>
#include <cstdio>

#include "dynvm/codegen/coalesce_loops.h"
#include "dynvm/codegen/loop_ir_printer.h"
#include "dynvm/codegen/loop_ir_verify.h"
#include "dynvm/support/log_topics.h"

namespace dynvm::codegen {

namespace {

// Every loop-IR pass, listed once: X(name, function, what it does).
#define DYNVM_LOOP_PASSES(X)                                                                 \
  X("coalesce", coalesce_loops,                                                              \
    "merges nested loops over contiguous ranges into one loop, so the innermost loop is as " \
    "long as the layout allows")

using LoopPass = void (*)(LoopKernel&);

struct PassEntry {
  const char* name;
  LoopPass run;
  const char* summary;
};

constexpr PassEntry kPasses[] = {
#define DYNVM_LOOP_PASS_ENTRY(name, function, summary) {name, function, summary},
    DYNVM_LOOP_PASSES(DYNVM_LOOP_PASS_ENTRY)
#undef DYNVM_LOOP_PASS_ENTRY
};

const PassEntry* find_pass(const std::string& name) {
  for (const PassEntry& entry : kPasses) {
    if (name == entry.name) return &entry;
  }
  return nullptr;
}

void dump(const LoopPassOptions& options, const std::string& text) {
  if (options.dump_to != nullptr) {
    *options.dump_to += text;
  } else {
    std::fputs(text.c_str(), stderr);
  }
}

}  // namespace

std::vector<LoopPassInfo> known_loop_passes() {
  std::vector<LoopPassInfo> passes;
  for (const PassEntry& entry : kPasses) passes.push_back({entry.name, entry.summary});
  return passes;
}

Expected<std::vector<LoopPassTiming>> run_loop_passes(LoopKernel& kernel,
                                                      const std::vector<std::string>& passes,
                                                      const LoopPassOptions& options) {
  std::vector<const PassEntry*> entries;
  for (const std::string& name : passes) {
    const PassEntry* entry = find_pass(name);
    if (entry == nullptr) {
      std::string known;
      for (const PassEntry& e : kPasses) known += (known.empty() ? "" : ", ") + std::string(e.name);
      return make_error("unknown loop pass '" + name + "' (known: " + known + ")");
    }
    entries.push_back(entry);
  }
  std::vector<std::string> problems = verify_loop_kernel(kernel);
  if (!problems.empty()) {
    return make_error("kernel " + kernel.name +
                      " is not well formed before the loop passes: " + problems.front());
  }
  bool dumping = options.dump.value_or(log_topic_enabled("loops"));
  if (dumping)
    dump(options, "[dynvm loops] " + kernel.name + " before the passes:\n" + to_text(kernel));
  std::vector<LoopPassTiming> timings;
  for (const PassEntry* entry : entries) {
    auto start = std::chrono::steady_clock::now();
    entry->run(kernel);
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    timings.push_back({entry->name, ms});
    problems = verify_loop_kernel(kernel);
    if (!problems.empty()) {
      return make_error("loop pass '" + std::string(entry->name) + "' broke kernel " + kernel.name +
                        " (an internal error): " + problems.front());
    }
    if (dumping) {
      dump(options,
           "[dynvm loops] " + kernel.name + " after " + entry->name + ":\n" + to_text(kernel));
    }
  }
  return timings;
}

}  // namespace dynvm::codegen
