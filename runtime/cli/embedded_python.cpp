// The embedded CPython's life cycle for `dynvm run`: configuration, start, Py_RunMain,
// finalization.
#include "embedded_python.h"

#include <Python.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace dynvm::cli {
namespace {

constexpr char kProgramName[] = "dynvm";

// Owns a PyConfig and clears it on every path out.
class ConfigHolder {
 public:
  ConfigHolder() { PyConfig_InitPythonConfig(&config_); }
  ~ConfigHolder() { PyConfig_Clear(&config_); }
  ConfigHolder(const ConfigHolder&) = delete;
  ConfigHolder& operator=(const ConfigHolder&) = delete;
  PyConfig* get() { return &config_; }

 private:
  PyConfig config_;
};

bool is_regular_file(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

std::string real_path(const std::string& path) {
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) return path;
  return resolved;
}

std::string executable_directory() {
  char buffer[PATH_MAX];
  ssize_t length = ::readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (length <= 0) return "";
  std::string path(buffer, static_cast<std::size_t>(length));
  std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

// PYTHONPATH as the interpreter should see it: `first`, then the user's PYTHONPATH. When
// the user's already lists `first`, it is left as it is (their order wins, and sys.path
// is python3's).
std::string module_search_path_with(const std::string& first) {
  const char* user = std::getenv("PYTHONPATH");
  if (user == nullptr || *user == '\0') return first;
  const std::string entries = user;
  const std::string first_real = real_path(first);
  std::size_t start = 0;
  while (true) {
    std::size_t colon = entries.find(':', start);
    std::string entry = entries.substr(start, colon - start);
    if (!entry.empty() && real_path(entry) == first_real) return entries;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return first + ":" + entries;
}

// Returns false after printing the error when `status` failed. Exits the process for
// the statuses python3 exits on.
bool check(PyStatus status, int* exit_status) {
  if (!PyStatus_Exception(status)) return true;
  if (PyStatus_IsExit(status)) {
    *exit_status = status.exitcode;
    return false;
  }
  Py_ExitStatusException(status);  // prints "Fatal Python error: ..." and exits
}

bool set_string(PyConfig* config, wchar_t** field, const std::string& value, int* exit_status) {
  return check(PyConfig_SetBytesString(config, field, value.c_str()), exit_status);
}

bool set_string_list(PyConfig* config, PyWideStringList* list,
                     const std::vector<std::string>& values, int* exit_status) {
  std::vector<wchar_t*> wide;
  bool ok = true;
  for (const std::string& value : values) {
    // Py_DecodeLocale is valid here: the PyConfig_SetBytes* calls before this one
    // pre-initialized Python, which fixed the locale encoding.
    wchar_t* item = Py_DecodeLocale(value.c_str(), nullptr);  // owned, PyMem_RawFree
    if (item == nullptr) {
      ok = false;
      break;
    }
    wide.push_back(item);
  }
  if (ok) {
    ok = check(
        PyConfig_SetWideStringList(config, list, static_cast<Py_ssize_t>(wide.size()), wide.data()),
        exit_status);
  } else {
    std::fputs("dynvm: cannot decode the command line in this locale\n", stderr);
    *exit_status = 1;
  }
  for (wchar_t* item : wide) PyMem_RawFree(item);
  return ok;
}

}  // namespace

bool start_python_for_script(const ScriptLaunch& launch, int* exit_status) {
  ConfigHolder holder;
  PyConfig* config = holder.get();
  // The arguments belong to the script: python3's own options are not parsed.
  config->parse_argv = 0;

  std::vector<char*> argv;
  for (const std::string& arg : launch.script_argv) argv.push_back(const_cast<char*>(arg.c_str()));
  if (!check(PyConfig_SetBytesArgv(config, static_cast<Py_ssize_t>(argv.size()), argv.data()),
             exit_status)) {
    return false;
  }
  if (!set_string_list(config, &config->orig_argv, launch.process_argv, exit_status)) return false;
  if (!set_string(config, &config->run_filename, launch.script, exit_status)) return false;
  if (!set_string(config, &config->program_name, kProgramName, exit_status)) return false;
  // sys.executable, and with it sys.prefix and venv detection, are those of the Python
  // dynvm was built against, so the script sees the same environment as under python3.
  if (!set_string(config, &config->executable, DYNVM_PYTHON_EXECUTABLE, exit_status)) {
    return false;
  }
  if (!launch.package_parent_dir.empty() &&
      !set_string(config, &config->pythonpath_env,
                  module_search_path_with(launch.package_parent_dir), exit_status)) {
    return false;
  }
  return check(Py_InitializeFromConfig(config), exit_status);
}

int run_main_and_finalize() { return Py_RunMain(); }

int stop_python(int exit_status) {
  if (Py_FinalizeEx() < 0) return 120;
  return exit_status;
}

std::string find_build_tree_package_parent() {
  const std::string exe_dir = executable_directory();
  if (exe_dir.empty()) return "";
  const std::string candidate = exe_dir + "/../python";
  if (!is_regular_file(candidate + "/dynvm/__init__.py")) return "";
  return real_path(candidate);
}

}  // namespace dynvm::cli
