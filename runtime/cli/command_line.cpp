// The dynvm command-line parser: commands, their options, and the errors a user sees.
#include "command_line.h"

#include <cstddef>
#include <utility>

namespace dynvm::cli {
namespace {

CommandLine usage_error(HelpTopic topic, std::string message) {
  CommandLine result;
  result.kind = CommandKind::kUsageError;
  result.help_topic = topic;
  result.error = std::move(message);
  return result;
}

CommandLine help(HelpTopic topic) {
  CommandLine result;
  result.kind = CommandKind::kHelp;
  result.help_topic = topic;
  return result;
}

bool is_help_flag(const std::string& arg) { return arg == "-h" || arg == "--help"; }

// Walks the arguments of one command. An option's value is either glued to it
// (`--backend=eager`) or the next argument (`--backend eager`).
class ArgumentCursor {
 public:
  ArgumentCursor(const std::vector<std::string>& argv, std::size_t first)
      : argv_(argv), next_(first) {}

  bool done() const { return next_ >= argv_.size(); }
  const std::string& peek() const { return argv_[next_]; }
  const std::string& take() { return argv_[next_++]; }

  // Splits `--name=value` into name and value; `value` stays empty without '='.
  static void split_option(const std::string& arg, std::string* name,
                           std::optional<std::string>* value) {
    std::size_t eq = arg.find('=');
    if (arg.rfind("--", 0) != 0 || eq == std::string::npos) {
      *name = arg;
      value->reset();
      return;
    }
    *name = arg.substr(0, eq);
    *value = arg.substr(eq + 1);
  }

  // The value of option `name`: the glued one, else the next argument. Returns false
  // when there is none.
  bool option_value(std::optional<std::string> glued, std::string* value) {
    if (glued) {
      *value = std::move(*glued);
      return true;
    }
    if (done()) return false;
    *value = take();
    return true;
  }

 private:
  const std::vector<std::string>& argv_;
  std::size_t next_;
};

CommandLine parse_run(const std::vector<std::string>& argv, std::size_t first) {
  constexpr HelpTopic kTopic = HelpTopic::kRun;
  CommandLine result;
  result.kind = CommandKind::kRun;
  RunOptions& run = result.run;
  ArgumentCursor cursor(argv, first);
  while (!cursor.done()) {
    const std::string& arg = cursor.peek();
    if (arg == "--") {
      cursor.take();
      break;
    }
    if (arg == "-") {
      return usage_error(kTopic, "run: reading the script from stdin is not supported");
    }
    if (arg.empty() || arg[0] != '-') break;  // the script: options end here
    cursor.take();
    if (is_help_flag(arg)) return help(kTopic);

    std::string name;
    std::optional<std::string> glued;
    ArgumentCursor::split_option(arg, &name, &glued);
    std::string value;
    auto needs_value = [&](std::string* out) { return cursor.option_value(std::move(glued), out); };
    auto missing_value = [&] {
      return usage_error(kTopic, "run: option '" + name + "' needs a value");
    };

    if (name == "--no-compile" && !glued) {
      run.compile = false;
    } else if (name == "--include") {
      if (!needs_value(&value)) return missing_value();
      run.include_globs.push_back(value);
    } else if (name == "--exclude") {
      if (!needs_value(&value)) return missing_value();
      run.exclude_globs.push_back(value);
    } else if (name == "--backend") {
      if (!needs_value(&value)) return missing_value();
      run.backend = value;
    } else if (name == "--mode") {
      if (!needs_value(&value)) return missing_value();
      run.mode = value;
    } else if (name == "--graphs") {
      if (!needs_value(&value)) return missing_value();
      run.graphs_dir = value;
    } else if (name == "--report") {
      if (!needs_value(&value)) return missing_value();
      if (value == "text") {
        run.report_format = ReportFormat::kText;
      } else if (value == "none") {
        run.report_format = ReportFormat::kNone;
      } else if (value == "json") {
        if (cursor.done()) {
          return usage_error(kTopic, "run: '--report json' needs a FILE to write the report to");
        }
        run.report_format = ReportFormat::kJson;
        run.report_file = cursor.take();
      } else {
        return usage_error(kTopic, "run: unknown report format '" + value +
                                       "' (valid formats: text, json FILE, none)");
      }
    } else {
      return usage_error(kTopic, "run: unknown option '" + arg + "'");
    }
  }
  if (cursor.done()) return usage_error(kTopic, "run: missing the SCRIPT to run");
  run.script = cursor.take();
  while (!cursor.done()) run.script_args.push_back(cursor.take());
  return result;
}

CommandLine parse_dis(const std::vector<std::string>& argv, std::size_t first) {
  constexpr HelpTopic kTopic = HelpTopic::kDis;
  CommandLine result;
  result.kind = CommandKind::kDis;
  bool have_file = false;
  bool options_ended = false;
  for (std::size_t i = first; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (!options_ended && arg == "--") {
      options_ended = true;
    } else if (!options_ended && is_help_flag(arg)) {
      return help(kTopic);
    } else if (!options_ended && arg == "--json") {
      result.dis.json = true;
    } else if (!options_ended && arg.size() > 1 && arg[0] == '-') {
      return usage_error(kTopic, "dis: unknown option '" + arg + "'");
    } else if (have_file) {
      return usage_error(kTopic, "dis: takes one FILE, got a second one: '" + arg + "'");
    } else {
      result.dis.file = arg;
      have_file = true;
    }
  }
  if (!have_file) return usage_error(kTopic, "dis: missing the FILE to disassemble");
  return result;
}

CommandLine parse_help(const std::vector<std::string>& argv, std::size_t first) {
  if (first >= argv.size()) return help(HelpTopic::kGeneral);
  if (first + 1 < argv.size()) return usage_error(HelpTopic::kGeneral, "help: takes one COMMAND");
  const std::string& topic = argv[first];
  if (topic == "run") return help(HelpTopic::kRun);
  if (topic == "dis") return help(HelpTopic::kDis);
  if (topic == "help") return help(HelpTopic::kGeneral);
  return usage_error(HelpTopic::kGeneral, "help: unknown command '" + topic + "'");
}

}  // namespace

CommandLine parse_command_line(const std::vector<std::string>& argv) {
  if (argv.size() < 2) return usage_error(HelpTopic::kGeneral, "missing a command");
  const std::string& command = argv[1];
  if (command == "run") return parse_run(argv, 2);
  if (command == "dis") return parse_dis(argv, 2);
  if (command == "help") return parse_help(argv, 2);
  if (is_help_flag(command) || command == "--version") {
    if (argv.size() > 2) {
      return usage_error(HelpTopic::kGeneral, "'" + command + "' takes no arguments");
    }
    if (command == "--version") {
      CommandLine result;
      result.kind = CommandKind::kVersion;
      return result;
    }
    return help(HelpTopic::kGeneral);
  }
  if (!command.empty() && command[0] == '-') {
    return usage_error(HelpTopic::kGeneral, "unknown option '" + command + "'");
  }
  return usage_error(HelpTopic::kGeneral, "unknown command '" + command + "'");
}

}  // namespace dynvm::cli
