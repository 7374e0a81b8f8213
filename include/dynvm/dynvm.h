/* The dynvm C API, for applications that embed CPython and want dynvm's translator.
 * Thin and extern "C": no C++, CPython or ATen types cross it. */
#ifndef DYNVM_DYNVM_H
#define DYNVM_DYNVM_H

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version, e.g. "0.1.0". The string is static. */
const char* dynvm_version(void);

#ifdef __cplusplus
}
#endif

#endif /* DYNVM_DYNVM_H */
