// frame_driver: the segment loop over a live frame — guards, tracing, graphs, rebuilt
// frame state, eager instructions, and CPython's evaluator for the rest.
#include "dynvm/runtime/frame_driver.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "dynvm/codegen/compiled_graph.h"
#include "dynvm/graph/graph_printer.h"
#include "dynvm/runtime/compile_progress.h"
#include "dynvm/runtime/concrete_step.h"
#include "dynvm/runtime/dynamic_dims.h"
#include "dynvm/runtime/frame_hook.h"
#include "dynvm/runtime/graph_files.h"
#include "dynvm/runtime/run_report.h"
#include "dynvm/runtime/variant.h"
#include "dynvm/vm/code_extra.h"
#include "dynvm/vm/source_resolver.h"
#include "dynvm/vm/trace.h"

namespace dynvm::runtime {

namespace {

using Clock = std::chrono::steady_clock;

thread_local Explanation* t_explanation = nullptr;  // dynvm.explain in progress
// Which dynvm.explain call is in progress: a part's variants from before it are dropped,
// those it traced itself are reused, as a compiled call would.
thread_local uint64_t t_explain_call = 0;

int64_t nanoseconds_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
}

// The variants of one traced part of a code object: from instruction `start` on.
struct Segment {
  std::vector<std::unique_ptr<Variant>> variants;  // most recently hit first
  bool gave_up = false;                            // over the cache limit: runs eagerly from now on
  uint64_t explain_call = 0;                       // the explain call that last traced it
};

// Whether the variant's guards hold the value at `source` (its text) to a constant.
bool guards_constant(const Variant& variant, const std::string& source) {
  const vm::GuardSet& guards = variant.trace().guards;
  for (size_t i = 0; i < guards.size(); ++i) {
    const vm::Guard& g = guards[i];
    if (g.kind == vm::GuardKind::ConstantMatch && g.source >= 0 &&
        guards.sources()[g.source].text == source) {
      return true;
    }
  }
  return false;
}

using Segments = std::map<std::pair<std::string, int>, Segment>;  // by (variant key, start)

// Whether a variant of the code (in any of its segments: the write may come after a break)
// sets or deletes the global read from `source`: a counter the function keeps in a global
// (`global step; step += 1`) changes on every call. The global may be read as a name of the
// dict written (G['step'], or another module's dict through a callee), or as an attribute of
// the module that dict belongs to (`helpers.step`).
bool writes_global(const Segments& segments, const vm::SourceTable::Entry& source,
                   const vm::FrameInputs& inputs) {
  PyRef module;  // what the source's base is, when the source is an attribute: read once
  bool module_read = false;
  for (const auto& [key, segment] : segments) {
    for (const auto& variant : segment.variants) {
      for (const vm::SideEffect& effect : variant->trace().side_effects) {
        if ((effect.kind != vm::SideEffect::Kind::SetGlobal &&
             effect.kind != vm::SideEffect::Kind::DeleteGlobal) ||
            effect.name != source.source->name()) {
          continue;
        }
        vm::SourcePtr read = effect.target ? vm::Source::key(effect.target, effect.name)
                                           : vm::Source::global(effect.name);
        if (read->to_string() == source.text) return true;
        if (source.kind != vm::Source::Kind::Attr) continue;
        if (!module_read) {
          module_read = true;
          module = vm::resolve_source(source.source->base(), inputs);
          if (module && !PyModule_Check(module.get())) module = PyRef();
        }
        if (!module) continue;
        PyRef dict = effect.target ? vm::resolve_source(effect.target, inputs)
                                   : PyRef::borrow(inputs.globals);
        if (dict && dict.get() == PyModule_GetDict(module.get())) return true;
      }
    }
  }
  return false;
}

// A number whose constant guard failed: its source, and whether it lives in the frame.
struct ChangedNumber {
  std::string source;  // "" when the failed guard is not a number's constant guard
  bool in_frame = false;
};

// The source of a failed constant guard on a number. In the frame (a local or a stack
// entry, or an item of a container held there: the dict a comprehension is building when
// it breaks on .item()), it is traced as opaque from then on (automatic dynamic). A float
// read through attributes or keys (a learning rate an LR scheduler sets on every step) is
// too, once it has changed twice (driver below); other numbers read that way
// (configuration) stay constants. A global the traced code writes itself is treated as the
// frame's own (a counter kept in a global), as a local is.
ChangedNumber changing_number(const Variant& variant, const vm::GuardFailure& why,
                              const Segments& segments, const vm::FrameInputs& inputs) {
  const vm::GuardSet& guards = variant.trace().guards;
  if (why.index >= guards.size()) return {};
  const vm::Guard& g = guards[why.index];
  if (g.kind != vm::GuardKind::ConstantMatch || g.source < 0) return {};
  const auto& sources = guards.sources();
  const vm::SourceTable::Entry& entry = sources[g.source];
  const vm::SourceTable::Entry* root = &entry;
  bool in_frame = true;
  while (root->base >= 0) {
    using K = vm::Source::Kind;
    if (root->kind != K::Key && root->kind != K::Index && root->kind != K::DictValue) {
      in_frame = false;
    }
    root = &sources[root->base];
  }
  if (root->kind != vm::Source::Kind::Local && root->kind != vm::Source::Kind::Stack) {
    in_frame = false;
  }
  if (!in_frame && writes_global(segments, entry, inputs)) in_frame = true;
  // Only ints and floats are traced as opaque (TraceContext::wrap).
  PyObject* value = g.as<vm::ConstantMatchPayload>().value.get();
  if (!in_frame && (value == nullptr || !PyFloat_CheckExact(value))) return {};
  return {entry.text, in_frame};
}

// What dynvm keeps per code object, in the code object's co_extra slot.
struct CodeCache {
  uint64_t epoch = 0;
  bool skip = false;  // nothing worth compiling: CPython runs it
  std::shared_ptr<const frontend::CodeInfo> info;
  Segments segments;             // (variant_key, start)
  int return_value_offset = -1;  // a RETURN_VALUE, used to return through CPython
  // Locals and stack entries whose number changed between calls, in any part of the
  // code: traced as opaque from then on (a loop counter read after every break).
  std::set<std::string> dynamic_sources;
  // Floats read through attributes or keys, by source: how often each changed.
  std::map<std::string, int> float_changes;
  // Dynamic shapes: dimensions of input tensors whose size changed between calls, traced
  // symbolically from then on; fixed_sizes: a symbolic trace of this code could not be
  // guarded, so its traces keep fixed sizes.
  DynamicDims dynamic_dims;
  bool fixed_sizes = false;
  // The segment at the frame's start for the backend and mode used last: the hot path.
  Segment* entry_segment = nullptr;
  std::string entry_backend;
  std::string entry_mode;
};

CodeCache* cache_for(PyObject* code, bool create) {
  CodeCache* cache = vm::CodeExtra<CodeCache>::get(code, create);
  if (cache != nullptr && cache->epoch != current_epoch()) {  // dynvm.reset() since
    cache->entry_segment = nullptr;
    cache->segments.clear();
    cache->skip = false;
    cache->dynamic_dims.clear();
    cache->dynamic_sources.clear();
    cache->float_changes.clear();
    cache->fixed_sizes = false;
    cache->epoch = current_epoch();
  }
  return cache;
}

std::string code_name(PyObject* code) {
  auto* c = reinterpret_cast<PyCodeObject*>(code);
  return std::string(PyUnicode_AsUTF8(c->co_qualname)) + " (" + PyUnicode_AsUTF8(c->co_filename) +
         ":" + std::to_string(c->co_firstlineno) + ")";
}

std::string location(const frontend::CodeInfo& info, int index) {
  int line = info.instructions[static_cast<size_t>(index)].positions.line;
  return info.filename + ":" + std::to_string(line > 0 ? line : info.firstlineno);
}

vm::FrameInputs frame_inputs(frame::Frame* f) {
  vm::FrameInputs in;
  in.locals = frame::locals(f);
  in.local_count = frame::local_count(f);
  in.closure = reinterpret_cast<PyFunctionObject*>(frame::function(f))->func_closure;
  in.globals = frame::globals(f);
  in.builtins = frame::builtins(f);
  in.stack = frame::stack_base(f);
  in.stack_count = frame::stack_depth(f);
  return in;
}

// Continues the frame in CPython's evaluator at instruction `index`.
PyObject* resume_in_cpython(PyThreadState* ts, frame::Frame* f, const frontend::CodeInfo& info,
                            int index) {
  frame::set_next_instruction(
      f, static_cast<int>(info.instructions[static_cast<size_t>(index)].offset));
  return frame::eval_default(ts, f, 0);
}

// Raises the pending exception inside the frame at the instruction it is positioned at:
// the frame's own handlers run, or it unwinds, exactly as in CPython.
PyObject* raise_in_frame(PyThreadState* ts, frame::Frame* f) {
  return frame::eval_default(ts, f, 1);
}

// Makes the frame return `value` (stolen) through CPython's evaluator, which finishes the
// frame as it would any other (frame objects, the frame stack).
PyObject* return_through_cpython(PyThreadState* ts, frame::Frame* f, CodeCache& cache,
                                 PyObject* value) {
  const frontend::CodeInfo& info = *cache.info;
  int offset = cache.return_value_offset;
  if (offset < 0) {
    // No RETURN_VALUE (3.12 returning constants only): a RETURN_CONST of this very value.
    PyObject* consts = reinterpret_cast<PyCodeObject*>(frame::code(f))->co_consts;
    for (const frontend::Instruction& ins : info.instructions) {
      if (ins.norm.op == frontend::Op::Return && ins.norm.index >= 0 &&
          PyTuple_GET_ITEM(consts, ins.norm.index) == value) {
        Py_DECREF(value);
        frame::set_next_instruction(f, static_cast<int>(ins.offset));
        return frame::eval_default(ts, f, 0);
      }
    }
#if PY_VERSION_HEX < 0x030C0000
    return value;  // 3.11: the caller of the evaluator finishes the frame
#else
    Py_DECREF(value);
    PyErr_SetString(PyExc_SystemError, "dynvm: internal error: no instruction to return through");
    return nullptr;
#endif
  }
  while (frame::stack_depth(f) > 0) Py_XDECREF(frame::pop(f));
  frame::push(f, value);
  frame::set_next_instruction(f, offset);
  return frame::eval_default(ts, f, 0);
}

// Writes a variant's rebuilt state into the frame.
void write_state(frame::Frame* f, Variant::Outcome& outcome) {
  for (size_t i = 0; i < outcome.locals.size(); ++i) {
    if (outcome.keep_local[i]) continue;
    frame::set_local(f, static_cast<int>(i), outcome.locals[i].release());
  }
  while (frame::stack_depth(f) > 0) Py_XDECREF(frame::pop(f));
  for (PyRef& v : outcome.stack) frame::push(f, v.release());
}

void set_grad_mode(bool enabled) {
  if (grad_mode_enabled() != enabled) set_grad_mode_enabled(enabled);
}

// Finds the variant whose guards hold, tracing a new one on a miss. nullptr: run eagerly
// from `start`. Sets an error (and returns nullptr with *failed) under fullgraph.
Variant* find_or_trace(CodeCache& cache, Segment& segment, frame::Frame* f, int start,
                       const CompileOptions& options, GlueValues* checked, bool* failed) {
  // Guards re-read attributes, which may run Python code (a class's own __getattribute__):
  // that code runs plainly, or a frame of this very code could re-enter here while its
  // variants are being checked.
  HookPause pause;
  vm::FrameInputs inputs = frame_inputs(f);
  auto& variants = segment.variants;
  if (t_explanation != nullptr && segment.explain_call != t_explain_call) {
    // explain traces every part again, once per call: a loop that breaks on each of its
    // iterations reuses what its first iteration traced, as compiled code does.
    variants.clear();
    segment.gave_up = false;
    segment.explain_call = t_explain_call;
  }
  for (size_t i = 0; i < variants.size(); ++i) {
    if (!variants[i]->guards_hold(inputs, nullptr, checked)) continue;
    if (i != 0) std::swap(variants[0], variants[i]);  // most recently hit first
    ++counters().cache_hits;
    ++run_report().cache_hits;
    return variants[0].get();
  }
  if (segment.gave_up) return nullptr;
  PyObject* code = frame::code(f);
  if (!variants.empty()) {
    vm::GuardFailure why;
    variants[0]->guards_hold(inputs, &why);
    std::string failing = vm::to_string(why);
    // A number that differs from what some variant (not only the latest: a loop's resume
    // point has one per iteration) held constant is traced as opaque from now on.
    std::set<std::string> changed;
    for (size_t i = 0; i < variants.size(); ++i) {
      vm::GuardFailure failure;
      if (i == 0) {
        failure = why;
      } else {
        variants[i]->guards_hold(inputs, &failure);
      }
      ChangedNumber changing = changing_number(*variants[i], failure, cache.segments, inputs);
      if (changing.source.empty()) continue;
      // A float outside the frame: a value that changed once (a milestone) is better
      // served by a second constant variant; one that keeps changing goes opaque.
      if (!changing.in_frame && (i != 0 || ++cache.float_changes[changing.source] < 2)) continue;
      if (cache.dynamic_sources.insert(changing.source).second) changed.insert(changing.source);
    }
    // A tensor whose sizes changed: those dimensions are symbolic in the next trace, which
    // serves every size. The variants that fixed them stay (at most one a dimension went
    // dynamic after): they still serve their own size, which the symbolic variant's
    // relations may exclude.
    if (options.dynamic == -1 && !cache.fixed_sizes) {
      add_changed_dims(*variants[0], why, inputs, &cache.dynamic_dims);
    }
    for (const std::string& changing : changed) {
      // Variants that hold the number as a constant only serve that one value again: the
      // next trace reads it as opaque and serves every value, so they go (or, one per
      // changed number and resume point, they would fill the cache up to its limit).
      for (auto& [key, other] : cache.segments) {
        std::erase_if(other.variants, [&](const std::unique_ptr<Variant>& v) {
          return guards_constant(*v, changing);
        });
      }
    }
    ++counters().recompiles;
    run_report().recompiles.push_back({code_name(code), failing});
    if (log_enabled("recompiles")) {
      std::fprintf(stderr, "dynvm: recompiling %s: %s\n", code_name(code).c_str(), failing.c_str());
    }
    if (static_cast<int>(variants.size()) >= options.cache_size_limit) {
      segment.gave_up = true;
      bool any_graph = false;
      for (const auto& v : variants) any_graph = any_graph || v->op_count() > 0;
      if (!any_graph) return nullptr;  // nothing was compiled here anyway: no warning
      PyRef message = PyRef::steal(PyUnicode_FromFormat(
          "dynvm: %s was recompiled %d times (cache_size_limit); it runs eagerly from now "
          "on. The guard that kept failing: %s",
          code_name(code).c_str(), options.cache_size_limit, failing.c_str()));
      if (PyErr_WarnEx(PyExc_RuntimeWarning, PyUnicode_AsUTF8(message.get()), 1) < 0) {
        *failed = true;
      }
      return nullptr;
    }
  }
  CompileProgress progress(start == 0 ? code_name(code)
                                      : code_name(code) + " from " + location(*cache.info, start));
  vm::FrameStart fs;
  fs.function = frame::function(f);
  fs.start = start;
  int nlocals = frame::local_count(f);
  int argcount = start == 0 ? cache.info->total_argcount() : nlocals;
  fs.locals.assign(frame::locals(f), frame::locals(f) + argcount);
  fs.stack.assign(frame::stack_base(f), frame::stack_base(f) + frame::stack_depth(f));
  vm::Trace trace;
  {
    auto t0 = Clock::now();  // the hook is paused (above)
    vm::TraceOptions trace_options;
    trace_options.dynamic_sources = cache.dynamic_sources;
    if (options.dynamic != 0 && !cache.fixed_sizes) {
      trace_options.all_dims_dynamic = options.dynamic == 1;
      trace_options.dynamic_dims = cache.dynamic_dims;
      trace_options.marked_tensors = reaches_marked_tensor(fs.locals);
    }
    trace = vm::trace_frame(fs, trace_options);
    if (!trace.symbolic_failure.empty()) {
      // Sizes the trace branched on in a way dynvm cannot guard: fixed sizes from now on.
      if (log_enabled("recompiles")) {
        std::fprintf(stderr, "dynvm: %s keeps fixed sizes: %s\n", code_name(code).c_str(),
                     trace.symbolic_failure.c_str());
      }
      cache.fixed_sizes = true;
      trace_options.all_dims_dynamic = false;
      trace_options.dynamic_dims.clear();
      trace_options.marked_tensors = false;
      trace = vm::trace_frame(fs, trace_options);
    }
    run_report().trace_ns += nanoseconds_since(t0);
  }
  if (trace.graph_break) {
    ++counters().graph_breaks;
    const vm::GraphBreakInfo& b = *trace.graph_break;
    run_report().add_break(b.reason, b.filename, b.lineno);
    if (log_enabled("breaks")) {
      std::fprintf(stderr, "dynvm: graph break in %s: %s (at %s:%d)\n", code_name(code).c_str(),
                   b.reason.c_str(), b.filename.c_str(), b.lineno);
    }
    if (options.fullgraph) {
      set_graph_break_error(code_name(code), b);
      *failed = true;
      return nullptr;
    }
  }
  size_t ops = trace.graph.num_nodes();
  if (t_explanation != nullptr) {
    if (trace.graph_break) t_explanation->breaks.push_back(*trace.graph_break);
    if (ops > 0) {
      t_explanation->graphs.push_back(graph::to_text(trace.graph));
      t_explanation->ops_per_graph.push_back(ops);
    }
    for (const std::string& line : trace.guards.lines()) t_explanation->guards.push_back(line);
  }
  bool returns_plainly = !trace.graph_break && trace.side_effects.empty();
  if (ops > 0) {
    ++counters().frames_traced;
    run_report().frames_compiled.insert(code_name(code));
    RunReport::Graph entry{code_name(code), location(*cache.info, start), ops, {}, {}};
    for (size_t i = 0; i < trace.graph.symbols().size(); ++i) {
      entry.symbols.push_back("s" + std::to_string(i) + " = " + trace.graph.symbols()[i].source);
    }
    for (const graph::SymRelation& r : trace.graph.relations()) {
      entry.relations.push_back(r.to_string());
    }
    run_report().graphs.push_back(std::move(entry));
    if (log_enabled("graph")) {
      std::fprintf(stderr, "dynvm: graph of %s from %s\n%s\n", code_name(code).c_str(),
                   location(*cache.info, start).c_str(), graph::to_text(trace.graph).c_str());
    }
    if (log_enabled("guards")) {
      std::fprintf(stderr, "dynvm: guards of %s\n%s", code_name(code).c_str(),
                   trace.guards.to_string().c_str());
    }
  }
  if (start == 0 && variants.empty() && ops == 0 && returns_plainly && !options.fullgraph &&
      t_explanation == nullptr) {
    cache.skip = true;  // plain Python: nothing to compile, and CPython is faster at it
    return nullptr;
  }
  const std::string where = code_name(code) + " from " + location(*cache.info, start);
  progress.compiling();
  auto variant = Variant::build(std::move(trace), options.backend, options.mode, where);
  if (!variant) {
    // The backend cannot run this graph: this part runs eagerly under these guards.
    ++counters().graph_breaks;
    if (log_enabled("breaks")) {
      std::fprintf(stderr, "dynvm: %s runs eagerly: %s\n", where.c_str(),
                   variant.error().message.c_str());
    }
    run_report().add_break(variant.error().message, cache.info->filename,
                           cache.info->instructions[static_cast<size_t>(start)].positions.line);
    if (options.fullgraph) {
      set_graph_break_error(code_name(code), vm::GraphBreakInfo{variant.error().message, "", 0});
      *failed = true;
    }
    return nullptr;
  }
  variants.insert(variants.begin(), std::move(variant).value());
  std::string cuda_graph = variants[0]->cuda_graph_note();
  if (!cuda_graph.empty()) {
    if (t_explanation != nullptr) t_explanation->cuda_graphs.push_back(cuda_graph);
    if (cuda_graph.starts_with("not ")) {
      run_report().cuda_graphs.push_back({where, cuda_graph});
      if (log_enabled("cudagraphs")) {
        std::fprintf(stderr, "dynvm: %s: %s\n", where.c_str(), cuda_graph.c_str());
      }
    }
  }
  counters().kernels += static_cast<int64_t>(variants[0]->kernel_count());
  if (const codegen::CompiledBackward* backward = variants[0]->compiled_backward()) {
    Counters& c = counters();
    ++c.compiled_backwards;
    c.saved_bytes += backward->info.saved_bytes;
    c.saved_bytes_without_recompute += backward->info.saved_bytes_without_recompute;
    c.forward_compile_us += static_cast<int64_t>(backward->forward_compile_ms * 1e3);
    c.backward_compile_us += static_cast<int64_t>(backward->backward_compile_ms * 1e3);
    if (log_enabled("perf")) {
      std::fprintf(stderr,
                   "dynvm: %s from %s: compiled backward: forward %.1f ms, backward %.1f ms to "
                   "compile; %lld bytes saved for the backward (%lld without recomputation, %zu "
                   "nodes recomputed)\n",
                   code_name(code).c_str(), location(*cache.info, start).c_str(),
                   backward->forward_compile_ms, backward->backward_compile_ms,
                   static_cast<long long>(backward->info.saved_bytes),
                   static_cast<long long>(backward->info.saved_bytes_without_recompute),
                   backward->info.recomputed_nodes);
    }
  }
  if (ops > 0) write_graph_files(code_name(code), location(*cache.info, start), *variants[0]);
  if (log_enabled("kernels") && options.backend == "dynvm" && ops > 0) {
    std::string why = variants[0]->why_not_fused();
    std::string no_backward = variants[0]->why_no_compiled_backward();
    std::string note = why.empty() ? "" : "; ran op by op: " + why;
    if (!no_backward.empty()) {
      note += why.empty() ? "; no compiled backward (the backward recomputes the graph): "
                          : "; no compiled backward: ";
      note += no_backward;
    }
    std::fprintf(stderr, "dynvm: %s from %s: %zu kernels%s\n", code_name(code).c_str(),
                 location(*cache.info, start).c_str(), variants[0]->kernel_count(), note.c_str());
  }
  return variants[0].get();
}

}  // namespace

bool time_cached_variant(PyObject* function, PyObject* args, const std::string& backend,
                         int iterations, int run_iterations, VariantTiming* out) {
  auto fail = [](const char* why) {
    PyErr_SetString(PyExc_ValueError, why);
    return false;
  };
  if (!PyFunction_Check(function) || !PyTuple_Check(args) || iterations <= 0) {
    return fail("time_cached_variant(function, args: tuple, backend, iterations > 0)");
  }
  auto* fn = reinterpret_cast<PyFunctionObject*>(function);
  CodeCache* cache = cache_for(fn->func_code, false);
  if (cache == nullptr) return fail("the function has not been compiled and called yet");
  auto found = cache->segments.find({backend, 0});
  if (found == cache->segments.end()) return fail("no variant for this backend");
  auto* code = reinterpret_cast<PyCodeObject*>(fn->func_code);
  std::vector<PyObject*> locals(static_cast<size_t>(code->co_nlocalsplus), nullptr);
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args) && i < code->co_nlocalsplus; ++i) {
    locals[static_cast<size_t>(i)] = PyTuple_GET_ITEM(args, i);
  }
  vm::FrameInputs inputs;
  inputs.locals = locals.data();
  inputs.local_count = static_cast<int>(locals.size());
  inputs.closure = fn->func_closure;
  inputs.globals = fn->func_globals;
  inputs.builtins = PyEval_GetBuiltins();
  Variant* variant = nullptr;
  for (const auto& v : found->second.variants) {
    if (v->guards_hold(inputs) && !v->breaks()) variant = v.get();
  }
  if (variant == nullptr) return fail("no cached variant without a break accepts these arguments");
  auto t0 = Clock::now();
  int held = 0;
  for (int i = 0; i < iterations; ++i) held += variant->guards_hold(inputs) ? 1 : 0;
  out->guards_ns = static_cast<double>(nanoseconds_since(t0)) / iterations;
  if (held != iterations) return fail("the guards stopped holding");
  out->guard_count = variant->trace().guards.size();
  out->guards_compiled = variant->guards_compiled();
  out->guards_compile_ms = variant->guards_compile_milliseconds();
  t0 = Clock::now();
  for (int i = 0; i < iterations; ++i) {
    held += vm::guards_hold(variant->trace().guards, inputs) ? 1 : 0;
  }
  out->interpreted_guards_ns = static_cast<double>(nanoseconds_since(t0)) / iterations;
  if (held != 2 * iterations) return fail("the guards stopped holding");
  if (run_iterations <= 0) return true;
  t0 = Clock::now();
  for (int i = 0; i < run_iterations; ++i) {
    PyObject* r = variant->run(inputs);
    if (r == nullptr) return false;
    Py_DECREF(r);
  }
  out->run_ns = static_cast<double>(nanoseconds_since(t0)) / run_iterations;
  return true;
}

ExplainRecorder::ExplainRecorder(Explanation* out)
    : saved_(t_explanation), saved_call_(t_explain_call) {
  t_explanation = out;
  static std::atomic<uint64_t> calls{0};
  t_explain_call = ++calls;
}
ExplainRecorder::~ExplainRecorder() {
  t_explanation = saved_;
  t_explain_call = saved_call_;
}

bool code_is_skipped(PyObject* code) {
  CodeCache* cache = cache_for(code, false);
  return cache != nullptr && cache->skip;
}

PyObject* drive_frame(PyThreadState* ts, frame::Frame* f, const CompileOptions& options) {
  PyObject* code = frame::code(f);
  CodeCache* cache = cache_for(code, true);
  if (cache == nullptr || (cache->skip && t_explanation == nullptr)) {
    return frame::eval_default(ts, f, 0);
  }
  if (!cache->info) {
    cache->info = vm::decoded_code(code);
    if (!cache->info) {
      cache->skip = true;
      return frame::eval_default(ts, f, 0);
    }
    for (const frontend::Instruction& ins : cache->info->instructions) {
      if (ins.norm.op == frontend::Op::Return && ins.norm.index < 0) {
        cache->return_value_offset = static_cast<int>(ins.offset);
      }
    }
  }
  const frontend::CodeInfo& info = *cache->info;
  int start = 0;
  while (true) {
    Segment* segment_ptr;
    if (start == 0 && cache->entry_segment != nullptr && cache->entry_backend == options.backend &&
        cache->entry_mode == options.mode) {
      segment_ptr = cache->entry_segment;
    } else {
      segment_ptr = &cache->segments[{options.variant_key(), start}];
      if (start == 0) {
        cache->entry_segment = segment_ptr;
        cache->entry_backend = options.backend;
        cache->entry_mode = options.mode;
      }
    }
    Segment& segment = *segment_ptr;
    bool failed = false;
    GlueValues checked;  // what the compiled guards read, for the graph's inputs
    Variant* variant = find_or_trace(*cache, segment, f, start, options, &checked, &failed);
    if (failed) {
      // fullgraph (or a warning turned into an error): raised where the part starts.
      frame::set_raising_instruction(
          f, static_cast<int>(info.instructions[static_cast<size_t>(start)].offset));
      return raise_in_frame(ts, f);
    }
    if (variant == nullptr || variant->eager()) {
      if (start == 0) return frame::eval_default(ts, f, 0);
      return resume_in_cpython(ts, f, info, start);
    }
    Variant::Outcome outcome;
    bool ran;
    {
      HookPause pause;
      auto t0 = Clock::now();
      ran = variant->run(frame_inputs(f), &outcome, &checked);
      checked.release();
      run_report().run_ns += nanoseconds_since(t0);
    }
    if (!ran) {
      // The graph failed (an error the trace could not foresee): this part runs eagerly,
      // which raises the error as plain Python would.
      ++counters().graph_failures;
      if (log_enabled("breaks")) {
        PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
        PyErr_Fetch(&type, &value, &tb);
        PyRef text = PyRef::steal(value != nullptr ? PyObject_Str(value) : nullptr);
        std::fprintf(stderr, "dynvm: the graph of %s from %s failed; running it eagerly: %s\n",
                     code_name(frame::code(f)).c_str(), location(info, start).c_str(),
                     text ? PyUnicode_AsUTF8(text.get()) : "?");
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
      }
      PyErr_Clear();
      if (start == 0) return frame::eval_default(ts, f, 0);
      return resume_in_cpython(ts, f, info, start);
    }
    const vm::Trace& trace = variant->trace();
    set_grad_mode(trace.grad_enabled_at_exit);
    if (!trace.resume) return return_through_cpython(ts, f, *cache, outcome.value.release());
    write_state(f, outcome);
    const vm::ResumePoint& resume = *trace.resume;
    StepResult step = execute_instruction(ts, f, info, resume.instruction);
    switch (step.kind) {
      case StepResult::Kind::Continue:
        start = step.next;
        continue;
      case StepResult::Kind::Raised:
        return raise_in_frame(ts, f);
      case StepResult::Kind::NotHandled:
        return resume_in_cpython(ts, f, info, resume.resume_index);
    }
  }
}

}  // namespace dynvm::runtime
