// `dynvm --version`: the version of dynvm, of the CPython it embeds and of the torch it
// was built against, that Python's executable, and each code-generation target: built,
// usable on this machine, or why not.
#include <Python.h>

#include <cstdio>
#include <string>

#include "commands.h"
#include "dynvm/codegen/targets.h"
#include "dynvm/version.h"

namespace dynvm::cli {

int run_version_command() {
  // Py_GetVersion() may be called before the interpreter starts; its first word is
  // the version number ("3.11.2 (main, ...) [GCC ...]").
  std::string python_version = Py_GetVersion();
  python_version = python_version.substr(0, python_version.find(' '));
  std::printf("dynvm %s (Python %s, torch %s, %s)\n", DYNVM_VERSION_STRING, python_version.c_str(),
              DYNVM_TORCH_VERSION_STRING, DYNVM_PYTHON_EXECUTABLE);
  for (const codegen::TargetInfo& target : codegen::targets()) {
    std::printf("  %s\n", codegen::describe(target).c_str());
  }
  return 0;
}

}  // namespace dynvm::cli
