// The C API of include/dynvm/dynvm.h.
#include "dynvm/dynvm.h"

#include "dynvm/version.h"

extern "C" const char* dynvm_version(void) { return DYNVM_VERSION_STRING; }
