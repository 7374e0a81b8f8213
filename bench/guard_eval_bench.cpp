// Measures guards_hold on the guard set of a small traced function (two tensor arguments, an
// int, a global module and torch) and prints nanoseconds per call.
#include <Python.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "dynvm/support/py_ref.h"
#include "dynvm/vm/guard.h"
#include "dynvm/vm/guard_eval.h"

using dynvm::PyRef;
using dynvm::vm::GuardSet;
using dynvm::vm::Source;

namespace {

// The traced function would be:  def f(x, y, n): return model(x + y) * n
constexpr const char* kProgram = R"(
import torch
model = torch.nn.Linear(8, 4)
x = torch.randn(2, 8)
y = torch.randn(2, 8)
n = 3
)";

void start_python() {
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  PyStatus status = PyConfig_SetBytesString(&config, &config.program_name, DYNVM_PYTHON_EXECUTABLE);
  if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status)) {
    std::fprintf(stderr, "cannot start Python\n");
    std::exit(1);
  }
}

PyObject* must(PyObject* object) {  // passes a new reference through; exits on error
  if (object == nullptr) {
    PyErr_Print();
    std::exit(1);
  }
  return object;
}

template <typename T>
void require(const dynvm::Expected<T>& added) {
  if (!added) {
    std::fprintf(stderr, "guard: %s\n", added.error().message.c_str());
    std::exit(1);
  }
}

// CPU time of this thread in nanoseconds: unlike wall time, not inflated when the machine is
// busy with other work.
double thread_cpu_ns() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e9 + static_cast<double>(now.tv_nsec);
}

// Nanoseconds (thread CPU time) per guards_hold call over `iterations` calls, the best of
// five rounds.
double time_checks(const GuardSet& guards, const dynvm::vm::FrameInputs& inputs, bool expected,
                   long iterations) {
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    double start = thread_cpu_ns();
    for (long i = 0; i < iterations; ++i) {
      if (dynvm::vm::guards_hold(guards, inputs) != expected) {
        std::fprintf(stderr, "unexpected verdict\n");
        std::exit(1);
      }
    }
    best = std::min(best, (thread_cpu_ns() - start) / static_cast<double>(iterations));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  long iterations = argc > 1 ? std::atol(argv[1]) : 1000000;
  start_python();
  PyRef ns = PyRef::steal(must(PyDict_New()));
  PyDict_SetItemString(ns.get(), "__builtins__", PyEval_GetBuiltins());
  PyRef done = PyRef::steal(must(PyRun_String(kProgram, Py_file_input, ns.get(), ns.get())));
  auto get = [&](const char* name) { return PyDict_GetItemString(ns.get(), name); };  // borrowed

  GuardSet guards;
  {
    auto x = Source::local("x", 0);
    auto y = Source::local("y", 1);
    auto n = Source::local("n", 2);
    auto model = Source::global("model");
    require(guards.add_tensor_match(x, get("x")));
    require(guards.add_tensor_match(y, get("y")));
    require(guards.add_constant_match(n, get("n")));
    require(guards.add_id_match(Source::global("torch"), get("torch")));
    require(guards.add_id_match(model, get("model")));
    require(guards.add_module_dict_version(model, get("model")));
    require(guards.add_no_hooks(model, get("model")));  // + NO_GLOBAL_HOOKS
    PyRef weight =
        PyRef::steal(must(PyRun_String("model.weight", Py_eval_input, ns.get(), ns.get())));
    PyRef bias = PyRef::steal(must(PyRun_String("model.bias", Py_eval_input, ns.get(), ns.get())));
    require(guards.add_tensor_match(
        Source::module_member(Source::Kind::ModuleParam, model, "weight"), weight.get()));
    require(guards.add_tensor_match(Source::module_member(Source::Kind::ModuleParam, model, "bias"),
                                    bias.get()));
    guards.add_grad_mode(true);
    guards.add_default_dtype();
  }
  std::vector<PyObject*> locals = {get("x"), get("y"), get("n")};  // borrowed
  dynvm::vm::FrameInputs inputs;
  inputs.locals = locals.data();
  inputs.local_count = static_cast<int>(locals.size());
  inputs.globals = ns.get();
  inputs.builtins = PyEval_GetBuiltins();

  std::printf("guard set (%zu guards, %zu sources):\n%s", guards.size(), guards.sources().size(),
              guards.to_string().c_str());
  double hit = time_checks(guards, inputs, true, iterations);
  std::printf("guards_hold, all hold:        %.1f ns per call\n", hit);

  // A miss stops at the failing guard (here the second).
  PyRef other = PyRef::steal(must(
      PyRun_String("torch.randn(2, 8, dtype=torch.float64)", Py_eval_input, ns.get(), ns.get())));
  locals[1] = other.get();
  double miss = time_checks(guards, inputs, false, iterations);
  std::printf("guards_hold, 2nd guard fails: %.1f ns per call\n", miss);
  return 0;
}
