// `dynvm run`: checks the script, starts the embedded CPython, hands the run options to
// the dynvm package (dynvm._cli.begin_run) and runs the script as __main__.
#include <Python.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "commands.h"
#include "dynvm/support/py_ref.h"
#include "embedded_python.h"

namespace dynvm::cli {
namespace {

// Checks that `script` can be run, before any interpreter starts. Returns 0 when it
// can, else prints why and returns the exit status: 2 for a file that cannot be opened
// (python3's status and message), 1 for a directory.
int check_script(const std::string& script) {
  struct stat info;
  if (::stat(script.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    std::fprintf(stderr, "dynvm: '%s' is a directory, not a Python script\n", script.c_str());
    return 1;
  }
  int fd = ::open(script.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int error = errno;
    std::fprintf(stderr, "dynvm: can't open file '%s': [Errno %d] %s\n", script.c_str(), error,
                 std::strerror(error));
    return 2;
  }
  ::close(fd);
  return 0;
}

const char* report_format_name(ReportFormat format) {
  switch (format) {
    case ReportFormat::kJson:
      return "json";
    case ReportFormat::kNone:
      return "none";
    case ReportFormat::kText:
      break;
  }
  return "text";
}

// New reference to a str decoded as Python decodes file names and arguments.
PyRef to_str(const std::string& text) {
  return PyRef::steal(
      PyUnicode_DecodeFSDefaultAndSize(text.data(), static_cast<Py_ssize_t>(text.size())));
}

PyRef to_str_or_none(const std::optional<std::string>& text) {
  if (text) return to_str(*text);
  return PyRef::steal(Py_NewRef(Py_None));
}

PyRef to_str_list(const std::vector<std::string>& items) {
  PyRef list = PyRef::steal(PyList_New(0));
  if (!list) return list;
  for (const std::string& item : items) {
    PyRef str = to_str(item);
    if (!str || PyList_Append(list.get(), str.get()) < 0) return PyRef();
  }
  return list;
}

// Adds options[key] = value; `value` may be null after a failed conversion, in which
// case the Python error is already set and this returns false.
bool put(PyObject* options, const char* key, const PyRef& value) {
  return value && PyDict_SetItemString(options, key, value.get()) == 0;
}

// New reference to the dict dynvm._cli.begin_run takes, or null with an error set.
PyRef options_dict(const RunOptions& run) {
  PyRef options = PyRef::steal(PyDict_New());
  if (!options) return options;
  PyObject* dict = options.get();  // borrowed from `options`
  const bool ok = put(dict, "script", to_str(run.script)) &&
                  put(dict, "args", to_str_list(run.script_args)) &&
                  put(dict, "include", to_str_list(run.include_globs)) &&
                  put(dict, "exclude", to_str_list(run.exclude_globs)) &&
                  put(dict, "report",
                      PyRef::steal(PyUnicode_FromString(report_format_name(run.report_format)))) &&
                  put(dict, "report_file",
                      to_str_or_none(run.report_format == ReportFormat::kJson
                                         ? std::optional<std::string>(run.report_file)
                                         : std::nullopt)) &&
                  put(dict, "compile", PyRef::steal(PyBool_FromLong(run.compile ? 1 : 0))) &&
                  put(dict, "backend", to_str_or_none(run.backend)) &&
                  put(dict, "mode", to_str_or_none(run.mode)) &&
                  put(dict, "graphs_dir", to_str_or_none(run.graphs_dir));
  return ok ? std::move(options) : PyRef();
}

// Takes the pending Python exception and returns str() of it.
std::string take_exception_message() {
#if PY_VERSION_HEX >= 0x030C0000
  PyRef exception = PyRef::steal(PyErr_GetRaisedException());
#else
  PyObject* type = nullptr;       // new reference, taken by PyErr_Fetch
  PyObject* value = nullptr;      // new reference, taken by PyErr_Fetch
  PyObject* traceback = nullptr;  // new reference, taken by PyErr_Fetch
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  Py_XDECREF(type);
  Py_XDECREF(traceback);
  PyRef exception = PyRef::steal(value);
#endif
  if (!exception) return "unknown error";
  PyRef text = PyRef::steal(PyObject_Str(exception.get()));
  const char* utf8 = text ? PyUnicode_AsUTF8(text.get()) : nullptr;
  if (utf8 == nullptr) {
    PyErr_Clear();
    return "unprintable error";
  }
  return utf8;
}

// Reports the pending exception of the hand-over to the package. Returns the exit
// status: 2 for a ValueError (a bad option value or DYNVM_* variable: the user's to
// fix) or a NotImplementedError (an option dynvm names but does not do yet), 1 for
// anything else.
int report_begin_run_error(bool importing) {
  if (PyErr_ExceptionMatches(PyExc_ValueError) ||
      PyErr_ExceptionMatches(PyExc_NotImplementedError)) {
    std::fprintf(stderr, "dynvm: %s\n", take_exception_message().c_str());
    return 2;
  }
  if (importing && PyErr_ExceptionMatches(PyExc_ModuleNotFoundError)) {
    std::fprintf(stderr, "dynvm: cannot import the dynvm Python package (%s); install it for %s\n",
                 take_exception_message().c_str(), DYNVM_PYTHON_EXECUTABLE);
    return 1;
  }
  PyErr_Print();
  std::fputs("dynvm: internal error while preparing the run\n", stderr);
  return 1;
}

// Imports dynvm._cli and calls begin_run(options). Returns 0 on success, else the
// exit status after printing why.
int begin_run(const RunOptions& run) {
  PyRef module = PyRef::steal(PyImport_ImportModule("dynvm._cli"));
  if (!module) return report_begin_run_error(/*importing=*/true);
  PyRef options = options_dict(run);
  if (!options) return report_begin_run_error(/*importing=*/false);
  PyRef result = PyRef::steal(PyObject_CallMethod(module.get(), "begin_run", "O", options.get()));
  if (!result) return report_begin_run_error(/*importing=*/false);
  return 0;
}

}  // namespace

int run_script_command(const RunOptions& options, const std::vector<std::string>& process_argv) {
  if (int status = check_script(options.script); status != 0) return status;

  ScriptLaunch launch;
  launch.script = options.script;
  launch.script_argv.push_back(options.script);
  launch.script_argv.insert(launch.script_argv.end(), options.script_args.begin(),
                            options.script_args.end());
  launch.process_argv = process_argv;
  launch.package_parent_dir = find_build_tree_package_parent();

  int exit_status = 0;
  if (!start_python_for_script(launch, &exit_status)) return exit_status;
  if (int status = begin_run(options); status != 0) return stop_python(status);
  return run_main_and_finalize();
}

}  // namespace dynvm::cli
