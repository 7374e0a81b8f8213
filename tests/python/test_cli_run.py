"""The `dynvm` executable: `dynvm run` behaves as python3 does, and the CLI's interface."""

import json
import os
import pathlib
import platform
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import codegen_built

SCRIPTS = pathlib.Path(__file__).resolve().parent / "scripts"
PYTHON = sys.executable  # CTest runs this suite with the Python dynvm embeds
REPORT_PREFIX = "dynvm: "
TIMEOUT_S = 60


def dynvm_exe():
    exe = os.environ.get("DYNVM_EXE")
    if not exe:
        pytest.fail("DYNVM_EXE must name the built dynvm executable (CTest sets it)")
    return os.path.abspath(exe)


def build_dir():
    path = os.environ.get("DYNVM_BUILD_DIR")
    if not path:
        pytest.fail("DYNVM_BUILD_DIR must name the build directory (CTest sets it)")
    return pathlib.Path(path).resolve()


def package_dir():
    return str((build_dir() / "python").resolve())


def base_env(pythonpath=None):
    """The environment both runners get; PYTHONPATH only when given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DYNVM_"))}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    return env


def run(cmd, *, env=None, cwd=None, stdin_text=None):
    return subprocess.run(
        cmd,
        env=base_env(package_dir()) if env is None else env,
        cwd=cwd,
        input=stdin_text,
        stdin=None if stdin_text is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


def dynvm(*args, **kwargs):
    return run([dynvm_exe(), *args], **kwargs)


def python(*args, **kwargs):
    return run([PYTHON, *args], **kwargs)


def split_report(stderr):
    """Splits dynvm's stderr into what the script wrote and the report after it."""
    lines = stderr.splitlines(keepends=True)
    start = len(lines)
    while start > 0 and lines[start - 1].startswith(REPORT_PREFIX):
        start -= 1
    return "".join(lines[:start]), "".join(lines[start:])


def assert_same_as_python(script_args, *, cwd=None, env=None, stdin_text=None):
    """Runs both ways; the outputs and statuses must match. Returns dynvm's result."""
    mine = dynvm("run", *script_args, cwd=cwd, env=env, stdin_text=stdin_text)
    theirs = python(*script_args, cwd=cwd, env=env, stdin_text=stdin_text)
    script_stderr, report = split_report(mine.stderr)
    assert mine.stdout == theirs.stdout
    assert script_stderr == theirs.stderr
    assert mine.returncode == theirs.returncode
    assert "frames compiled" in report, mine.stderr
    return mine


# --- dynvm run matches python3 -----------------------------------------------------


@pytest.mark.parametrize("relative", [True, False], ids=["relative", "absolute"])
def test_argv_path_and_name_match_python(relative):
    script = "print_context.py" if relative else str(SCRIPTS / "print_context.py")
    args = [script, "plain", "--help", "-x", "two words", "\u00e9t\u00e9"]
    result = assert_same_as_python(args, cwd=SCRIPTS)
    seen = json.loads(result.stdout)
    assert seen["argv"] == args
    assert seen["path0"] == str(SCRIPTS)
    assert seen["name"] == "__main__"
    assert seen["file"] == str(SCRIPTS / "print_context.py")
    assert seen["spec"] == "None"


def test_report_none_leaves_stderr_exactly_as_python():
    args = [str(SCRIPTS / "raise_value_error.py")]
    mine = dynvm("run", "--report", "none", *args)
    theirs = python(*args)
    assert mine.stderr == theirs.stderr
    assert mine.stdout == theirs.stdout == "before the error\n"
    assert mine.returncode == theirs.returncode == 1


def test_uncaught_exception_gives_python_traceback_and_status_1():
    result = assert_same_as_python([str(SCRIPTS / "raise_value_error.py")])
    script_stderr, report = split_report(result.stderr)
    assert result.returncode == 1
    assert script_stderr.startswith("Traceback (most recent call last):\n")
    assert script_stderr.endswith("ValueError: bad value: 42\n")
    assert report  # the report follows the traceback


@pytest.mark.parametrize("code", ["0", "3", "-1"])
def test_sys_exit_with_int_gives_that_status(code):
    result = assert_same_as_python([str(SCRIPTS / "exit_with.py"), code])
    assert result.returncode == int(code) % 256


def test_sys_exit_with_message_prints_it_and_exits_1():
    result = assert_same_as_python([str(SCRIPTS / "exit_with.py"), "stopping here"])
    assert result.returncode == 1
    assert split_report(result.stderr)[0] == "stopping here\n"


def test_syntax_error_shows_file_and_line(tmp_path):
    script = tmp_path / "broken.py"
    script.write_text("x = 1\nif x\n    pass\n")
    result = assert_same_as_python([str(script)])
    assert result.returncode == 1
    assert f'File "{script}", line 2' in result.stderr
    assert "SyntaxError" in result.stderr


def test_script_imports_a_sibling_module(tmp_path):
    result = assert_same_as_python([str(SCRIPTS / "import_sibling.py")], cwd=tmp_path)
    assert result.stdout.splitlines() == [
        "hello from the sibling module",
        str(SCRIPTS / "sibling_helper.py"),
    ]


def test_stdin_is_passed_through():
    result = assert_same_as_python(
        [str(SCRIPTS / "echo_stdin.py")], stdin_text="hello\nworld\n"
    )
    assert result.stdout == "HELLO\nWORLD\n"


def _interrupt(cmd):
    # Children of a shell job may start with SIGINT ignored; both runners need it live.
    process = subprocess.Popen(
        cmd,
        env=base_env(package_dir()),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert process.stdout.readline() == "ready\n"
        time.sleep(0.5)  # let it reach time.sleep(), so both tracebacks end there
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return process.returncode, stdout, stderr


def test_sigint_ends_the_script_as_in_python():
    script = str(SCRIPTS / "sleep_until_interrupted.py")
    my_status, my_stdout, my_stderr = _interrupt([dynvm_exe(), "run", script])
    their_status, their_stdout, their_stderr = _interrupt([PYTHON, script])
    assert their_status == -signal.SIGINT
    assert my_status == their_status
    assert my_stdout == their_stdout == ""
    script_stderr, report = split_report(my_stderr)
    assert script_stderr == their_stderr
    assert script_stderr.endswith("KeyboardInterrupt\n")
    assert report


def test_user_pythonpath_entries_are_kept(tmp_path):
    user_lib = tmp_path / "userlib"
    user_lib.mkdir()
    (user_lib / "user_module.py").write_text("")
    script = str(SCRIPTS / "import_user_module.py")

    # With the package directory already on PYTHONPATH, sys.path is python3's exactly.
    env = base_env(os.pathsep.join([str(user_lib), package_dir()]))
    result = assert_same_as_python([script], env=env)
    assert json.loads(result.stdout)["module"] == str(user_lib / "user_module.py")

    # With only the user's entry, dynvm puts its package first and keeps the user's.
    mine = dynvm("run", script, env=base_env(str(user_lib)))
    assert mine.returncode == 0, mine.stderr
    seen = json.loads(mine.stdout)
    assert seen["module"] == str(user_lib / "user_module.py")
    assert seen["path"][1:3] == [package_dir(), str(user_lib)]


def test_package_is_found_next_to_the_executable_without_pythonpath():
    script = str(SCRIPTS / "print_context.py")
    mine = dynvm("run", script, env=base_env())
    theirs = python(script, env=base_env())
    assert mine.returncode == 0, mine.stderr
    my_path = json.loads(mine.stdout)["path"]
    their_path = json.loads(theirs.stdout)["path"]
    assert my_path == [their_path[0], package_dir(), *their_path[1:]]
    assert "frames compiled" in split_report(mine.stderr)[1]


# --- errors before the script starts -------------------------------------------------


def test_missing_script_is_reported_like_python(tmp_path):
    mine = dynvm("run", "no_such_script.py", cwd=tmp_path)
    theirs = python("no_such_script.py", cwd=tmp_path)
    assert mine.returncode == theirs.returncode == 2
    assert mine.stdout == ""
    assert mine.stderr == (
        "dynvm: can't open file 'no_such_script.py': [Errno 2] No such file or directory\n"
    )


def test_directory_is_rejected(tmp_path):
    result = dynvm("run", str(tmp_path))
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == f"dynvm: '{tmp_path}' is a directory, not a Python script\n"


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "--bogus", "x.py"], "dynvm: run: unknown option '--bogus'"),
        (["run"], "dynvm: run: missing the SCRIPT to run"),
        (["run", "--include"], "dynvm: run: option '--include' needs a value"),
        (["run", "--report", "json"], "dynvm: run: '--report json' needs a FILE"),
        (["run", "--report", "xml", "x.py"], "dynvm: run: unknown report format 'xml'"),
        (["run", "-", "x.py"], "dynvm: run: reading the script from stdin is not supported"),
    ],
)
def test_run_usage_errors_exit_2_with_run_usage(args, message):
    result = dynvm(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith(message)
    assert "usage: dynvm run [options] SCRIPT [ARGS...]" in result.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "dynvm: missing a command"),
        (["frobnicate"], "dynvm: unknown command 'frobnicate'"),
        (["--bogus"], "dynvm: unknown option '--bogus'"),
        (["--version", "extra"], "dynvm: '--version' takes no arguments"),
        (["help", "frobnicate"], "dynvm: help: unknown command 'frobnicate'"),
    ],
)
def test_general_usage_errors_exit_2_with_usage(args, message):
    result = dynvm(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith(message + "\n")
    assert "usage: dynvm <command> [options]" in result.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["--backend", "fast"], "dynvm: unknown backend 'fast'; valid backends: 'eager', 'dynvm'"),
        (
            ["--mode=quick"],
            "dynvm: unknown mode 'quick'; valid modes: "
            "'default', 'reduce-overhead', 'max-autotune'",
        ),
        (["--report", "json", "no/such/dir/report.json"], "dynvm: cannot write the report"),
    ],
)
def test_bad_option_values_stop_before_the_script_runs(args, message):
    result = dynvm("run", *args, str(SCRIPTS / "print_context.py"))
    assert result.returncode == 2
    assert result.stdout == ""  # the script never ran
    assert result.stderr.startswith(message)


def test_bad_dynvm_logs_stops_before_the_script_runs():
    env = base_env(package_dir())
    env["DYNVM_LOGS"] = "graph,everything"
    result = dynvm("run", str(SCRIPTS / "print_context.py"), env=env)
    assert result.returncode == 2
    assert result.stdout == ""
    assert "DYNVM_LOGS: unknown log name 'everything'" in result.stderr
    assert "graph, guards, breaks, recompiles, kernels, loops, glue, perf" in result.stderr


def test_options_end_at_the_script():
    args = [str(SCRIPTS / "print_context.py"), "--backend", "nonsense", "--help", "--"]
    result = dynvm("run", "--backend=eager", "--", *args)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["argv"] == args


def test_run_options_reach_the_package(tmp_path):
    script = str(SCRIPTS / "print_run_settings.py")
    options = [
        "--include", "*.py", "--include=model/*", "--exclude", "test_*",
        "--backend", "eager", "--mode", "max-autotune", "--graphs", "graphs-out",
        "--report", "json", "out.json", "--no-compile",
    ]
    result = dynvm("run", *options, script, "a1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "script": script,
        "args": ["a1"],
        "include": ["*.py", "model/*"],
        "exclude": ["test_*"],
        "report": "json",
        "report_file": str(tmp_path / "out.json"),
        "compile": False,
        "backend": "eager",
        "mode": "max-autotune",
        "graphs_dir": str(tmp_path / "graphs-out"),
    }


def test_run_option_defaults():
    result = dynvm("run", "--report=text", str(SCRIPTS / "print_run_settings.py"))
    assert result.returncode == 0, result.stderr
    settings = json.loads(result.stdout)
    assert settings["backend"] == "dynvm"
    assert settings["mode"] == "default"
    assert settings["compile"] is True
    assert settings["include"] == settings["exclude"] == []
    assert settings["report"] == "text"
    assert settings["report_file"] is None
    assert settings["graphs_dir"] is None


# --- the report ------------------------------------------------------------------------


def test_text_report_goes_to_stderr_and_says_how_graphs_run():
    result = dynvm("run", str(SCRIPTS / "import_sibling.py"))
    assert result.returncode == 0
    assert "dynvm" not in result.stdout
    script_stderr, report = split_report(result.stderr)
    assert script_stderr == ""
    assert "run report for import_sibling.py" in report
    assert "0 frames compiled, 0 graphs, 0 graph breaks, 0 recompiles" in report
    # Compiling was on, and waited for torch, which the script never imported.
    assert "nothing was compiled: the script never imported torch" in report
    eager = dynvm("run", "--backend", "eager", str(SCRIPTS / "import_sibling.py"))
    eager_report = split_report(eager.stderr)[1]
    assert "0 frames compiled" in eager_report
    assert "not built yet" not in eager_report  # the eager backend is


@pytest.mark.skipif(not codegen_built(), reason="this build has no CPU code generator")
def test_a_second_run_reuses_the_kernels_and_the_report_says_so(tmp_path):
    env = base_env(package_dir())
    env["DYNVM_CACHE_DIR"] = str(tmp_path / "cache")
    reports = []
    for _ in range(2):
        result = dynvm("run", "--report", "json", str(tmp_path / "r.json"),
                       str(SCRIPTS / "small_model.py"), env=env)
        assert result.returncode == 0, result.stderr
        assert result.stdout == "(4, 32)\n"
        reports.append(json.loads((tmp_path / "r.json").read_text()))
    first, second = reports
    assert first["kernels_compiled"] > 0 and first["kernels_from_disk"] == 0, first
    assert second["kernels_compiled"] == 0, second
    assert second["kernels_from_disk"] == first["kernels_compiled"], second
    assert second["kernel_cache_dir"] == str(tmp_path / "cache" / "kernels")
    text = dynvm("run", str(SCRIPTS / "small_model.py"), env=env)
    line = f"kernels: 0 compiled, {first['kernels_compiled']} reused from the disk cache"
    assert line in split_report(text.stderr)[1], text.stderr


def test_a_script_that_never_imports_torch_runs_without_it():
    result = dynvm("run", str(SCRIPTS / "no_torch.py"))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "[]\n"  # neither torch nor the native core was loaded
    report = split_report(result.stderr)[1]
    assert "nothing was compiled: the script never imported torch" in report


def test_compiling_starts_when_the_script_imports_torch():
    result = dynvm("run", "--backend", "eager", str(SCRIPTS / "late_torch.py"))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "before False False\nafter [1.0, 3.0, 5.0, 7.0] True\n"
    report = split_report(result.stderr)[1]
    assert "1 graphs" in report and "graph of 2 ops: scale" in report, report


def test_report_says_when_compilation_was_turned_off():
    no_compile = dynvm("run", "--no-compile", str(SCRIPTS / "import_sibling.py"))
    assert "turned off by --no-compile" in no_compile.stderr
    env = base_env(package_dir())
    env["DYNVM_DISABLE"] = "1"
    disabled = dynvm("run", str(SCRIPTS / "import_sibling.py"), env=env)
    assert "turned off by DYNVM_DISABLE" in disabled.stderr


def test_json_report_is_written_after_system_exit_and_chdir(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = dynvm(
        "run",
        "--report",
        "json",
        "report.json",
        "--backend",
        "eager",
        str(SCRIPTS / "chdir_and_exit.py"),
        str(elsewhere),
        cwd=tmp_path,
    )
    assert result.returncode == 4
    assert result.stdout == ""
    assert result.stderr == ""  # the JSON report replaces the text one
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["frames_compiled"] == 0
    assert report["graphs"] == []
    assert report["graph_breaks"] == []
    assert report["recompiles"] == []
    assert report["cache_hits"] == 0
    assert report["time_tracing_s"] == 0.0
    assert isinstance(report["time_running_s"], float) and report["time_running_s"] >= 0.0
    # Compiling was on, waiting for torch, which this script never imports.
    assert report["status"] == "the script never imported torch, so there was nothing to compile"
    assert report["backend"] == "eager"
    assert report["script"] == str(SCRIPTS / "chdir_and_exit.py")


def test_forked_child_does_not_report_again():
    result = dynvm("run", str(SCRIPTS / "fork_child.py"))
    assert result.returncode == 0
    assert sorted(result.stdout.splitlines()) == ["child", "parent"]
    assert result.stderr.count("run report for") == 1


# --- the other commands ----------------------------------------------------------------


def generated_version():
    header = (build_dir() / "generated" / "dynvm" / "version.h").read_text()
    return re.search(r'#define DYNVM_VERSION_STRING "([^"]+)"', header).group(1)


def test_version():
    import torch

    result = dynvm("--version")
    assert result.returncode == 0
    assert result.stderr == ""
    # The Python of the tests is the one dynvm was built for (CTest runs them with it).
    first, *targets = result.stdout.splitlines()
    assert first == (
        f"dynvm {generated_version()} (Python {platform.python_version()}, "
        f"torch {torch.__version__}, {sys.executable})"
    )
    # Then each code-generation target, as dynvm.config.targets() reports it.
    from dynvm import config

    expected = []
    for t in config.targets():
        if not t["built"]:
            expected.append(f"  {t['name']}: not built ({t['why_not']})")
        else:
            state = "usable" if t["usable"] else f"not usable here: {t['why_not']}"
            expected.append(f"  {t['name']}: built ({t['toolchain']}), {state}")
    assert targets == expected
    assert [line.split(":")[0].strip() for line in targets] == ["cpu", "cuda"]


def test_targets_are_reported_truthfully():
    import torch
    from dynvm import config

    targets = {t["name"]: t for t in config.targets()}
    assert list(targets) == ["cpu", "cuda"]
    for t in targets.values():
        assert t["usable"] <= t["built"]
        assert bool(t["why_not"]) == (not t["usable"])  # every target that is off says why
    cpu, cuda = targets["cpu"], targets["cuda"]
    from dynvm import _native

    assert cpu["usable"] == cpu["built"] == bool(_native.core().has_cpu_codegen)
    assert _native.core().has_codegen  # the fusion pipeline is in every build
    if cuda["usable"]:
        assert torch.cuda.is_available()  # a driver and a GPU, as torch sees them too
    elif cuda["built"] and not torch.cuda.is_available():
        assert "driver" in cuda["why_not"] or "GPU" in cuda["why_not"] or \
            "NVRTC" in cuda["why_not"]


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["help"], ["help", "help"]])
def test_help(args):
    result = dynvm(*args)
    assert result.returncode == 0
    assert result.stderr == ""
    assert result.stdout.startswith("usage: dynvm <command> [options]\n")
    for command in ("run [options] SCRIPT", "dis FILE.py|FILE.pyc [--json]", "--version"):
        assert command in result.stdout


@pytest.mark.parametrize("args", [["run", "--help"], ["run", "-h"], ["help", "run"]])
def test_run_help_lists_every_option(args):
    result = dynvm(*args)
    assert result.returncode == 0
    assert result.stderr == ""
    assert result.stdout.startswith("usage: dynvm run [options] SCRIPT [ARGS...]\n")
    for option in ("--include GLOB", "--exclude GLOB", "--report text", "--report json FILE",
                   "--no-compile", "--backend NAME", "--mode NAME", "--graphs DIR"):
        assert option in result.stdout


@pytest.mark.parametrize("args", [["dis", "--help"], ["help", "dis"]])
def test_dis_help(args):
    result = dynvm(*args)
    assert result.returncode == 0
    assert result.stdout.startswith("usage: dynvm dis FILE.py|FILE.pyc [--json]\n")


def test_dis_options_are_parsed():
    result = dynvm("dis", str(SCRIPTS / "print_context.py"), "--json")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("[")
    missing = dynvm("dis", "--json")
    assert missing.returncode == 2
    assert missing.stderr.startswith("dynvm: dis: missing the FILE to disassemble\n")
    unknown = dynvm("dis", "--text", "x.py")
    assert unknown.returncode == 2
    assert unknown.stderr.startswith("dynvm: dis: unknown option '--text'\n")
