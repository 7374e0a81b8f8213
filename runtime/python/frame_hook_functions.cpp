// dynvm._C functions for the frame hook: where callees are not compiled, `dynvm run`'s
// whole-program compilation, and the run report.
#include "frame_hook_functions.h"

#include <string>
#include <vector>

#include "dynvm/codegen/cpu_jit.h"
#include "dynvm/codegen/cuda_kernel.h"
#include "dynvm/codegen/kernel_disk_cache.h"
#include "dynvm/runtime/frame_driver.h"
#include "dynvm/runtime/frame_hook.h"
#include "dynvm/runtime/graph_files.h"
#include "dynvm/runtime/run_report.h"

namespace dynvm::runtime {

namespace {

bool string_list(PyObject* seq, const char* what, std::vector<std::string>* out) {
  PyObject* fast = PySequence_Fast(seq, what);  // new
  if (fast == nullptr) return false;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast); ++i) {
    const char* s = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(fast, i));
    if (s == nullptr) {
      Py_DECREF(fast);
      return false;
    }
    out->emplace_back(s);
  }
  Py_DECREF(fast);
  return true;
}

// set_skip_prefixes(skips: list[str], keeps: list[str]): directories whose code is never
// compiled, and directories inside them whose code is (frame_hook.h).
PyObject* set_skip_prefixes(PyObject*, PyObject* args) {
  PyObject* skip_list = nullptr;
  PyObject* keep_list = nullptr;
  if (!PyArg_ParseTuple(args, "OO", &skip_list, &keep_list)) return nullptr;
  std::vector<std::string> skips;
  std::vector<std::string> keeps;
  if (!string_list(skip_list, "set_skip_prefixes expects lists of str", &skips) ||
      !string_list(keep_list, "set_skip_prefixes expects lists of str", &keeps)) {
    return nullptr;
  }
  set_default_skip_prefixes(std::move(skips), std::move(keeps));
  Py_RETURN_NONE;
}

// enable_global(backend, fullgraph, cache_size_limit, include, exclude, skip[, mode]): compile
// every frame of user code in every thread (dynvm run), leaving frames in `skip` directories
// (installed packages) to CPython.
PyObject* enable_global(PyObject*, PyObject* args) {
  const char* backend = nullptr;
  int fullgraph = 0;
  int limit = 8;
  PyObject* include = nullptr;
  PyObject* exclude = nullptr;
  PyObject* skip = nullptr;
  const char* mode = "default";
  if (!PyArg_ParseTuple(args, "spiOOO|s", &backend, &fullgraph, &limit, &include, &exclude, &skip,
                        &mode)) {
    return nullptr;
  }
  if (!valid_mode(mode)) return nullptr;
  CompileOptions options;
  options.backend = backend;
  options.mode = mode;
  options.fullgraph = fullgraph != 0;
  options.cache_size_limit = limit;
  FrameFilter filter;
  if (!string_list(include, "include must be a list of str", &filter.include) ||
      !string_list(exclude, "exclude must be a list of str", &filter.exclude) ||
      !string_list(skip, "skip must be a list of str", &filter.skip_prefixes)) {
    return nullptr;
  }
  enable_global_compilation(options, std::move(filter));
  Py_RETURN_NONE;
}

PyObject* disable_global(PyObject*, PyObject*) {
  disable_global_compilation();
  Py_RETURN_NONE;
}

// run_report() -> dict: what was compiled, where it broke, recompiles, CUDA graphs, time.
PyObject* report(PyObject*, PyObject*) {
  const RunReport& r = run_report();
  PyObject* frames = PyList_New(0);
  PyObject* graphs = PyList_New(0);
  PyObject* breaks = PyList_New(0);
  PyObject* recompiles = PyList_New(0);
  PyObject* cuda_graphs = PyList_New(0);
  if (!frames || !graphs || !breaks || !recompiles || !cuda_graphs) return nullptr;
  for (const std::string& f : r.frames_compiled) {
    PyObject* s = PyUnicode_FromString(f.c_str());
    PyList_Append(frames, s);
    Py_DECREF(s);
  }
  auto texts = [](const std::vector<std::string>& items) {
    PyObject* list = PyList_New(0);
    for (const std::string& item : items) {
      PyObject* text = PyUnicode_FromString(item.c_str());
      PyList_Append(list, text);
      Py_DECREF(text);
    }
    return list;
  };
  for (const RunReport::Graph& g : r.graphs) {
    PyObject* d = Py_BuildValue("{s:s,s:s,s:n,s:N,s:N}", "function", g.function.c_str(), "location",
                                g.location.c_str(), "ops", static_cast<Py_ssize_t>(g.ops),
                                "symbols", texts(g.symbols), "relations", texts(g.relations));
    PyList_Append(graphs, d);
    Py_DECREF(d);
  }
  for (const auto& [key, b] : r.breaks) {
    PyObject* d = Py_BuildValue("{s:s,s:s,s:i,s:L}", "reason", b.reason.c_str(), "filename",
                                b.filename.c_str(), "lineno", b.lineno, "count",
                                static_cast<long long>(b.count));
    PyList_Append(breaks, d);
    Py_DECREF(d);
  }
  for (const RunReport::Recompile& c : r.recompiles) {
    PyObject* d =
        Py_BuildValue("{s:s,s:s}", "function", c.function.c_str(), "guard", c.guard.c_str());
    PyList_Append(recompiles, d);
    Py_DECREF(d);
  }
  for (const RunReport::CudaGraph& c : r.cuda_graphs) {
    PyObject* d = Py_BuildValue("{s:s,s:s}", "graph", c.graph.c_str(), "note", c.note.c_str());
    PyList_Append(cuda_graphs, d);
    Py_DECREF(d);
  }
  // Kernels this process compiled, and those it reused from the disk cache (a second run
  // of a script compiles none): the CPU JIT's and NVRTC's.
  const long long compiled = static_cast<long long>(codegen::cpu_jit_compilation_count() +
                                                    codegen::cuda_nvrtc_compilation_count());
  const long long from_disk =
      static_cast<long long>(codegen::cpu_jit_disk_load_count() + codegen::cuda_disk_load_count());
  return Py_BuildValue("{s:N,s:N,s:N,s:N,s:N,s:L,s:d,s:d,s:L,s:L,s:s}", "frames_compiled", frames,
                       "graphs", graphs, "breaks", breaks, "recompiles", recompiles, "cuda_graphs",
                       cuda_graphs, "cache_hits", static_cast<long long>(r.cache_hits),
                       "trace_seconds", r.trace_ns * 1e-9, "run_seconds", r.run_ns * 1e-9,
                       "kernels_compiled", compiled, "kernels_from_disk", from_disk,
                       "kernel_cache_dir", codegen::default_kernel_cache_dir().c_str());
}

// time_cached_variant(function, args, backend, iterations, run_iterations=iterations) -> dict of
// the VariantTiming
PyObject* time_variant(PyObject*, PyObject* call_args) {
  PyObject* function = nullptr;
  PyObject* args = nullptr;
  const char* backend = nullptr;
  int iterations = 0;
  int run_iterations = -1;
  if (!PyArg_ParseTuple(call_args, "OO!si|i", &function, &PyTuple_Type, &args, &backend,
                        &iterations, &run_iterations)) {
    return nullptr;
  }
  if (run_iterations < 0) run_iterations = iterations;
  VariantTiming timing;
  if (!time_cached_variant(function, args, backend, iterations, run_iterations, &timing)) {
    return nullptr;
  }
  return Py_BuildValue("{s:d,s:d,s:d,s:n,s:O,s:d}", "guards_ns", timing.guards_ns,
                       "interpreted_guards_ns", timing.interpreted_guards_ns, "run_ns",
                       timing.run_ns, "guard_count", static_cast<Py_ssize_t>(timing.guard_count),
                       "guards_compiled", timing.guards_compiled ? Py_True : Py_False,
                       "guards_compile_ms", timing.guards_compile_ms);
}

// set_graphs_dir(path): write every compiled graph there as Graphviz (and SVG).
PyObject* graphs_dir(PyObject*, PyObject* arg) {
  const char* path = PyUnicode_AsUTF8(arg);
  if (path == nullptr) return nullptr;
  set_graphs_dir(path);
  Py_RETURN_NONE;
}

}  // namespace

const PyMethodDef kFrameHookMethods[] = {
    {"set_graphs_dir", graphs_dir, METH_O,
     "Write every compiled graph to this directory as Graphviz (and SVG)."},
    {"time_cached_variant", time_variant, METH_VARARGS,
     "Benchmarks: nanoseconds for the guards and for the graph of a cached variant."},
    {"set_skip_prefixes", set_skip_prefixes, METH_VARARGS,
     "Directories whose code compiled functions' callees do not compile."},
    {"enable_global", enable_global, METH_VARARGS, "Compile every frame of user code (dynvm run)."},
    {"disable_global", disable_global, METH_NOARGS, "Stop compiling every frame."},
    {"run_report", report, METH_NOARGS, "What was compiled, where it broke, and time spent."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace dynvm::runtime
