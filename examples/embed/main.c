/* Embedding example: a C program with its own CPython interpreter that uses dynvm's C API
 * to translate Python functions into guarded graphs — a live function object, and a
 * function shipped as marshal bytes (as another runtime would hand them over). */
#include <Python.h>
#include <marshal.h>
#include <stdio.h>

#include <dynvm/dynvm.h>

static const char* kSource =
    "import torch\n"
    "def mlp(x, w):\n"
    "    return torch.relu(x @ w).sum(dim=-1) * 0.5\n"
    "def scaled(x, k):\n"
    "    return x * k + 1\n";

static int show(const char* what, dynvm_translation* t) {
  if (t == NULL) {
    PyErr_Print();
    return 1;
  }
  printf("== %s\n", what);
  if (dynvm_translation_error(t) != NULL) {
    printf("not captured: %s\n", dynvm_translation_error(t));
  } else {
    printf("%s", dynvm_translation_graph(t));
  }
  printf("-- guards\n%s", dynvm_translation_guards(t));
  dynvm_translation_free(t);
  return 0;
}

int main(void) {
  Py_Initialize();
  printf("embedded Python %.6s, dynvm %s\n", Py_GetVersion(), dynvm_version());
  if (dynvm_enable() < 0) {
    PyErr_Print();
    return 1;
  }
  int failures = 0;

  /* 1. A live function object. */
  PyObject* globals = PyDict_New();
  PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins());
  PyObject* ran = PyRun_String(kSource, Py_file_input, globals, globals);
  if (ran == NULL) {
    PyErr_Print();
    return 1;
  }
  Py_DECREF(ran);
  PyObject* mlp = PyDict_GetItemString(globals, "mlp"); /* borrowed */
  failures += show("mlp (live function)", dynvm_translate_function(mlp, "f32[2, 3]; f32[3, 4]"));

  /* 2. The same module as marshal bytes. */
  PyObject* code = Py_CompileString(kSource, "shipped.py", Py_file_input);
  PyObject* bytes = code ? PyMarshal_WriteObjectToString(code, Py_MARSHAL_VERSION) : NULL;
  if (bytes == NULL) {
    PyErr_Print();
    return 1;
  }
  failures += show("scaled (marshal bytes)",
                   dynvm_translate_marshal(PyBytes_AS_STRING(bytes),
                                           (size_t)PyBytes_GET_SIZE(bytes), "scaled", "f32[4]; 3"));
  Py_DECREF(bytes);
  Py_DECREF(code);
  Py_DECREF(globals);
  return (Py_FinalizeEx() < 0 || failures) ? 1 : 0;
}
