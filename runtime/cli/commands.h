// The commands of the dynvm executable; each returns the process's exit status.
#pragma once

#include <string>
#include <vector>

#include "command_line.h"

namespace dynvm::cli {

// `dynvm run`: runs options.script in the embedded CPython as python3 would.
// `process_argv` is dynvm's whole command line (it becomes sys.orig_argv).
int run_script_command(const RunOptions& options, const std::vector<std::string>& process_argv);

// `dynvm dis`: prints the decoded bytecode of a .py or .pyc file.
int run_dis_command(const DisOptions& options);

// `dynvm --version`: prints the versions of dynvm and of the Python it embeds.
int run_version_command();

}  // namespace dynvm::cli
