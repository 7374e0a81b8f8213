// libFuzzer target for the tracer: builds a code object from the input, makes it a function
// and traces one call of it with dynvm's VM (vm::trace_function), in an embedded CPython
// with torch, as the runtime and the C API do. The input layout, the seed functions, the
// argument values and the globals are in trace_fuzz_seeds.py; three modes make the code:
//   0  marshal data (any code object dynvm's marshal reader and CPython's both accept);
//   1  a seed function's code object with co_code (and its tables) from the input;
//   2  a seed's code object with instructions made by bytecode_generator.h: they decode,
//      and take operands that were pushed before them, as compiled code does.
//
// It fails on a crash, a sanitizer report, a hang (-timeout), a C++ exception out of the
// tracer, a Python exception left set, a graph break without a reason, a traced graph that
// graph::verify() rejects, and on CPython being asked to evaluate the traced code: the VM
// only traces. The code is never executed (CPython does not check bytecode and can crash on
// invalid code). A code object CPython itself refuses to build is skipped.
//
// Run (fuzz/run_fuzzer.sh does it as a CTest test; docs/fuzzing.md has the long run):
//   python3 fuzz/trace_fuzz_seeds.py CORPUS && build-asan/fuzz/trace_fuzzer CORPUS
#include <Python.h>
#include <marshal.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_set>
#include <vector>

#include "bytecode_generator.h"
#include "dynvm/frontend/decode.h"
#include "dynvm/frontend/dis_listing.h"
#include "dynvm/frontend/live_code.h"
#include "dynvm/frontend/marshal_reader.h"
#include "dynvm/graph/graph_printer.h"
#include "dynvm/graph/verify.h"
#include "dynvm/support/py_ref.h"
#include "dynvm/vm/trace.h"

// After dynvm's headers: frontend/opcode.h may not follow CPython's opcode macros.
#include <internal/pycore_code.h>
#include <internal/pycore_frame.h>

#ifndef DYNVM_PYTHON_EXECUTABLE
#error "DYNVM_PYTHON_EXECUTABLE: the Python whose torch the VM imports (fuzz/CMakeLists.txt)"
#endif

// The embedded interpreter and torch live until the process ends: LeakSanitizer would report
// all they hold. libFuzzer's own leak check is off for the same reason (-detect_leaks=0).
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }

namespace {

using dynvm::PyRef;
using dynvm::fuzz::ByteReader;

PyObject* g_seeds = nullptr;  // the trace_fuzz_seeds module
// TRACE_FUZZER_VERBOSE=1 prints each traced code object's listing and what its trace gave (a
// graph, or the break's reason).
const bool g_verbose = std::getenv("TRACE_FUZZER_VERBOSE") != nullptr;
// The code objects of the input being traced, which CPython must never evaluate.
std::unordered_set<PyObject*> g_traced_code;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "trace_fuzzer: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

[[noreturn]] void fail_with_python_error(const std::string& what) {
  PyErr_Print();
  fail(what);
}

// At start-up, the code of a probe function called once to show that the hook sees frames.
PyObject* g_probe_code = nullptr;
bool g_probe_seen = false;

// Every frame CPython evaluates passes here first.
PyObject* evaluate_frame(PyThreadState* thread, _PyInterpreterFrame* frame, int throwflag) {
  auto* code = reinterpret_cast<PyObject*>(frame->f_code);
  if (code == g_probe_code) g_probe_seen = true;
  if (g_traced_code.count(code) != 0) {
    PyObject* name = reinterpret_cast<PyCodeObject*>(code)->co_qualname;
    fail(std::string("CPython was asked to run the traced code (") +
         (name != nullptr && PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : "?") +
         "): the VM must only trace it");
  }
  return _PyEval_EvalFrameDefault(thread, frame, throwflag);
}

const char* kSetup = R"PY(
import sys, types
# The VM imports dynvm._tracing; the package's __init__ needs the extension module, which
# this build does not make (and an installed dynvm must not be mixed in): the package is a
# bare one over the source folder.
package = types.ModuleType("dynvm")
package.__path__ = [PACKAGE_DIR]
sys.modules["dynvm"] = package
sys.path.insert(0, FUZZ_DIR)
import torch
import dynvm._tracing
import trace_fuzz_seeds


class NoNewImports:
    """Refuses the imports traced code asks for (the VM imports from C, so no Python frame
    but the import machinery's own is on the stack) of modules not loaded yet."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        frame = sys._getframe(1)
        while frame is not None:
            if not frame.f_code.co_filename.startswith("<frozen importlib"):
                return None
            frame = frame.f_back
        raise ImportError("the tracer fuzzer imports no new module (%s)" % name)


def probe():
    return 1
)PY";

PyRef call_seeds(const char* function, PyObject* args) {
  PyRef fn = PyRef::steal(PyObject_GetAttrString(g_seeds, function));
  if (!fn) fail_with_python_error(std::string("trace_fuzz_seeds.") + function);
  return PyRef::steal(PyObject_CallObject(fn.get(), args));
}

PyRef bytes_of(const std::string& s) {
  return PyRef::steal(PyBytes_FromStringAndSize(s.data(), static_cast<Py_ssize_t>(s.size())));
}

// Mode 0: marshal data that dynvm's reader accepts first (CPython's is not made for
// untrusted data), then CPython's; `which` picks the traced one of its code objects.
PyRef code_from_marshal(ByteReader& in, uint8_t which) {
  const std::string data = in.rest();
  dynvm::frontend::MarshalReadOptions options;
  options.version = {PY_MAJOR_VERSION, PY_MINOR_VERSION};
  auto raw = dynvm::frontend::read_marshal_code(data, options);
  if (!raw) {
    if (raw.error().message.empty()) fail("a marshal error without a message");
    return PyRef();
  }
  PyRef code = PyRef::steal(
      PyMarshal_ReadObjectFromString(data.data(), static_cast<Py_ssize_t>(data.size())));
  if (!code || !PyCode_Check(code.get())) return PyRef();
  PyRef args = PyRef::steal(PyTuple_Pack(1, code.get()));
  PyRef all = call_seeds("code_objects", args.get());
  if (!all || PyList_GET_SIZE(all.get()) == 0) return PyRef();
  return PyRef::borrow(PyList_GET_ITEM(all.get(), which % PyList_GET_SIZE(all.get())));
}

// Mode 1: co_code and tables from the input on a seed's code object.
PyRef code_from_raw_bytes(ByteReader& in, uint8_t seed, uint8_t flags) {
  const std::string co_code = in.bytes(in.u16());
  PyRef table = (flags & 2) ? bytes_of(in.bytes(in.byte())) : PyRef::borrow(Py_None);
  PyRef lines = (flags & 4) ? bytes_of(in.rest()) : PyRef::borrow(Py_None);
  PyRef args = PyRef::steal(Py_BuildValue("(iOOOO)", seed, (flags & 1) ? Py_True : Py_False,
                                          bytes_of(co_code).get(), table.get(), lines.get()));
  return call_seeds("replace", args.get());
}

// Mode 2: generated instructions on a seed's code object.
PyRef code_from_generator(ByteReader& in, uint8_t seed, uint8_t flags) {
  PyRef args = PyRef::steal(Py_BuildValue("(iO)", seed, (flags & 1) ? Py_True : Py_False));
  PyRef shape_tuple = call_seeds("shape", args.get());
  if (!shape_tuple) fail_with_python_error("trace_fuzz_seeds.shape");
  dynvm::fuzz::CodeShape shape;
  shape.version = {PY_MAJOR_VERSION, PY_MINOR_VERSION};
  shape.consts = PyLong_AsSize_t(PyTuple_GET_ITEM(shape_tuple.get(), 0));
  shape.names = PyLong_AsSize_t(PyTuple_GET_ITEM(shape_tuple.get(), 1));
  shape.localsplus = PyLong_AsSize_t(PyTuple_GET_ITEM(shape_tuple.get(), 2));
  PyObject* prologue = PyTuple_GET_ITEM(shape_tuple.get(), 3);
  shape.prologue.assign(PyBytes_AS_STRING(prologue),
                        static_cast<size_t>(PyBytes_GET_SIZE(prologue)));
  shape.firstlineno = static_cast<int>(PyLong_AsLong(PyTuple_GET_ITEM(shape_tuple.get(), 4)));
  const uint8_t count = in.byte();
  dynvm::fuzz::GeneratedCode code =
      dynvm::fuzz::generate_code(shape, in, count == 0 ? 128 : count, /*terminate=*/!(flags & 4),
                                 /*exception_table=*/flags & 2);
  PyRef replace_args = PyRef::steal(
      Py_BuildValue("(iOOOO)", seed, (flags & 1) ? Py_True : Py_False, bytes_of(code.code).get(),
                    bytes_of(code.exceptiontable).get(), bytes_of(code.linetable).get()));
  return call_seeds("replace", replace_args.get());
}

// The traced code as dis lists it, read by dynvm's own frontend (CPython's co_code getter
// is not safe on every code object the fuzzer makes).
void print_listing(PyObject* code) {
  auto raw = dynvm::frontend::raw_code_from_live(reinterpret_cast<PyCodeObject*>(code));
  auto decoded = raw ? dynvm::frontend::decode_recursive(**raw)
                     : dynvm::Expected<dynvm::frontend::CodeInfo>(raw.error());
  std::fprintf(stderr, "%s\n",
               decoded ? dynvm::frontend::format_dis_text(*decoded).c_str()
                       : ("(not decoded: " + decoded.error().message + ")").c_str());
}

void trace(PyObject* code, const std::string& selectors, uint8_t flags) {
  PyRef args = PyRef::steal(PyTuple_Pack(2, code, bytes_of(selectors).get()));
  PyRef made = call_seeds("make_function", args.get());
  if (!made) {
    if (g_verbose) PyErr_Print();
    PyErr_Clear();  // CPython would not make a function of it either
    return;
  }
  PyObject* function = PyTuple_GET_ITEM(made.get(), 0);
  PyObject* values = PyTuple_GET_ITEM(made.get(), 1);
  std::vector<PyObject*> arguments;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(values); ++i) {
    arguments.push_back(PyList_GET_ITEM(values, i));
  }
  PyRef code_args = PyRef::steal(PyTuple_Pack(1, code));
  PyRef codes = call_seeds("code_objects", code_args.get());
  if (!codes) fail_with_python_error("trace_fuzz_seeds.code_objects");
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(codes.get()); ++i) {
    g_traced_code.insert(PyList_GET_ITEM(codes.get(), i));
  }

  // The budget of executed instructions (a loop is unrolled until it runs out) is far below
  // the runtime's 2,000,000: an unrolled loop of tensor operations on fake tensors costs about
  // a millisecond an instruction under the sanitizers, and a trace that breaks is made twice.
  dynvm::vm::TraceOptions options;
  options.max_instructions = (flags & 16) ? 100 : 1000;
  options.all_dims_dynamic = (flags & 8) != 0;
  if (g_verbose) print_listing(code);
  dynvm::vm::Trace result = dynvm::vm::trace_function(function, arguments, options);
  g_traced_code.clear();

  if (PyErr_Occurred()) fail_with_python_error("the trace left a Python exception set");
  if (result.graph_break) {
    if (result.graph_break->reason.empty()) fail("a graph break without a reason");
  } else {
    std::vector<dynvm::Error> errors = dynvm::graph::verify(result.graph);
    if (!errors.empty()) {
      fail("the traced graph is invalid: " + errors.front().message + "\n" +
           dynvm::graph::to_text(result.graph));
    }
  }
  const std::string graph = dynvm::graph::to_text(result.graph);
  const std::string guards = result.guards.to_string();
  if (g_verbose) {
    PyObject* name = reinterpret_cast<PyCodeObject*>(code)->co_qualname;
    std::fprintf(
        stderr, "trace_fuzzer: %s: %s\n", PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : "?",
        result.graph_break ? ("break: " + result.graph_break->reason).c_str()
                           : ("graph of " + std::to_string(result.graph.num_nodes()) + " nodes, " +
                              std::to_string(guards.size()) + " bytes of guards")
                                 .c_str());
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  // Python objects from the C allocator, so that AddressSanitizer sees the VM use one after
  // it was freed (pymalloc's pools hide that).
  PyPreConfig preconfig;
  PyPreConfig_InitPythonConfig(&preconfig);
  preconfig.allocator = PYMEM_ALLOCATOR_MALLOC;
  PyStatus prestatus = Py_PreInitialize(&preconfig);
  if (PyStatus_Exception(prestatus)) fail("cannot pre-initialize Python");

  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  config.install_signal_handlers = 0;  // libFuzzer's own handle SIGINT, SIGALRM, ...
  config.parse_argv = 0;
  // Path configuration as the project's Python computes it (its site-packages hold torch).
  PyStatus status = PyConfig_SetBytesString(&config, &config.program_name, DYNVM_PYTHON_EXECUTABLE);
  if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status))
    fail(std::string("cannot start Python: ") + (status.err_msg ? status.err_msg : "?"));

  PyObject* main_module = PyImport_AddModule("__main__");  // borrowed
  PyObject* ns = PyModule_GetDict(main_module);            // borrowed
  PyRef package_dir = PyRef::steal(PyUnicode_FromString(DYNVM_PYTHON_PACKAGE_DIR));
  PyRef fuzz_dir = PyRef::steal(PyUnicode_FromString(DYNVM_FUZZ_DIR));
  PyDict_SetItemString(ns, "PACKAGE_DIR", package_dir.get());
  PyDict_SetItemString(ns, "FUZZ_DIR", fuzz_dir.get());
  PyRef done = PyRef::steal(PyRun_String(kSetup, Py_file_input, ns, ns));
  if (!done) fail_with_python_error("setting up Python, torch and dynvm._tracing");
  g_seeds = PyDict_GetItemString(ns, "trace_fuzz_seeds");  // borrowed; the dict keeps it

  // Each seed traced once, so that what the VM and torch load lazily is loaded before
  // imports are refused and before the clock of the first input starts.
  PyRef seeds = PyRef::steal(PyObject_GetAttrString(g_seeds, "SEEDS"));
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(seeds.get()); ++i) {
    PyObject* fn = PyList_GET_ITEM(seeds.get(), i);
    PyRef code = PyRef::steal(PyObject_GetAttrString(fn, "__code__"));
    trace(code.get(), std::string("\x0f\x01\x0b\x14", 4), 0);
  }
  PyRef installed =
      PyRef::steal(PyRun_String("sys.meta_path.insert(0, NoNewImports)", Py_file_input, ns, ns));
  if (!installed) fail_with_python_error("installing the import guard");
  _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), evaluate_frame);
  PyObject* probe = PyDict_GetItemString(ns, "probe");  // borrowed
  g_probe_code = PyFunction_GET_CODE(probe);
  PyRef one = PyRef::steal(PyObject_CallNoArgs(probe));
  g_probe_code = nullptr;
  if (!one || !g_probe_seen) fail("the frame evaluation hook did not see a Python call");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  const uint8_t mode = in.byte() % 3;
  const uint8_t which = in.byte();
  const uint8_t flags = in.byte();
  const std::string selectors = in.bytes(4);
  PyRef code;
  switch (mode) {
    case 0:
      code = code_from_marshal(in, which);
      break;
    case 1:
      code = code_from_raw_bytes(in, which, flags);
      break;
    default:
      code = code_from_generator(in, which, flags);
      break;
  }
  if (!code || !PyCode_Check(code.get())) {
    if (g_verbose && PyErr_Occurred()) PyErr_Print();
    PyErr_Clear();  // CPython refused to build it: nothing to trace
    return 0;
  }
  trace(code.get(), selectors.empty() ? std::string(1, '\0') : selectors, flags);
  return 0;
}
