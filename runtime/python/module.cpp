// dynvm._C: the extension module behind the dynvm Python package.
#include <Python.h>

#include <string>

#include "compiled_function_type.h"
#include "dynvm/codegen/cpu_jit.h"
#include "dynvm/codegen/cuda_kernel.h"
#include "dynvm/codegen/targets.h"
#include "dynvm/dynvm.h"
#include "dynvm/frontend/live_listing.h"
#include "dynvm/graph/primitive_ops.h"
#include "dynvm/runtime/compiled_function.h"
#include "dynvm/vm/opcode_coverage.h"
#include "frame_hook_functions.h"
#include "wrapper_call.h"

namespace {

// counters() -> dict of the process-wide counters.
PyObject* module_counters(PyObject*, PyObject*) {
  const dynvm::runtime::Counters& c = dynvm::runtime::counters();
  return Py_BuildValue(
      "{s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L}", "frames_traced",
      (long long)c.frames_traced, "cache_hits", (long long)c.cache_hits, "graph_breaks",
      (long long)c.graph_breaks, "recompiles", (long long)c.recompiles, "eager_calls",
      (long long)c.eager_calls, "kernels", (long long)c.kernels, "graph_failures",
      (long long)c.graph_failures, "guard_glues", (long long)c.guard_glues, "glue_runs",
      (long long)c.glue_runs, "compiled_backwards", (long long)c.compiled_backwards, "saved_bytes",
      (long long)c.saved_bytes, "saved_bytes_without_recompute",
      (long long)c.saved_bytes_without_recompute, "forward_compile_us",
      (long long)c.forward_compile_us, "backward_compile_us", (long long)c.backward_compile_us);
}

// reset(): drops every compiled variant and zeroes the counters.
PyObject* module_reset(PyObject*, PyObject*) {
  dynvm::runtime::reset_all();
  Py_RETURN_NONE;
}

// dis_json(code) -> str: the `dynvm dis --json` listing of a live code object and the
// code objects nested in it, read through the live-code adapter.
PyObject* module_dis_json(PyObject*, PyObject* code) {
  if (!PyCode_Check(code)) {
    PyErr_SetString(PyExc_TypeError, "dis_json() expects a code object");
    return nullptr;
  }
  auto json = dynvm::frontend::live_dis_json(reinterpret_cast<PyCodeObject*>(code));
  if (!json) {
    PyErr_SetString(PyExc_ValueError, json.error().message.c_str());
    return nullptr;
  }
  return PyUnicode_FromStringAndSize(json->data(), static_cast<Py_ssize_t>(json->size()));
}

// Appends `item` (a new reference, nullptr after a failed build) to `list`; on failure
// drops both and returns false, the Python error set.
bool append_new(PyObject* list, PyObject* item) {
  if (item == nullptr || PyList_Append(list, item) < 0) {
    Py_XDECREF(item);
    Py_DECREF(list);
    return false;
  }
  Py_DECREF(item);
  return true;
}

// targets() -> list of dicts: each code-generation target, whether it is built and usable
// on this machine, and why not.
PyObject* module_targets(PyObject*, PyObject*) {
  PyObject* list = PyList_New(0);
  if (list == nullptr) return nullptr;
  for (dynvm::codegen::TargetInfo t : dynvm::codegen::targets()) {
    // The targets' report does not start LLVM; the core, which has, says whether its JIT
    // did start.
    if (t.name == "cpu" && t.built && !dynvm::codegen::cpu_jit_available()) {
      t.usable = false;
      t.why_unusable =
          "the LLVM JIT did not start: " + dynvm::codegen::cpu_jit_unavailable_reason();
    }
    PyObject* item = Py_BuildValue("{s:s,s:O,s:O,s:s,s:s}", "name", t.name.c_str(), "built",
                                   t.built ? Py_True : Py_False, "usable",
                                   t.usable ? Py_True : Py_False, "toolchain", t.toolchain.c_str(),
                                   "why_not", (t.built ? t.why_unusable : t.why_not).c_str());
    if (!append_new(list, item)) return nullptr;
  }
  return list;
}

// nvrtc_compilations() -> int: CUDA kernels this process compiled with NVRTC (the disk
// cache and the in-process cache answer the others).
PyObject* module_nvrtc_compilations(PyObject*, PyObject*) {
  return PyLong_FromLongLong(
      static_cast<long long>(dynvm::codegen::cuda_nvrtc_compilation_count()));
}

// primitive_ops() -> list of (operator, kind): the primitive operators fused kernels are
// made of ("aten::add.Tensor", "pointwise"), from the graph layer's one list.
PyObject* module_primitive_ops(PyObject*, PyObject*) {
  PyObject* list = PyList_New(0);
  if (list == nullptr) return nullptr;
  for (std::string_view op : dynvm::graph::primitive_ops()) {
    std::string_view kind = dynvm::graph::primitive_kind_name(dynvm::graph::primitive_kind(op));
    PyObject* item = Py_BuildValue("(ss)", std::string(op).c_str(), std::string(kind).c_str());
    if (!append_new(list, item)) return nullptr;
  }
  return list;
}

// opcode_coverage() -> list of dicts: for each base opcode the VM met in this process, how
// many instructions of it were executed while tracing, how many traces stopped on it (and
// of those, how many because the VM has no rule for it), and the stops' reasons.
PyObject* module_opcode_coverage(PyObject*, PyObject*) {
  PyObject* list = PyList_New(0);
  if (list == nullptr) return nullptr;
  for (const dynvm::vm::OpcodeCoverage& c : dynvm::vm::opcode_coverage()) {
    PyObject* reasons = PyDict_New();
    if (reasons == nullptr) {
      Py_DECREF(list);
      return nullptr;
    }
    for (const auto& [reason, count] : c.reasons) {
      PyObject* n = PyLong_FromUnsignedLongLong(count);
      if (n == nullptr || PyDict_SetItemString(reasons, reason.c_str(), n) < 0) {
        Py_XDECREF(n);
        Py_DECREF(reasons);
        Py_DECREF(list);
        return nullptr;
      }
      Py_DECREF(n);
    }
    std::string name(dynvm::frontend::opcode_name(c.opcode));
    PyObject* item =
        Py_BuildValue("{s:s,s:K,s:K,s:K,s:N}", "opcode", name.c_str(), "executed",
                      (unsigned long long)c.executed, "breaks", (unsigned long long)c.breaks,
                      "refused", (unsigned long long)c.refused, "reasons", reasons);
    if (!append_new(list, item)) return nullptr;
  }
  return list;
}

PyObject* module_reset_opcode_coverage(PyObject*, PyObject*) {
  dynvm::vm::reset_opcode_coverage();
  Py_RETURN_NONE;
}

PyMethodDef kMethods[] = {
    {"opcode_coverage", module_opcode_coverage, METH_NOARGS,
     "Per-opcode counts of what the VM traced, broke on and refused in this process."},
    {"reset_opcode_coverage", module_reset_opcode_coverage, METH_NOARGS,
     "Zero the opcode coverage counts."},
    {"primitive_ops", module_primitive_ops, METH_NOARGS,
     "The primitive operators of fused kernels, with their kinds."},
    {"nvrtc_compilations", module_nvrtc_compilations, METH_NOARGS,
     "CUDA kernels compiled with NVRTC in this process."},
    {"targets", module_targets, METH_NOARGS, "Code-generation targets: built, usable, why not."},
    {"dis_json", module_dis_json, METH_O, "The dis listing of a code object, as JSON."},
    {"counters", module_counters, METH_NOARGS, "The process-wide compilation counters."},
    {"reset", module_reset, METH_NOARGS, "Drop every compiled variant; zero the counters."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT,
                       "dynvm._C",
                       "dynvm's native core.",
                       -1,
                       kMethods,
                       nullptr,
                       nullptr,
                       nullptr,
                       nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__C(void) {
  PyObject* m = PyModule_Create(&kModule);  // new reference
  if (m == nullptr) return nullptr;
  // The exception class lives in Python (dynvm.errors) so that it exists before the
  // native core is loaded.
  PyObject* errors = PyImport_ImportModule("dynvm.errors");  // new reference
  PyObject* graph_break =
      errors != nullptr ? PyObject_GetAttrString(errors, "GraphBreakError") : nullptr;  // new
  Py_XDECREF(errors);
  if (PyModule_AddFunctions(m, const_cast<PyMethodDef*>(dynvm::runtime::kFrameHookMethods)) < 0 ||
      PyModule_AddStringConstant(m, "__version__", dynvm_version()) < 0 ||
      PyModule_AddObject(m, "has_vm", Py_NewRef(Py_True)) < 0 ||
      PyModule_AddObject(m, "has_codegen", Py_NewRef(Py_True)) < 0 ||
      PyModule_AddObject(m, "has_cpu_codegen",
                         Py_NewRef(dynvm::codegen::cpu_jit_available() ? Py_True : Py_False)) < 0 ||
      !dynvm::runtime::add_compiled_function_type(m) || !dynvm::runtime::add_wrapper_call(m) ||
      graph_break == nullptr ||
      PyModule_AddObject(m, "GraphBreakError", Py_NewRef(graph_break)) < 0) {
    Py_XDECREF(graph_break);
    Py_DECREF(m);
    return nullptr;
  }
  dynvm::runtime::set_graph_break_error_type(graph_break);
  Py_DECREF(graph_break);
  // A build with LLVM whose JIT does not start runs every CPU group through ATen: same
  // results, none of the speed. Said once, not left to the counters. (Not through
  // targets(), which would load NVRTC and the CUDA driver on every import.)
  if (std::string why = dynvm::codegen::cpu_jit_unavailable_reason(); !why.empty()) {
    std::string message = "dynvm: the CPU code generator (LLVM JIT) did not start: " + why +
                          "; fused CPU groups run through ATen instead (same results, slower)";
    if (PyErr_WarnEx(PyExc_RuntimeWarning, message.c_str(), 1) < 0) {
      Py_DECREF(m);
      return nullptr;
    }
  }
  return m;
}
