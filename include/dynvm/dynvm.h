/* The dynvm C API, for applications that embed CPython and want dynvm's translator.
 * Thin and extern "C": no C++ or ATen types cross it; Python objects are passed as
 * CPython's `struct _object*` (PyObject*) so this header needs no Python.h. Every call
 * needs the GIL. */
#ifndef DYNVM_DYNVM_H
#define DYNVM_DYNVM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct _object; /* PyObject */

/* The library's version, e.g. "0.1.0". The string is static. */
const char* dynvm_version(void);

/* Enables dynvm in the running interpreter: imports torch and the dynvm package, so that
 * dynvm.compile works and the translator can run. Returns 0, or -1 with a Python error
 * set (torch or the dynvm package cannot be imported). */
int dynvm_enable(void);

/* The result of a translation: a graph and its guards, or why there is none. */
typedef struct dynvm_translation dynvm_translation;

/* Traces one call of `function` (a Python function) with abstract inputs and returns its
 * graph and guards. `inputs` describes the positional arguments, separated by ';': a
 * tensor as the graph text spells a type ("f32[2, 3]", "i64[8] cpu", "f32[4] grad"), or
 * any other value as a Python expression ("3", "True", "(1, 2)"). Returns NULL with a
 * Python error set when the inputs cannot be made; a function the VM cannot trace gives a
 * translation whose error says why and where. */
dynvm_translation* dynvm_translate_function(struct _object* function, const char* inputs);

/* The same for code in marshal format (what `marshal.dumps` of a module's code object
 * gives, e.g. the body of a .pyc file after its 16-byte header): the module code runs in
 * a fresh namespace, then its function `name` is translated. */
dynvm_translation* dynvm_translate_marshal(const char* data, size_t size, const char* name,
                                           const char* inputs);

/* The graph as text (docs/graph_ir.md), or "" when the translation failed. */
const char* dynvm_translation_graph(const dynvm_translation* translation);
/* The guards, one per line. */
const char* dynvm_translation_guards(const dynvm_translation* translation);
/* NULL when the function was captured; else why not, with the user's file:line. */
const char* dynvm_translation_error(const dynvm_translation* translation);
void dynvm_translation_free(dynvm_translation* translation);

#ifdef __cplusplus
}
#endif

#endif /* DYNVM_DYNVM_H */
