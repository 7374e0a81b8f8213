/* Embedding example: a C program with its own CPython interpreter that asks dynvm,
 * through the C API of <dynvm/dynvm.h>, what it is. */
#include <Python.h>
#include <stdio.h>

#include <dynvm/dynvm.h>

int main(void) {
  Py_Initialize();
  printf("embedded Python %s\n", Py_GetVersion());
  printf("dynvm %s\n", dynvm_version());
  return Py_FinalizeEx() < 0 ? 1 : 0;
}
