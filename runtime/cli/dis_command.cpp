// `dynvm dis`: a placeholder until the frontend's disassembler is wired in.
#include <cstdio>

#include "commands.h"

namespace dynvm::cli {

int run_dis_command(const DisOptions& /*options*/) {
  std::fputs("dynvm: dis: not available yet\n", stderr);
  return 1;
}

}  // namespace dynvm::cli
