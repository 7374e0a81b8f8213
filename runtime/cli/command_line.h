// Parsing the dynvm command line into the command to run and its options.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "usage.h"

namespace dynvm::cli {

// Where `dynvm run` puts its report at exit.
enum class ReportFormat { kText, kJson, kNone };

// The options of `dynvm run`. Unset optionals mean "the package's default"; the Python
// package validates the values (backend and mode names live there only).
struct RunOptions {
  std::vector<std::string> include_globs;
  std::vector<std::string> exclude_globs;
  ReportFormat report_format = ReportFormat::kText;
  std::string report_file;  // set when report_format is kJson
  bool compile = true;
  std::optional<std::string> backend;
  std::optional<std::string> mode;
  std::optional<std::string> graphs_dir;
  std::string script;
  std::vector<std::string> script_args;  // everything after the script, untouched
};

// The options of `dynvm dis`.
struct DisOptions {
  std::string file;
  bool json = false;
};

enum class CommandKind {
  kRun,
  kDis,
  kVersion,
  kHelp,        // print usage_text(help_topic) to stdout, exit 0
  kUsageError,  // print `error` and usage_text(help_topic) to stderr, exit 2
};

struct CommandLine {
  CommandKind kind = CommandKind::kUsageError;
  HelpTopic help_topic = HelpTopic::kGeneral;
  std::string error;  // kUsageError: what was wrong, without the "dynvm: " prefix
  RunOptions run;
  DisOptions dis;
};

// Parses argv (argv[0] is the program). Never fails: a bad command line gives
// kUsageError with a message.
CommandLine parse_command_line(const std::vector<std::string>& argv);

}  // namespace dynvm::cli
