// Starting and stopping the CPython that the dynvm executable embeds, configured the way
// python3 configures itself for `python3 SCRIPT ARGS...`.
#pragma once

#include <string>
#include <vector>

namespace dynvm::cli {

struct ScriptLaunch {
  std::string script;                     // run as __main__ by run_main_and_finalize()
  std::vector<std::string> script_argv;   // sys.argv: the script, then its arguments
  std::vector<std::string> process_argv;  // sys.orig_argv: dynvm's own command line
  // Put first on the module search path, ahead of the user's PYTHONPATH, when not empty.
  std::string package_parent_dir;
};

// Starts the interpreter for `launch`. On failure, prints why (as python3 would) and
// returns false with the exit status to end with in *exit_status. A configuration error
// that python3 exits on (a bad PYTHON* variable) ends the process here, as in python3.
bool start_python_for_script(const ScriptLaunch& launch, int* exit_status);

// Runs the script as __main__ and finalizes the interpreter (Py_RunMain): exceptions,
// SystemExit, KeyboardInterrupt and the exit status behave exactly as in python3.
int run_main_and_finalize();

// Finalizes the interpreter without running the script; returns `exit_status`, or 120
// when finalization fails (as python3 does).
int stop_python(int exit_status);

// The directory holding the dynvm package of a build tree (<exe>/../python when it has
// dynvm/__init__.py), or "" when this executable is not in a build tree.
std::string find_build_tree_package_parent();

}  // namespace dynvm::cli
