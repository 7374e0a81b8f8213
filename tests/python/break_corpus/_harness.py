"""How the break corpus compares a compiled call with an eager one: everything a user
could observe of one call is collected into an Outcome (result, exception, stdout,
stderr, logging records, inputs and globals afterwards, grad mode, random generator
states), and two Outcomes are compared field by field."""

import collections
import collections.abc
import contextlib
import copy
import dataclasses
import io
import logging
import math
import os
import random
import traceback
import types
import typing
import warnings

import numpy as np
import torch

from corpus._case import Args

CORPUS_DIR = os.path.dirname(os.path.abspath(__file__))

_SCALARS = (bool, int, float, complex, str, bytes, type(None), torch.dtype, torch.device,
            range, slice, type(Ellipsis), torch.Size)


def _fail(where, message):
    raise AssertionError(f"{where}: {message}")


# --- capturing one call ----------------------------------------------------------------


class _Timeline:
    """The order in which output of each kind arrived: (kind, text) entries, with
    consecutive writes of one kind merged."""

    def __init__(self):
        self.entries = []

    def add(self, kind, text):
        if self.entries and self.entries[-1][0] == kind:
            self.entries[-1] = (kind, self.entries[-1][1] + text)
        else:
            self.entries.append((kind, text))


class _Stream(io.StringIO):
    def __init__(self, kind, timeline):
        super().__init__()
        self._kind, self._timeline = kind, timeline

    def write(self, text):
        self._timeline.add(self._kind, text)
        return super().write(text)


class _RecordList(logging.Handler):
    def __init__(self, timeline):
        super().__init__(level=logging.DEBUG)
        self.records = []
        self._timeline = timeline

    def emit(self, record):
        exc = None
        if record.exc_info and record.exc_info[0] is not None:
            exc = (record.exc_info[0].__name__, str(record.exc_info[1]))
        self.records.append({
            "logger": record.name,
            "level": record.levelname,
            "message": record.getMessage(),
            "file": os.path.basename(record.pathname),
            "lineno": record.lineno,
            "funcName": record.funcName,
            "exc": exc,
        })
        self._timeline.add("log", record.getMessage() + "\n")


def _warning_entry(w):
    return {"category": w.category.__name__, "message": str(w.message),
            "file": os.path.basename(w.filename), "lineno": w.lineno}


@contextlib.contextmanager
def capture_output():
    """Captures sys.stdout, sys.stderr, every logging record (root logger, DEBUG and
    up) and every warning (all shown, none turned into errors) while the block runs,
    and the order in which they interleave; yields a dict filled in at exit."""
    captured = {}
    timeline = _Timeline()
    out, err = _Stream("stdout", timeline), _Stream("stderr", timeline)
    handler = _RecordList(timeline)
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    caught = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            original_showwarning = warnings.showwarning

            def show(message, category, filename, lineno, file=None, line=None):
                original_showwarning(message, category, filename, lineno, file, line)
                timeline.add("warning", f"{category.__name__}: {message}\n")

            warnings.showwarning = show
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                yield captured
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        captured["stdout"] = out.getvalue()
        captured["stderr"] = err.getvalue()
        captured["logs"] = handler.records
        captured["warnings"] = [_warning_entry(w) for w in caught]
        captured["timeline"] = timeline.entries


def user_frames(tb):
    """(file, line, function) of each traceback entry in the corpus's own files."""
    return [(os.path.basename(f.filename), f.lineno, f.name)
            for f in traceback.extract_tb(tb)
            if os.path.dirname(os.path.abspath(f.filename)) == CORPUS_DIR
            and os.path.abspath(f.filename) != os.path.abspath(__file__)]


def describe_exception(exc):
    """What the comparison looks at of an exception: type, message, args, where it
    was raised in corpus code, and the same for its cause and context."""
    if exc is None:
        return None
    return {
        "type": type(exc),
        "message": str(exc),
        "args": repr(exc.args),
        "frames": user_frames(exc.__traceback__),
        "cause": describe_exception(exc.__cause__),
        "context": None if exc.__suppress_context__ else describe_exception(exc.__context__),
    }


@dataclasses.dataclass
class Outcome:
    """Everything observable about one call."""

    result: typing.Any
    exception: typing.Any  # describe_exception(...) or None
    stdout: str
    stderr: str
    logs: list
    warnings: list
    timeline: list  # the interleaving of stdout, stderr, logging and warnings
    inputs: Args  # the inputs, after the call
    globals: dict  # deep copies of the watched globals after the call
    grad_enabled: bool
    torch_rng: torch.Tensor
    python_rng: tuple
    numpy_rng: typing.Any


def seed_everything(seed):
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)


def run_call(fn, inputs, *, seed, module=None, global_names=()):
    """Calls fn with `inputs` (an Args) after seeding every random generator with
    `seed`, capturing everything observable."""
    seed_everything(seed)
    result = exception = None
    with capture_output() as captured:
        try:
            result = fn(*inputs.args, **inputs.kwargs)
        except Exception as exc:  # noqa: BLE001 -- the comparison looks at it
            exception = describe_exception(exc)
            del exc
    watched = {name: copy.deepcopy(vars(module)[name]) for name in global_names}
    return Outcome(
        result=result, exception=exception, stdout=captured["stdout"],
        stderr=captured["stderr"], logs=captured["logs"],
        warnings=captured["warnings"], timeline=captured["timeline"], inputs=inputs,
        globals=watched, grad_enabled=torch.is_grad_enabled(),
        torch_rng=torch.random.get_rng_state(), python_rng=random.getstate(),
        numpy_rng=np.random.get_state()[1].copy())


def restore_globals(module, values):
    """Sets the watched globals of `module` to copies of `values`, in place where the
    object is a list, dict or set (so identity-guarded globals stay the same object)."""
    for name, value in values.items():
        current = vars(module).get(name)
        value = copy.deepcopy(value)
        if type(current) is type(value) and isinstance(value, list):
            current[:] = value
        elif type(current) is type(value) and isinstance(value, (dict, set)):
            current.clear()
            current.update(value)
        elif type(current) is type(value) and isinstance(value, types.SimpleNamespace):
            vars(current).clear()
            vars(current).update(vars(value))
        else:
            setattr(module, name, value)


# --- comparing -------------------------------------------------------------------------


def _assert_tensor_same(actual, expected, where, rtol, atol):
    if not isinstance(actual, torch.Tensor):
        _fail(where, f"expected a tensor, got {type(actual).__name__}: {actual!r}")
    if type(actual) is not type(expected):
        _fail(where, f"tensor type {type(actual).__name__} != {type(expected).__name__}")
    for attribute in ("dtype", "shape", "device", "requires_grad", "layout", "is_leaf"):
        mine, theirs = getattr(actual, attribute), getattr(expected, attribute)
        if mine != theirs:
            _fail(where, f"{attribute} {mine} != {theirs}")
    if actual.is_leaf and actual.stride() != expected.stride():
        _fail(where, f"strides {actual.stride()} != {expected.stride()}")
    mine, theirs = actual.detach(), expected.detach()
    if theirs.is_floating_point() or theirs.is_complex():
        try:
            torch.testing.assert_close(mine, theirs, rtol=rtol, atol=atol, equal_nan=True)
        except AssertionError as error:
            _fail(where, str(error))
    elif not torch.equal(mine, theirs):
        _fail(where, f"values differ:\n{mine}\n!=\n{theirs}")
    if expected.is_leaf:
        if (actual.grad is None) != (expected.grad is None):
            _fail(where + ".grad", f"{actual.grad} != {expected.grad}")
        if expected.grad is not None:
            _assert_tensor_same(actual.grad, expected.grad, where + ".grad", rtol, atol)


def _module_state(module):
    state = {}
    for name, tensor in module.state_dict(keep_vars=True).items():
        state[name] = tensor
    for name, child in module.named_modules():
        attrs = {k: v for k, v in vars(child).items() if not k.startswith("_")}
        state[f"{name or '<root>'}.__attributes__"] = attrs
    return state


def _optimizer_state(optimizer):
    return {"type": type(optimizer).__name__, "state_dict": optimizer.state_dict()}


def _remaining(iterator):
    return list(iterator)


def assert_same(actual, expected, where="result", *, rtol=1e-5, atol=1e-6):
    """Asserts `actual` equals `expected` structurally: same container types, lengths
    and keys in the same order; tensors of the same dtype, shape, device,
    requires_grad and gradients, values within tolerance (integers and booleans
    exactly); modules by parameters, buffers, gradients and plain attributes;
    optimizers by state_dict; iterators by what is left in them; user objects by their
    attributes; functions by code and closure cells; other values by type and ==."""
    recurse = lambda a, e, w: assert_same(a, e, w, rtol=rtol, atol=atol)  # noqa: E731
    if isinstance(expected, torch.Tensor):
        _assert_tensor_same(actual, expected, where, rtol, atol)
        return
    if type(actual) is not type(expected):
        _fail(where, f"type {type(actual).__name__} != {type(expected).__name__} "
                     f"({actual!r:.200} vs {expected!r:.200})")
    if isinstance(expected, torch.nn.Module):
        recurse(_module_state(actual), _module_state(expected), where)
    elif isinstance(expected, torch.optim.Optimizer):
        recurse(_optimizer_state(actual), _optimizer_state(expected), where)
    elif isinstance(expected, np.ndarray):
        if actual.dtype != expected.dtype or actual.shape != expected.shape:
            _fail(where, f"array {actual.dtype}{actual.shape} != {expected.dtype}{expected.shape}")
        if not np.allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True):
            _fail(where, f"{actual} != {expected}")
    elif isinstance(expected, io.StringIO):
        recurse((actual.getvalue(), actual.tell()), (expected.getvalue(), expected.tell()),
                where + "<StringIO contents and position>")
    elif isinstance(expected, random.Random):
        recurse(actual.getstate(), expected.getstate(), where + "<random.Random state>")
    elif isinstance(expected, torch.Generator):
        recurse(actual.get_state(), expected.get_state(), where + "<torch.Generator state>")
    elif isinstance(expected, np.random.Generator):
        recurse(actual.bit_generator.state, expected.bit_generator.state,
                where + "<numpy Generator state>")
    elif isinstance(expected, collections.abc.Iterator):
        recurse(_remaining(actual), _remaining(expected), where + "<remaining items>")
    elif isinstance(expected, torch.Size):
        if actual != expected:
            _fail(where, f"{actual} != {expected}")
    elif isinstance(expected, (tuple, list, collections.deque)):
        if len(actual) != len(expected):
            _fail(where, f"length {len(actual)} != {len(expected)}: {actual!r:.300} vs "
                         f"{expected!r:.300}")
        for index, (mine, theirs) in enumerate(zip(actual, expected)):
            recurse(mine, theirs, f"{where}[{index}]")
    elif isinstance(expected, dict):
        if list(actual) != list(expected):
            _fail(where, f"keys {list(actual)} != {list(expected)}")
        for key in expected:
            recurse(actual[key], expected[key], f"{where}[{key!r}]")
    elif isinstance(expected, (set, frozenset)):
        if actual != expected:
            _fail(where, f"{actual!r} != {expected!r}")
    elif isinstance(expected, float):
        if not (actual == expected or (math.isnan(actual) and math.isnan(expected))
                or math.isclose(actual, expected, rel_tol=rtol, abs_tol=atol)):
            _fail(where, f"{actual!r} != {expected!r}")
    elif isinstance(expected, _SCALARS):
        if actual != expected:
            _fail(where, f"{actual!r} != {expected!r}")
    elif isinstance(expected, BaseException):
        recurse(describe_exception(actual), describe_exception(expected), where)
    elif isinstance(expected, types.FunctionType):
        if actual.__code__ is not expected.__code__:
            _fail(where, f"{actual!r} != {expected!r}")
        cells = lambda f: [c.cell_contents for c in (f.__closure__ or ())]  # noqa: E731
        recurse(cells(actual), cells(expected), where + ".__closure__")
    elif isinstance(expected, types.MethodType):
        if actual.__func__ is not expected.__func__:
            _fail(where, f"{actual!r} != {expected!r}")
        recurse(actual.__self__, expected.__self__, where + ".__self__")
    elif isinstance(expected, (type, types.BuiltinFunctionType, types.ModuleType)):
        if actual != expected:
            _fail(where, f"{actual!r} != {expected!r}")
    elif hasattr(expected, "__dict__"):
        recurse(vars(actual), vars(expected), f"{where}.__dict__")
    elif actual != expected:
        _fail(where, f"{actual!r} != {expected!r}")


def _nodes(obj, path, out, seen):
    """(path, object) for every tensor, container and user object reachable in `obj`."""
    if isinstance(obj, _SCALARS) or id(obj) in seen:
        return
    seen.add(id(obj))
    out.append((path, obj))
    if isinstance(obj, torch.Tensor):
        return
    if isinstance(obj, torch.nn.Module):
        for name, tensor in obj.state_dict(keep_vars=True).items():
            _nodes(tensor, f"{path}.{name}", out, seen)
    elif isinstance(obj, (tuple, list)):
        for index, item in enumerate(obj):
            _nodes(item, f"{path}[{index}]", out, seen)
    elif isinstance(obj, dict):
        for key, item in obj.items():
            _nodes(item, f"{path}[{key!r}]", out, seen)
    elif hasattr(obj, "__dict__") and not callable(obj) and not isinstance(
            obj, (torch.optim.Optimizer, types.ModuleType)):
        for key, item in vars(obj).items():
            _nodes(item, f"{path}.{key}", out, seen)


def nodes(obj, root):
    out = []
    _nodes(obj, root, out, set())
    return out


def assert_aliasing_same(actual, expected):
    """Where eager returns one of its inputs (or a view of one), the compiled call must
    return the corresponding input of its own, and nowhere else an input; objects
    appearing twice in eager's result appear twice in the compiled one."""
    def index(outcome):
        return {id(o): p for p, o in nodes(outcome.inputs, "input")}

    mine_inputs, their_inputs = index(actual), index(expected)
    mine_nodes, their_nodes = nodes(actual.result, "result"), nodes(expected.result, "result")
    assert [p for p, _ in mine_nodes] == [p for p, _ in their_nodes], (
        "the result's objects are shared differently: "
        f"{[p for p, _ in mine_nodes]} != {[p for p, _ in their_nodes]}")
    for (path, mine), (_, theirs) in zip(mine_nodes, their_nodes):
        want, got = their_inputs.get(id(theirs)), mine_inputs.get(id(mine))
        assert got == want, (f"{path}: eager returns {want or 'a new object'}, compiled "
                             f"returns {got or 'a new object'}")
        if isinstance(theirs, torch.Tensor) and theirs._base is not None:
            want = their_inputs.get(id(theirs._base))
            got = mine_inputs.get(id(mine._base)) if mine._base is not None else None
            assert got == want, f"{path}: eager returns a view of {want}, compiled of {got}"


def assert_outcomes_same(actual, expected, *, rtol=1e-5, atol=1e-6, label=""):
    """Compares two Outcomes: everything must agree."""
    where = f"[{label}] " if label else ""
    same = lambda a, e, w: assert_same(a, e, where + w, rtol=rtol, atol=atol)  # noqa: E731
    if (actual.exception is None) != (expected.exception is None):
        _fail(where + "exception", f"compiled raised {actual.exception}, eager raised "
                                   f"{expected.exception}")
    if expected.exception is not None:
        same(actual.exception, expected.exception, "exception")
    if actual.stdout != expected.stdout:
        _fail(where + "stdout", f"\n--- compiled ---\n{actual.stdout}\n--- eager ---\n"
                                f"{expected.stdout}")
    if actual.stderr != expected.stderr:
        _fail(where + "stderr", f"\n--- compiled ---\n{actual.stderr}\n--- eager ---\n"
                                f"{expected.stderr}")
    same(actual.logs, expected.logs, "logging records")
    same(actual.warnings, expected.warnings, "warnings")
    same(actual.timeline, expected.timeline, "order of stdout, stderr, logging and warnings")
    same(actual.result, expected.result, "result")
    assert_aliasing_same(actual, expected)
    same(actual.inputs.args, expected.inputs.args, "positional inputs after the call")
    same(actual.inputs.kwargs, expected.inputs.kwargs, "keyword inputs after the call")
    same(actual.globals, expected.globals, "globals after the call")
    if actual.grad_enabled != expected.grad_enabled:
        _fail(where + "grad mode after the call", f"{actual.grad_enabled} != "
                                                  f"{expected.grad_enabled}")
    if not torch.equal(actual.torch_rng, expected.torch_rng):
        _fail(where + "torch generator", "a different number of random draws")
    if actual.python_rng != expected.python_rng:
        _fail(where + "random module", "a different number of random draws")
    if not np.array_equal(actual.numpy_rng, expected.numpy_rng):
        _fail(where + "numpy generator", "a different number of random draws")


def backward_through(result):
    """Backpropagates the sum of every tensor of `result` that requires grad; returns
    whether there was one."""
    outputs = [o for _, o in nodes(result, "result")
               if isinstance(o, torch.Tensor) and o.requires_grad and o.grad_fn is not None]
    if outputs:
        sum(o.sum() for o in outputs).backward()
    return bool(outputs)
