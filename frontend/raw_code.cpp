// Placeholder until the code model lands (issue 3).
#include "dynvm/frontend/raw_code.h"
namespace dynvm::frontend {}
