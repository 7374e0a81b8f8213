"""The hooks the dynvm executable calls around `dynvm run`. Nothing here writes to stdout."""

import atexit
import os
import sys
import time

# Imported now, while sys.path does not yet hold the script's directory, so a
# json.py next to the user's script cannot replace the one the report needs.
from dynvm import config, report, stats
from dynvm._record import Record

REPORT_FORMATS = ("text", "json", "none")


class RunSettings(Record):
    """The validated options of one `dynvm run`. Paths are absolute. report_file is a str
    when report == "json", else None; graphs_dir a str or None. (A plain class: this
    module is imported before every script, and dataclasses cost 30 ms of start-up.)"""

    FIELDS = ("script", "args", "include", "exclude", "report", "report_file", "compile",
              "backend", "mode", "graphs_dir", "pid", "started")

    def __init__(self, **fields):
        missing = set(self.FIELDS) - set(fields)
        unknown = set(fields) - set(self.FIELDS)
        if missing or unknown:
            raise TypeError(f"RunSettings: missing {sorted(missing)}, unknown {sorted(unknown)}")
        self.__dict__.update(fields)


_current_run = None


def current_run():
    """The RunSettings of the `dynvm run` of this process, or None."""
    return _current_run


def _absolute(path):
    return None if path is None else os.path.abspath(path)


def settings_from_options(options):
    """Validates the options the executable parsed; raises ValueError on a bad value."""
    report_format = options.get("report", "text")
    if report_format not in REPORT_FORMATS:
        raise ValueError(
            f"unknown report format {report_format!r}; valid formats: text, json FILE, none"
        )
    report_file = options.get("report_file")
    if report_format == "json" and not report_file:
        raise ValueError("'--report json' needs a FILE to write the report to")
    if report_format == "json":
        report_dir = os.path.dirname(os.path.abspath(report_file))
        if not os.path.isdir(report_dir):
            raise ValueError(
                f"cannot write the report to {report_file}: {report_dir} is not a directory"
            )
    backend = options.get("backend")
    return RunSettings(
        script=os.path.abspath(options["script"]),
        args=list(options.get("args", [])),
        include=list(options.get("include", [])),
        exclude=list(options.get("exclude", [])),
        report=report_format,
        report_file=_absolute(report_file) if report_format == "json" else None,
        compile=bool(options.get("compile", True)),
        backend=config.check_backend(config.DEFAULT_BACKEND if backend is None else backend),
        mode=config.check_mode(options.get("mode")),
        graphs_dir=_absolute(options.get("graphs_dir")),
        pid=os.getpid(),
        started=time.perf_counter(),
    )


def begin_run(options):
    """Called by `dynvm run` after the interpreter started, before the script runs.

    `options` is a dict: script, args, include, exclude, report ("text", "json",
    "none"), report_file, compile, backend, mode, graphs_dir. Registers the report with
    atexit, so it is given at finalization however the script ends (SystemExit too).
    """
    global _current_run
    run = settings_from_options(options)
    config.enabled_logs()  # validates DYNVM_LOGS before the script starts
    _current_run = run
    atexit.register(_end_run, run)
    if run.compile and not config.disabled():
        _start_compiling(run)


def _start_compiling(run):
    """Turns the frame hook on for every frame of user code, now if torch is loaded, else
    once the script imports it: the hook lives in the native core, which links libtorch,
    so a script that never imports torch runs at python3's speed. Frames that start after
    torch has been imported are compiled; the one importing it runs on plainly."""
    if "torch" in sys.modules:
        _enable_compiling(run)
    else:
        sys.meta_path.insert(0, _CompileOnceTorchIsImported(run))


def _enable_compiling(run):
    from dynvm import _native, backends

    backend = run.backend
    if backends.unavailable_reason(backend, load=False) is not None:
        backend = "eager"  # graphs still run, op by op through ATen
    core = _native.core()
    if run.graphs_dir:
        core.set_graphs_dir(run.graphs_dir)
    core.enable_global(backend, False, config.cache_size_limit(), run.include, run.exclude,
                       _native.installed_package_directories(), run.mode)
    global _effective_backend
    _effective_backend = backend


class _CompileOnceTorchIsImported:
    """A one-shot finder at the front of sys.meta_path: when `torch` is first imported, its
    module is loaded as usual and then compiling is turned on."""

    def __init__(self, run):
        self._run = run

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(name)  # through the other finders
        if spec is not None and spec.loader is not None:
            spec.loader = _LoaderThenCompile(spec.loader, self._run)
        return spec


class _LoaderThenCompile:
    """Loads a module with `loader`, then turns compiling on; the module keeps `loader`."""

    def __init__(self, loader, run):
        self._loader = loader
        self._run = run

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        module.__loader__ = self._loader
        self._loader.exec_module(module)
        _enable_compiling(self._run)


_effective_backend = None


def effective_backend():
    """The backend graphs of this `dynvm run` ran with, or None when nothing compiled."""
    return _effective_backend


def _end_run(run):
    if os.getpid() != run.pid:
        return  # a forked child exiting normally: the parent reports
    if run.report == "none":
        return
    from dynvm import _native

    core = _native.loaded()
    if core is not None:
        core.disable_global()
    result = report.build(run, stats.current(), time.perf_counter() - run.started)
    err = sys.__stderr__
    if run.report == "json":
        try:
            report.write_json(result, run.report_file)
        except OSError as error:
            _write(err, f"dynvm: could not write the report to {run.report_file}: {error}\n")
        return
    _write(err, report.format_text(result))


def _write(stream, text):
    # stderr may be gone at exit (closed or set to None by the script).
    if stream is None:
        return
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):
        pass
