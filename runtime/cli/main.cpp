// The entry point of the `dynvm` executable: parses the command line and dispatches.
#include <cstdio>
#include <string>
#include <vector>

#include "command_line.h"
#include "commands.h"
#include "usage.h"

int main(int argc, char** argv) {
  using namespace dynvm::cli;
  const std::vector<std::string> args(argv, argv + argc);
  const CommandLine command_line = parse_command_line(args);
  switch (command_line.kind) {
    case CommandKind::kRun:
      return run_script_command(command_line.run, args);
    case CommandKind::kDis:
      return run_dis_command(command_line.dis);
    case CommandKind::kVersion:
      return run_version_command();
    case CommandKind::kHelp:
      std::fputs(usage_text(command_line.help_topic), stdout);
      return 0;
    case CommandKind::kUsageError:
      break;
  }
  // Usage errors exit with 2, as python3 and argparse do.
  std::fprintf(stderr, "dynvm: %s\n\n%s", command_line.error.c_str(),
               usage_text(command_line.help_topic));
  return 2;
}
