// The `dynvm` command line (placeholder until the CLI lands).
#include <cstdio>

#include "dynvm/version.h"

int main() {
  std::printf("dynvm %s\n", DYNVM_VERSION_STRING);
  return 0;
}
