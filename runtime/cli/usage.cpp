// The help texts of the dynvm executable: what `dynvm --help`, `dynvm help COMMAND` and
// every usage error print.
#include "usage.h"

namespace dynvm::cli {
namespace {

constexpr const char* kGeneralUsage =
    "usage: dynvm <command> [options]\n"
    "\n"
    "Compiles PyTorch programs from their Python bytecode.\n"
    "\n"
    "commands:\n"
    "  run [options] SCRIPT [ARGS...]  run SCRIPT as `python3 SCRIPT ARGS...` would, with its\n"
    "                                  frames compiled; report what was compiled at exit\n"
    "  dis FILE.py|FILE.pyc [--json]   show the bytecode as dynvm's frontend decodes it\n"
    "  help [COMMAND]                  show this help, or the help of COMMAND\n"
    "\n"
    "options:\n"
    "  -h, --help                      show this help and exit\n"
    "  --version                       show the versions of dynvm, its Python and torch, and exit\n"
    "\n"
    "`dynvm run --help` lists the options of run.\n";

constexpr const char* kRunUsage =
    "usage: dynvm run [options] SCRIPT [ARGS...]\n"
    "\n"
    "Runs SCRIPT as `python3 SCRIPT ARGS...` would (sys.argv is [SCRIPT, ARGS...], exit\n"
    "status and tracebacks are python3's), compiling its frames, and reports at exit on\n"
    "stderr what was compiled, where it broke and why, recompiles and time spent.\n"
    "Options end at SCRIPT: everything after it goes to the script.\n"
    "\n"
    "options:\n"
    "  --include GLOB      compile only frames whose file matches GLOB (repeatable)\n"
    "  --exclude GLOB      never compile frames whose file matches GLOB (repeatable)\n"
    "  --report text       print the report to stderr at exit (the default)\n"
    "  --report json FILE  write the report to FILE as JSON instead\n"
    "  --report none       print no report\n"
    "  --no-compile        compile nothing; run the script in plain CPython\n"
    "  --backend NAME      eager or dynvm (default: dynvm)\n"
    "  --mode NAME         default, reduce-overhead or max-autotune (default: default)\n"
    "  --graphs DIR        write every captured graph to DIR\n"
    "  -h, --help          show this help and exit\n";

constexpr const char* kDisUsage =
    "usage: dynvm dis FILE.py|FILE.pyc [--json]\n"
    "\n"
    "Shows the bytecode of every code object in FILE as dynvm's frontend decodes it:\n"
    "a .py file is compiled by this Python, a .pyc file is read as it is.\n"
    "\n"
    "options:\n"
    "  --json      print JSON instead of text\n"
    "  -h, --help  show this help and exit\n";

}  // namespace

const char* usage_text(HelpTopic topic) {
  switch (topic) {
    case HelpTopic::kRun:
      return kRunUsage;
    case HelpTopic::kDis:
      return kDisUsage;
    case HelpTopic::kGeneral:
      break;
  }
  return kGeneralUsage;
}

}  // namespace dynvm::cli
