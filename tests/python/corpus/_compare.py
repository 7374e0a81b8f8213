"""How the tests compare a compiled call with eager: cloning inputs, structural
equality of results and side effects, and which outputs are inputs themselves."""

import copy
import math
import types

import torch

from corpus._case import Args

# The tolerance of the corpus: compiled with backend="eager" runs the same ATen
# kernels, so values agree to rounding.
CORPUS_ATOL = 1e-6
_SCALARS = (bool, int, float, complex, str, bytes, type(None), torch.dtype, torch.device,
            range, slice, type(Ellipsis))

_CALLABLES = (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
              types.BuiltinMethodType)


def clone(args):
    """A deep copy of an Args: tensors (keeping strides and aliasing between them),
    modules and user objects are all copied, so a call cannot touch the original."""
    copied_args, copied_kwargs = copy.deepcopy((args.args, args.kwargs))
    return Args(copied_args, copied_kwargs)


def call(fn, args):
    """Calls `fn` with an Args."""
    return fn(*args.args, **args.kwargs)


def _fail(where, message):
    raise AssertionError(f"{where}: {message}")


def _assert_tensor_same(actual, expected, where, rtol, atol):
    if not isinstance(actual, torch.Tensor):
        _fail(where, f"expected a tensor, got {type(actual).__name__}: {actual!r}")
    if type(actual) is not type(expected):
        _fail(where, f"tensor type {type(actual).__name__} != {type(expected).__name__}")
    for attribute in ("dtype", "shape", "device", "requires_grad", "layout"):
        mine, theirs = getattr(actual, attribute), getattr(expected, attribute)
        if mine != theirs:
            _fail(where, f"{attribute} {mine} != {theirs}")
    mine, theirs = actual.detach(), expected.detach()
    if theirs.is_floating_point() or theirs.is_complex():
        try:
            torch.testing.assert_close(mine, theirs, rtol=rtol, atol=atol, equal_nan=True)
        except AssertionError as error:
            _fail(where, str(error))
    elif not torch.equal(mine, theirs):
        _fail(where, f"values differ:\n{mine}\n!=\n{theirs}")


def _assert_module_same(actual, expected, where, rtol, atol):
    mine, theirs = actual.state_dict(), expected.state_dict()
    if list(mine) != list(theirs):
        _fail(where, f"state_dict keys {list(mine)} != {list(theirs)}")
    for key in theirs:
        assert_same(mine[key], theirs[key], f"{where}.{key}", rtol=rtol, atol=atol)
    for name, child in expected.named_modules():
        # Plain attributes (training, sizes, counters a forward updates) of each module.
        mine = _public_attributes(actual.get_submodule(name))
        theirs = _public_attributes(child)
        assert_same(mine, theirs, f"{where}.{name}" if name else where, rtol=rtol, atol=atol)


def _public_attributes(module):
    return {key: value for key, value in vars(module).items() if not key.startswith("_")}


def assert_same(actual, expected, where="result", *, rtol=0.0, atol=CORPUS_ATOL):
    """Asserts `actual` equals `expected` structurally: same container types, lengths
    and keys in the same order; tensors of the same dtype, shape, device and
    requires_grad with values within `atol`/`rtol` (integers and booleans exactly);
    Python values of the same type and equal."""
    if isinstance(expected, torch.Tensor):
        _assert_tensor_same(actual, expected, where, rtol, atol)
        return
    if type(actual) is not type(expected):
        _fail(where, f"type {type(actual).__name__} != {type(expected).__name__} "
                     f"({actual!r} vs {expected!r})")
    if isinstance(expected, torch.nn.Module):
        _assert_module_same(actual, expected, where, rtol, atol)
    elif isinstance(expected, torch.Size):
        if actual != expected:
            _fail(where, f"{actual} != {expected}")
    elif isinstance(expected, (tuple, list)):
        if len(actual) != len(expected):
            _fail(where, f"length {len(actual)} != {len(expected)}")
        for index, (mine, theirs) in enumerate(zip(actual, expected)):
            assert_same(mine, theirs, f"{where}[{index}]", rtol=rtol, atol=atol)
    elif isinstance(expected, dict):
        if list(actual) != list(expected):
            _fail(where, f"keys {list(actual)} != {list(expected)}")
        for key in expected:
            assert_same(actual[key], expected[key], f"{where}[{key!r}]", rtol=rtol, atol=atol)
    elif isinstance(expected, (set, frozenset)):
        if actual != expected:
            _fail(where, f"{actual!r} != {expected!r}")
    elif isinstance(expected, float):
        if not (actual == expected or (math.isnan(actual) and math.isnan(expected))):
            _fail(where, f"{actual!r} != {expected!r}")
    elif isinstance(expected, _SCALARS):
        if actual != expected:
            _fail(where, f"{actual!r} != {expected!r}")
    elif isinstance(expected, _CALLABLES):
        # Functions, classes, bound methods: the same object, or equal bound methods.
        if actual != expected:
            _fail(where, f"{actual!r} != {expected!r}")
    elif hasattr(expected, "__dict__"):
        assert_same(vars(actual), vars(expected), f"{where}.__dict__", rtol=rtol, atol=atol)
    elif actual != expected:
        _fail(where, f"{actual!r} != {expected!r}")


def tensor_leaves(obj, where="input"):
    """(path, tensor) for every tensor reachable in `obj` through tuples, lists, dict
    values, module parameters and buffers, and user objects' attributes."""
    found = []
    seen = set()

    def walk(value, path):
        if isinstance(value, torch.Tensor):
            found.append((path, value))
            return
        if id(value) in seen or isinstance(value, _SCALARS):
            return
        seen.add(id(value))
        if isinstance(value, torch.nn.Module):
            for name, tensor in value.state_dict(keep_vars=True).items():
                found.append((f"{path}.{name}", tensor))
        elif isinstance(value, (tuple, list)):
            for index, item in enumerate(value):
                walk(item, f"{path}[{index}]")
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{path}[{key!r}]")
        elif hasattr(value, "__dict__") and not callable(value):
            for key, item in vars(value).items():
                walk(item, f"{path}.{key}")

    walk(obj, where)
    return found


def assert_aliasing_same(actual_out, expected_out, actual_in, expected_in):
    """Where an eager output is one of the eager inputs (an in-place op returning its
    tensor, a function returning an argument), the compiled output must be the
    corresponding compiled input object, and nowhere else an input."""
    expected_inputs = {id(t): path for path, t in tensor_leaves(expected_in)}
    actual_inputs = {id(t): path for path, t in tensor_leaves(actual_in)}
    expected_leaves = tensor_leaves(expected_out, "result")
    actual_leaves = tensor_leaves(actual_out, "result")
    assert [p for p, _ in actual_leaves] == [p for p, _ in expected_leaves]
    for (path, mine), (_, theirs) in zip(actual_leaves, expected_leaves):
        want = expected_inputs.get(id(theirs))
        got = actual_inputs.get(id(mine))
        assert got == want, (
            f"{path}: eager returns {want or 'a new tensor'}, compiled returns "
            f"{got or 'a new tensor'}"
        )


def op_count(entry):
    """The number of ops in one entry of an explain report's ops_per_graph: the entry is
    a list of op names (what dynvm reports) or a count."""
    if isinstance(entry, int) and not isinstance(entry, bool):
        return entry
    assert isinstance(entry, (list, tuple)), f"ops_per_graph entry {entry!r}"
    assert all(isinstance(name, str) and name for name in entry), f"op names {entry!r}"
    return len(entry)
