// `dynvm dis FILE.py|FILE.pyc [--json]`: a listing like `python3 -m dis`. A .pyc is read by
// dynvm's marshal reader alone; a .py is compiled by the embedded CPython first.
#include <Python.h>

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "commands.h"
#include "dynvm/frontend/decode.h"
#include "dynvm/frontend/dis_listing.h"
#include "dynvm/frontend/live_code.h"
#include "dynvm/frontend/pyc_file.h"
#include "dynvm/support/py_ref.h"

namespace dynvm::cli {

namespace {

int fail(const std::string& file, const std::string& message) {
  std::fprintf(stderr, "dynvm: dis: %s: %s\n", file.c_str(), message.c_str());
  return 1;
}

bool ends_with(const std::string& s, const char* suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

int print_listing(const std::string& file, const frontend::RawCode& raw, bool json) {
  auto code = frontend::decode_recursive(raw);
  if (!code) return fail(file, code.error().message);
  std::string text =
      json ? frontend::format_dis_json(code.value()) : frontend::format_dis_text(code.value());
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (!text.empty() && text.back() != '\n') std::fputc('\n', stdout);
  return 0;
}

// Compiles a source file with an isolated embedded interpreter and lists its code.
int dis_source(const std::string& file, bool json) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string source = buffer.str();

  PyConfig config;
  PyConfig_InitIsolatedConfig(&config);
  config.install_signal_handlers = 0;
  PyStatus status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status)) return fail(file, "cannot start the embedded Python");
  int rc = 0;
  {
    PyRef code = PyRef::steal(Py_CompileString(source.c_str(), file.c_str(), Py_file_input));
    if (!code) {
      // A SyntaxError: shown as python3 shows it, with the file and line.
      std::fprintf(stderr, "dynvm: dis: %s does not compile:\n", file.c_str());
      PyErr_Print();
      rc = 1;
    } else {
      auto raw = frontend::raw_code_from_live(reinterpret_cast<PyCodeObject*>(code.get()));
      rc = raw ? print_listing(file, *raw.value(), json) : fail(file, raw.error().message);
    }
  }
  if (Py_FinalizeEx() < 0 && rc == 0) rc = 1;
  return rc;
}

}  // namespace

int run_dis_command(const DisOptions& options) {
  const std::string& file = options.file;
  struct stat st;
  if (stat(file.c_str(), &st) != 0) {
    return fail(file, std::string("can't open file: [Errno ") + std::to_string(errno) + "] " +
                          std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) return fail(file, "is a directory, not a .py or .pyc file");
  if (ends_with(file, ".pyc")) {
    auto pyc = frontend::read_pyc_file(file);
    if (!pyc) return fail(file, pyc.error().message);
    return print_listing(file, *pyc.value().code, options.json);
  }
  return dis_source(file, options.json);
}

}  // namespace dynvm::cli
