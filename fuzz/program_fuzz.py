#!/usr/bin/env python3
"""Differential fuzzer of dynvm on Python programs: seeded random functions over tensors
and Python values (fuzz/program_gen.py: control flow, closures, containers, user objects,
modules, exceptions, generators, globals, torch calls), run eagerly and compiled with
dynvm (backend "eager" and/or "dynvm"), several calls each; results, mutated inputs,
globals, printed output and exceptions must agree. A failure is minimised on the AST
(fuzz/program_minimise.py) and written out as a pytest regression test.

    PYTHONPATH=build/python python3 fuzz/program_fuzz.py --seconds 60 --seed 1
    PYTHONPATH=build/python python3 fuzz/program_fuzz.py --seed 1 --index 12 --print

Programs run in worker processes (a chunk each); a worker that crashes or hangs is
reported as a failure of the program it was running. docs/fuzzing.md says more.
"""

import argparse
import collections
import contextlib
import dataclasses
import io
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import types
import warnings
from typing import Dict, List, Optional, Tuple

# ATen's C++ warnings (var() over one element, ...) reach stderr when dynvm runs an op
# outside Python's warning machinery: kept out of the log of the fuzzer's processes.
os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")

import torch  # noqa: E402

import fusion_fuzz  # noqa: E402
import program_gen  # noqa: E402
import program_minimise  # noqa: E402

FUZZ_DIR = os.path.dirname(os.path.abspath(__file__))
DEFAULT_FINDINGS = os.path.join(FUZZ_DIR, "findings")
# Python floats computed from tensors (.item()) under backend "dynvm": kernels round
# differently, so compared as float32 results are (fusion_fuzz.TOLERANCES).
FLOAT_RTOL, FLOAT_ATOL = fusion_fuzz.TOLERANCES[torch.float32]
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|nan|inf")


# Bugs found and not fixed yet (docs/fuzzing.md; their programs are strict xfails in
# tests/python/test_program_fuzz.py): a campaign counts a failure that matches one among
# its outcomes instead of stopping on it again and again. --report-known turns this off.
KNOWN_BUGS = {
}


def known_bug(failure) -> Optional[str]:
    for title, matches in KNOWN_BUGS.items():
        if matches(failure):
            return title
    return None


def call_plan(calls):
    """(seed offset, variant) of each compiled call: the first traces, the second hits
    the cache with new tensor values, the third changes the Python values (variant 1),
    the fourth is back at variant 0, further ones alternate."""
    plan = []
    for k in range(calls):
        variant = {2: 1, 4: 2}.get(k, 0)
        plan.append((k, variant))
    return plan


# ---------------------------------------------------------------------------------------
# One call, observed.

@dataclasses.dataclass
class Observation:
    value: object = None
    exc: Optional[BaseException] = None
    printed: str = ""
    args: list = dataclasses.field(default_factory=list)
    kwargs: dict = dataclasses.field(default_factory=dict)
    globals: dict = dataclasses.field(default_factory=dict)


def load(source, module_name="program_fuzz_program"):
    """The program's namespace: a fresh one per call, so that compiled variants of
    other programs (or of the other side of the comparison) are never reused."""
    namespace = {"__name__": module_name}
    exec(compile(source, "<program>", "exec"), namespace)
    return namespace


def observe(fn, namespace, seed_offset, variant) -> Observation:
    seed = namespace["make_inputs"].__defaults__[0] + seed_offset
    args, kwargs = namespace["make_inputs"](seed, variant)
    out = Observation(args=args, kwargs=kwargs)
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        try:
            out.value = fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - compared with the other side
            out.exc = e
    out.printed = buffer.getvalue()
    out.globals = {k: namespace[k] for k in program_gen.GLOBAL_NAMES if k in namespace}
    return out


# ---------------------------------------------------------------------------------------
# Comparison: exact types, recursively; tensors and floats exact under backend "eager",
# within float32 rounding under backend "dynvm".

class Mismatch(Exception):
    def __init__(self, category, message):
        super().__init__(message)
        self.category = category  # "type", "value", "length", "keys"


class Comparer:
    def __init__(self, eager_ns, compiled_ns, exact):
        self.exact = exact
        # Classes the program defines exist once per namespace: eager's maps to compiled's.
        self.classes = {id(v): compiled_ns.get(k) for k, v in eager_ns.items()
                        if isinstance(v, type)}

    def expected_type(self, eager_type):
        return self.classes.get(id(eager_type), eager_type)

    def same(self, actual, expected, where, depth=0):
        if depth > 40:
            return
        if type(actual) is not self.expected_type(type(expected)):
            raise Mismatch("type", f"{where}: {type(actual).__qualname__} {_short(actual)}, "
                                   f"eager {type(expected).__qualname__} {_short(expected)}")
        deeper = depth + 1
        if isinstance(expected, torch.Tensor):
            self.same_tensor(actual, expected, where)
        elif isinstance(expected, float):
            self.same_float(actual, expected, where)
        elif isinstance(expected, str):
            self.same_text(actual, expected, where)  # f-strings of rounded floats
        elif isinstance(expected, (collections.abc.KeysView, collections.abc.ValuesView,
                                   collections.abc.ItemsView)):
            self.same(list(actual), list(expected), f"{where} (view)", deeper)
        elif isinstance(expected, dict):
            if list(actual) != list(expected):
                raise Mismatch("keys", f"{where}: keys {list(actual)!r:.200}, eager "
                                       f"{list(expected)!r:.200}")
            if isinstance(expected, collections.defaultdict):
                self.same_callable(actual.default_factory, expected.default_factory,
                                   f"{where}.default_factory")
            for key in expected:
                if not isinstance(key, str) or not key.startswith("_dynvm"):
                    self.same(actual[key], expected[key], f"{where}[{key!r}]", deeper)
        elif isinstance(expected, (list, tuple, collections.deque)):
            if len(actual) != len(expected):
                raise Mismatch("length", f"{where}: length {len(actual)} {_short(actual)}, "
                                         f"eager {len(expected)} {_short(expected)}")
            if isinstance(expected, collections.deque) and actual.maxlen != expected.maxlen:
                raise Mismatch("value", f"{where}: maxlen {actual.maxlen}, eager {expected.maxlen}")
            for i, (a, e) in enumerate(zip(actual, expected)):
                self.same(a, e, f"{where}[{i}]", deeper)
        elif isinstance(expected, (set, frozenset)):
            self.same_set(actual, expected, where, deeper)
        elif isinstance(expected, BaseException):
            self.same(actual.args, expected.args, f"{where}.args", deeper)
        elif isinstance(expected, type):
            if actual is not self.expected_type(expected):
                raise Mismatch("value", f"{where}: class {actual!r}, eager {expected!r}")
        elif isinstance(expected, (types.FunctionType, types.MethodType,
                                   types.BuiltinFunctionType)):
            self.same_callable(actual, expected, where)
        elif isinstance(expected, torch.nn.Module) or (
                hasattr(expected, "__dict__") and not isinstance(expected, type)
                and type(expected).__module__ == "program_fuzz_program"):
            self.same(vars(actual), vars(expected), f"{where}.__dict__", deeper)
        elif actual != expected:
            raise Mismatch("value", f"{where}: {_short(actual)}, eager {_short(expected)}")

    def same_set(self, actual, expected, where, depth):
        """A set holding tensors (hashed by identity) cannot be compared with `==` across
        the two runs, whose tensors are other objects, and its order follows their
        addresses: the other items must be equal, and each eager tensor must have a
        matching compiled one."""
        if len(actual) != len(expected):
            raise Mismatch("length", f"{where}: length {len(actual)} {_short(actual)}, "
                                     f"eager {len(expected)} {_short(expected)}")
        tensors = [t for t in expected if isinstance(t, torch.Tensor)]
        others = {v for v in expected if not isinstance(v, torch.Tensor)}
        mine = [t for t in actual if isinstance(t, torch.Tensor)]
        if {v for v in actual if not isinstance(v, torch.Tensor)} != others or \
                len(mine) != len(tensors):
            raise Mismatch("value", f"{where}: {_short(actual)}, eager {_short(expected)}")
        for e in tensors:
            for i, a in enumerate(mine):
                try:
                    self.same(a, e, f"{where} (a tensor)", depth)
                except Mismatch:
                    continue
                del mine[i]
                break
            else:
                raise Mismatch("value", f"{where}: no tensor matches {_short(e)}")

    def same_callable(self, actual, expected, where):
        if getattr(actual, "__qualname__", actual) != getattr(expected, "__qualname__", expected):
            raise Mismatch("value", f"{where}: {actual!r}, eager {expected!r}")

    def same_float(self, actual, expected, where):
        if actual == expected or (math.isnan(actual) and math.isnan(expected)):
            return
        if not self.exact and math.isfinite(expected) and \
                abs(actual - expected) <= FLOAT_ATOL * max(1.0, abs(expected)) + \
                FLOAT_RTOL * abs(expected):
            return
        raise Mismatch("value", f"{where}: {actual!r}, eager {expected!r}")

    def same_tensor(self, actual, expected, where):
        for attribute in ("dtype", "shape", "device", "requires_grad", "layout"):
            mine, theirs = getattr(actual, attribute), getattr(expected, attribute)
            if mine != theirs:
                raise Mismatch("value", f"{where}: {attribute} {mine}, eager {theirs}")
        a, e = actual.detach(), expected.detach()
        if self.exact:
            nan = e.isnan() if e.is_floating_point() else torch.zeros_like(e, dtype=torch.bool)
            if torch.equal(a.isnan() if a.is_floating_point() else nan, nan) and \
                    torch.equal(torch.where(nan, torch.zeros_like(a), a),
                                torch.where(nan, torch.zeros_like(e), e)):
                return
            bad = (a != e) & ~nan
            at = tuple(bad.nonzero()[0].tolist()) if bad.any() else "NaN positions"
            raise Mismatch("value", f"{where}: differs at {at}: compiled\n{a}\neager\n{e}")
        problem = fusion_fuzz.compare_tensor(a, e, (), where, precision=torch.float32)
        if problem:
            raise Mismatch("value", problem)

    def same_text(self, actual, expected, where):
        """Printed output and strings: equal, except that numbers may differ by rounding
        under backend "dynvm" (one unit of the last printed digit, or the float32
        tolerance)."""
        if actual == expected:
            return
        if not self.exact:
            a_numbers, e_numbers = NUMBER.findall(actual), NUMBER.findall(expected)
            if NUMBER.split(actual) == NUMBER.split(expected) and len(a_numbers) == len(e_numbers) \
                    and all(_close_text(x, y) for x, y in zip(a_numbers, e_numbers)):
                return
        if where != "stdout":
            raise Mismatch("value", f"{where}: {_short(actual)}, eager {_short(expected)}")
        raise Mismatch("value", f"{where}: compiled printed\n{actual[-2000:]}\neager printed\n"
                                f"{expected[-2000:]}")


def _close_text(actual, expected):
    if actual == expected:
        return True
    a, e = float(actual), float(expected)
    if not math.isfinite(e):
        return False
    digits = expected.split("e")[0].split("E")[0]
    unit = 10.0 ** -len(digits.split(".")[1]) if "." in digits else 1.0
    if "e" in expected.lower():
        unit *= 10.0 ** int(expected.lower().split("e")[1])
    return abs(a - e) <= unit * 1.01 + FLOAT_ATOL * max(1.0, abs(e)) + FLOAT_RTOL * abs(e)


def _short(value):
    text = repr(value)
    return text if len(text) <= 160 else text[:157] + "..."


# ---------------------------------------------------------------------------------------
# Checking a program.

@dataclasses.dataclass
class Failure:
    kind: str  # what went wrong; minimising keeps candidates that fail the same way
    message: str
    source: str
    backend: str
    seed: int = 0
    index: int = 0
    call: int = 0
    minimised_from: int = 0  # lines of the program before minimising (0: not minimised)

    def headline(self):
        return (f"program fuzz failure (backend {self.backend!r}, seed {self.seed}, program "
                f"{self.index}, call {self.call + 1}): {self.kind}")

    def report(self):
        lines = len(self.source.splitlines())
        size = (f"minimised from {self.minimised_from} to {lines} lines"
                if self.minimised_from else f"{lines} lines")
        return (f"{self.headline()}\n{self.message}\n"
                f"reproduce: PYTHONPATH=build/python python3 fuzz/program_fuzz.py --seed "
                f"{self.seed} --index {self.index} --backend {self.backend}\n"
                f"program ({size}):\n\n{self.source}")

    def to_json(self):
        return dataclasses.asdict(self)


@dataclasses.dataclass
class RunInfo:
    counters: Dict[str, int] = dataclasses.field(default_factory=dict)
    eager_raised: bool = False

    def outcome(self):
        c = self.counters
        if c.get("graph_breaks", 0):
            return "with graph breaks"
        if c.get("frames_traced", 0):
            return "fully traced"
        return "not traced"


def _print_warning(message, category, filename, lineno, file=None, line=None):
    print(f"[{category.__name__} line {lineno}] {message}")


_warmed_up = False


def _warm_up():
    """One small compiled call per process before any comparison, so that the imports a
    first trace makes happen outside the programs' calls: sympy, imported by torch's
    shape code, adds a warnings filter, which resets every registry of "default" warnings
    and would make eager show a warning again that the compiled side does not."""
    global _warmed_up
    if not _warmed_up:
        import torch

        import dynvm

        _warmed_up = True
        dynvm.compile(lambda x: x * 2 + 1)(torch.ones(2))
        dynvm.reset()


def _compiled_with(backend):
    import dynvm

    return lambda fn: dynvm.compile(fn, backend=backend)


def check_source(source, backend, calls=4, compile_fn=None, seed=0, index=0
                 ) -> Tuple[Optional[Failure], RunInfo]:
    """Runs the program eagerly and compiled, `calls` times (call_plan), and compares."""
    import dynvm

    info = RunInfo()
    _warm_up()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # The programs' own warnings (program_gen.gen_warnings) are printed, each once per
        # place, or raised; the printed output is compared.
        warnings.filterwarnings("default", message="fuzz:")
        warnings.filterwarnings("error", message="fuzz-error:")
        warnings.showwarning = _print_warning
        dynvm.reset()
        eager_ns, compiled_ns = load(source), load(source)
        compiled = (compile_fn or _compiled_with(backend))(compiled_ns["f"])
        comparer = Comparer(eager_ns, compiled_ns, exact=backend == "eager")
        failure = None
        for call, (seed_offset, variant) in enumerate(call_plan(calls)):
            expected = observe(eager_ns["f"], eager_ns, seed_offset, variant)
            actual = observe(compiled, compiled_ns, seed_offset, variant)
            info.eager_raised |= expected.exc is not None
            problem = compare(actual, expected, comparer)
            if problem is not None:
                kind, message = problem
                failure = Failure(kind, message, source, backend, seed, index, call)
                break
        info.counters = dict(dynvm.counters)
    return failure, info


def compare(actual: Observation, expected: Observation, comparer: Comparer):
    """(kind, message) of the first difference, or None."""
    if expected.exc is not None or actual.exc is not None:
        if actual.exc is None:
            return "no-exception", (f"eager raised {type(expected.exc).__name__}: "
                                    f"{expected.exc}; compiled returned {_short(actual.value)}")
        if expected.exc is None:
            return (f"raised:{type(actual.exc).__name__}",
                    f"compiled raised {type(actual.exc).__name__}: {actual.exc}\n"
                    + fusion_fuzz._short_traceback(actual.exc))
        try:
            comparer.same(actual.exc, expected.exc, "exception")
        except Mismatch:
            return "exception", (f"compiled raised {type(actual.exc).__name__}: {actual.exc}; "
                                 f"eager raised {type(expected.exc).__name__}: {expected.exc}")
    checks = [("print", lambda: comparer.same_text(actual.printed, expected.printed, "stdout"))]
    if expected.exc is None:
        checks.insert(0, ("result", lambda: comparer.same(actual.value, expected.value, "result")))
    checks += [
        ("mutation", lambda: comparer.same(actual.args, expected.args, "argument")),
        ("mutation", lambda: comparer.same(actual.kwargs, expected.kwargs, "keyword argument")),
        ("global", lambda: comparer.same(actual.globals, expected.globals, "global")),
    ]
    for kind, run_check in checks:
        try:
            run_check()
        except Mismatch as m:
            return f"{kind}:{m.category}", str(m)
    return None


# ---------------------------------------------------------------------------------------
# Checking in a child process: crashes and hangs, also while minimising them.

def check_isolated(source, backend, calls=4, timeout_s=120.0) -> Tuple[str, str]:
    """(kind, message) of the program run by a fresh interpreter: "pass", a failure's
    kind, "crash" or "hang"."""
    with tempfile.TemporaryDirectory() as folder:
        program = os.path.join(folder, "program.py")
        result = os.path.join(folder, "result.json")
        with open(program, "w") as out:
            out.write(source)
        command = [sys.executable, os.path.abspath(__file__), "--check-file", program,
                   "--backend", backend, "--calls", str(calls), "--worker-out", result]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return "hang", f"no result after {timeout_s:.0f} s"
        if os.path.exists(result):
            with open(result) as f:
                data = json.load(f)
            return data["kind"], data["message"]
        return "crash", f"exit code {done.returncode}; stderr ends:\n{done.stderr[-1500:]}"


# ---------------------------------------------------------------------------------------
# Minimising and writing the regression test.

def minimise(failure: Failure, calls=4, compile_fn=None, budget_s=120.0,
             progress=lambda: None) -> Failure:
    isolated = failure.kind in ("crash", "hang")

    def still_fails(source):
        if isolated:
            return check_isolated(source, failure.backend, calls)[0] == failure.kind
        try:
            found, _ = check_source(source, failure.backend, calls, compile_fn)
        except Exception:  # noqa: BLE001 - a candidate that breaks the harness itself
            return False
        return found is not None and found.kind == failure.kind

    small = program_minimise.minimise(failure.source, still_fails, budget_s, progress)
    if small == failure.source:
        return failure
    if isolated:
        result = dataclasses.replace(failure, source=small)
    else:
        result, _ = check_source(small, failure.backend, calls, compile_fn)
        result = dataclasses.replace(result or failure, source=small, seed=failure.seed,
                                     index=failure.index)
    result.minimised_from = len(failure.source.splitlines())
    return result


REGRESSION_TEST = '''"""Found by fuzz/program_fuzz.py (seed {seed}, program {index},
backend {backend!r}): {kind}. Compiled must behave as eager: this test fails until the bug
is fixed.

{message}
"""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / {fuzz_dir!r}))
import program_fuzz  # noqa: E402

PROGRAM = {program}


def test_compiled_matches_eager():
    program_fuzz.assert_compiled_matches_eager(PROGRAM, {backend!r}, calls={calls})
'''


def assert_compiled_matches_eager(source, backend, calls=4):
    """What a regression test asserts: the program (in a child process, so that a crash
    fails the test instead of ending pytest) behaves compiled as it does eagerly."""
    kind, message = check_isolated(source, backend, calls)
    assert kind == "pass", f"{kind}: {message}"


def write_regression_test(failure: Failure, folder, calls=4):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"test_program_s{failure.seed}_i{failure.index}_"
                                f"{failure.backend}.py")
    program = ("r'''" + failure.source + "'''" if "'''" not in failure.source
               and not failure.source.endswith("\\") else repr(failure.source))
    message = failure.message.replace('"""', "'''").replace("\\", "/")[:1500]
    text = REGRESSION_TEST.format(
        seed=failure.seed, index=failure.index, backend=failure.backend, kind=failure.kind,
        message=message, fuzz_dir=os.path.relpath(FUZZ_DIR, os.path.abspath(folder)),
        program=program, calls=calls)
    with open(path, "w") as out:
        out.write(text)
    return path


# ---------------------------------------------------------------------------------------
# Campaigns.

@dataclasses.dataclass
class Summary:
    programs: int = 0
    seconds: float = 0.0
    failures: List[dict] = dataclasses.field(default_factory=list)
    features: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    nodes: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    outcomes: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    COUNTERS = ("features", "nodes", "outcomes")

    def record(self, program: program_gen.Program, backend, info: RunInfo):
        self.outcomes[f"{backend}: {info.outcome()}"] += 1
        if info.eager_raised:
            self.outcomes[f"{backend}: eager raised"] += 1
        for key in ("graph_breaks", "frames_traced", "recompiles", "eager_calls", "kernels",
                    "graph_failures"):
            self.outcomes[f"{backend}: {key}"] += info.counters.get(key, 0)

    def count_program(self, program: program_gen.Program):
        self.programs += 1
        self.features.update(program.tags)
        self.nodes.update(program.nodes)

    def to_json(self):
        data = {k: dict(getattr(self, k)) for k in self.COUNTERS}
        data.update(programs=self.programs, failures=self.failures)
        return data

    def merge_json(self, data):
        self.programs += data["programs"]
        self.failures += data["failures"]
        for k in self.COUNTERS:
            getattr(self, k).update(data[k])

    def text(self):
        def line(title, counter):
            items = sorted(counter.items())
            return f"{title} ({len(counter)}): " + ", ".join(f"{k} {v}" for k, v in items)

        rate = self.programs / self.seconds if self.seconds else 0.0
        missing = [t for t in program_gen.FEATURES if not self.features[t]]
        return "\n".join([
            f"{self.programs} programs in {self.seconds:.1f} s ({rate:.2f} programs/s), "
            f"{len(self.failures)} failures",
            line("features", self.features),
            "features never generated: " + (", ".join(missing) or "none"),
            line("AST nodes of f", self.nodes),
            line("outcomes", self.outcomes),
        ] + [f"failure: {f['headline']}" + (f" -> {f['test']}" if f.get("test") else "")
             for f in self.failures])


def run_campaign(seed, backends, start=0, count=None, seconds=None, calls=4,
                 minimise_failures=True, max_failures=20, findings=None, log=None,
                 event=lambda **_: None, fault=None, minimise_budget_s=120.0,
                 report_known=False) -> Summary:
    """Runs programs start, start+1, ... of `seed` in this process until `count` ran or
    `seconds` passed. `event` hears of each program started and finished, with its
    counts (the worker protocol); `fault` ("crash:I" or "hang:I") makes program I kill or
    stall the process, to test that the parent notices."""
    summary = Summary()
    began = time.monotonic()
    index = start
    while (count is None or index < start + count) and \
            (seconds is None or time.monotonic() - began < seconds) and \
            len(summary.failures) < max_failures:
        program = program_gen.generate(seed, index)
        one = Summary()
        one.count_program(program)
        for backend in backends:
            event(event="start", index=index, backend=backend)
            if fault == f"crash:{index}":
                os.abort()
            if fault == f"hang:{index}":
                time.sleep(3600)
            try:
                failure, info = check_source(program.source, backend, calls, seed=seed,
                                             index=index)
            except Exception as e:  # noqa: BLE001 - the harness itself failed on it
                failure, info = Failure("harness", f"{type(e).__name__}: {e}\n"
                                        + fusion_fuzz._short_traceback(e), program.source,
                                        backend, seed, index), RunInfo()
            one.record(program, backend, info)
            if failure is None:
                continue
            if not report_known and known_bug(failure):
                one.outcomes[f"{backend}: known bug: {known_bug(failure)}"] += 1
                continue
            if minimise_failures and failure.kind != "harness":
                failure = minimise(failure, calls, budget_s=minimise_budget_s,
                                   progress=lambda: event(event="alive", index=index))
            found = {"headline": failure.headline(), "report": failure.report()}
            if findings:
                found["test"] = write_regression_test(failure, findings, calls)
            one.failures.append(found)
            if log:
                log(failure.report() + (f"\nregression test: {found['test']}\n"
                                        if findings else ""))
        summary.merge_json(one.to_json())
        event(event="done", index=index, record=one.to_json())
        index += 1
    summary.seconds = time.monotonic() - began
    return summary


def run_in_workers(args, backends, log) -> Summary:
    """Runs the campaign in worker processes of `args.chunk` programs each, watching each
    through the events it writes: a worker that dies is a crash, one that writes nothing
    for `args.timeout` seconds a hang, of the program it started last; the next worker
    starts after that program."""
    summary = Summary()
    began = last_log = time.monotonic()
    index = args.start
    end = None if args.count is None else args.start + args.count
    events = os.path.join(tempfile.gettempdir(), f"program_fuzz_events_{os.getpid()}.jsonl")
    while len(summary.failures) < args.max_failures:
        left_s = None if args.seconds is None else args.seconds - (time.monotonic() - began)
        if (left_s is not None and left_s <= 1) or (end is not None and index >= end):
            break
        count = args.chunk if end is None else min(args.chunk, end - index)
        if os.path.exists(events):
            os.remove(events)
        command = [sys.executable, os.path.abspath(__file__), "--worker", "--seed", str(args.seed),
                   "--start", str(index), "--count", str(count), "--backend", args.backend,
                   "--calls", str(args.calls), "--events", events, "--findings", args.findings,
                   "--max-failures", str(args.max_failures - len(summary.failures)),
                   "--minimise-budget", str(args.minimise_budget)]
        if left_s is not None:
            command += ["--seconds", str(left_s)]
        if args.no_minimise:
            command.append("--no-minimise")
        if args.fault:
            command += ["--fault", args.fault]
        if args.report_known:
            command.append("--report-known")
        worker = subprocess.Popen(command)
        last_event, started, seen, status = time.monotonic(), None, 0, None
        while status is None:
            try:
                status = worker.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
            lines = _read_lines(events)
            for line in lines[seen:]:
                last_event = time.monotonic()
                if line["event"] == "start":
                    started = line
                elif line["event"] == "done":
                    started = None
                    summary.merge_json(line["record"])
                    index = line["index"] + 1
            seen = len(lines)
            if status is None and time.monotonic() - last_event > args.timeout:
                worker.kill()
                worker.wait()
                status = "hang"
            if time.monotonic() - last_log > 30:
                last_log = time.monotonic()
                log(f"[{last_log - began:.0f} s] {summary.programs} programs, up to "
                    f"{index - 1}, {len(summary.failures)} failures")
        if status == 0:
            continue
        # The worker died or hung: the program it was running is the failure.
        crashed = started["index"] if started else index
        backend = started["backend"] if started else backends[0]
        kind = "hang" if status == "hang" else "crash"
        program = program_gen.generate(args.seed, crashed)
        failure = Failure(kind, f"the worker process {'hung' if kind == 'hang' else 'died'} "
                          f"(exit status {worker.returncode}) running this program",
                          program.source, backend, args.seed, crashed)
        if not args.no_minimise:
            failure = minimise(failure, args.calls, budget_s=args.minimise_budget)
        found = {"headline": failure.headline(), "report": failure.report(),
                 "test": write_regression_test(failure, args.findings, args.calls)}
        log(failure.report() + f"\nregression test: {found['test']}\n")
        summary.failures.append(found)
        summary.count_program(program)
        index = crashed + 1
    if os.path.exists(events):
        os.remove(events)
    summary.seconds = time.monotonic() - began
    return summary


def _read_lines(path):
    """The complete JSON lines of the events file (the last may still be written)."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return []
    return [json.loads(line) for line in text.split("\n")[:-1]]


def _check_file(args):
    """--check-file: one program's verdict as JSON (what check_isolated reads)."""
    with open(args.check_file) as f:
        source = f.read()
    try:
        failure, _ = check_source(source, args.backend, args.calls)
    except Exception as e:  # noqa: BLE001 - the program does not even load
        verdict = {"kind": "harness", "message": f"{type(e).__name__}: {e}"}
    else:
        verdict = ({"kind": "pass", "message": ""} if failure is None
                   else {"kind": failure.kind, "message": failure.message})
    with open(args.worker_out, "w") as out:
        json.dump(verdict, out)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=None,
                        help="run for this long (default: 60 unless --count is given)")
    parser.add_argument("--count", type=int, default=None, help="run this many programs")
    parser.add_argument("--start", type=int, default=0, help="first program index")
    parser.add_argument("--index", type=int, default=None,
                        help="check only this program (with --print: print it)")
    parser.add_argument("--backend", choices=["dynvm", "eager", "both"], default="both")
    parser.add_argument("--calls", type=int, default=4, help="compiled calls per program")
    parser.add_argument("--print", action="store_true", help="print the program and stop")
    parser.add_argument("--no-minimise", action="store_true")
    parser.add_argument("--report-known", action="store_true",
                        help="report failures of the known bugs (KNOWN_BUGS) as failures too")
    parser.add_argument("--max-failures", type=int, default=20)
    parser.add_argument("--chunk", type=int, default=200,
                        help="programs per worker process (0: all in this process)")
    parser.add_argument("--timeout", type=float, default=180.0,
                        help="seconds a worker may run one program before it counts as hung")
    parser.add_argument("--minimise-budget", type=float, default=120.0,
                        help="seconds spent minimising one failure")
    parser.add_argument("--findings", default=DEFAULT_FINDINGS,
                        help="where regression tests of failures are written")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--events", help=argparse.SUPPRESS)
    parser.add_argument("--worker-out", help=argparse.SUPPRESS)
    parser.add_argument("--check-file", help=argparse.SUPPRESS)
    parser.add_argument("--fault", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    backends = ["eager", "dynvm"] if args.backend == "both" else [args.backend]
    if args.check_file:
        return _check_file(args)

    def log(text):
        print(text, flush=True)

    if args.index is not None:
        program = program_gen.generate(args.seed, args.index)
        if args.print:
            print(program.source)
            return 0
        status = 0
        for backend in backends:
            failure, info = check_source(program.source, backend, args.calls, seed=args.seed,
                                         index=args.index)
            if failure:
                if not args.no_minimise:
                    failure = minimise(failure, args.calls, budget_s=args.minimise_budget)
                print(failure.report())
                print("regression test:", write_regression_test(failure, args.findings,
                                                                  args.calls))
                status = 1
            else:
                print(f"backend {backend}: pass ({info.outcome()}, {info.counters})")
        return status
    if args.seconds is None and args.count is None:
        args.seconds = 60.0
    if args.worker:
        with open(args.events, "a") as events:
            def event(**fields):
                events.write(json.dumps(fields) + "\n")
                events.flush()

            run_campaign(args.seed, backends, args.start, args.count, args.seconds, args.calls,
                         not args.no_minimise, args.max_failures, args.findings, log, event,
                         args.fault, args.minimise_budget, args.report_known)
        return 0
    log(f"program fuzz: seed {args.seed}, backends {', '.join(backends)}, "
        + (f"{args.seconds:g} s" if args.seconds else f"{args.count} programs"))
    if args.chunk:
        summary = run_in_workers(args, backends, log)
    else:
        summary = run_campaign(args.seed, backends, args.start, args.count, args.seconds,
                               args.calls, not args.no_minimise, args.max_failures,
                               args.findings, log, fault=args.fault,
                               minimise_budget_s=args.minimise_budget,
                               report_known=args.report_known)
    log(summary.text())
    return 1 if summary.failures else 0


if __name__ == "__main__":
    sys.exit(main())
