// dynvm._C: the extension module behind the dynvm Python package.
#include <Python.h>

#include "dynvm/dynvm.h"

namespace {

PyMethodDef kMethods[] = {{nullptr, nullptr, 0, nullptr}};

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
  if (PyModule_AddStringConstant(m, "__version__", dynvm_version()) < 0) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
