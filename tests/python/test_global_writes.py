"""STORE_GLOBAL and DELETE_GLOBAL traced as side effects: each function runs compiled under
both backends and eagerly on the same inputs, comparing results and the globals after every
call; where the write is the only thing the VM could have refused, the trace has no break."""
import sys
import types
import warnings

import pytest
import torch

import dynvm
from conftest import needs_codegen

import global_writes_helper as helper

pytestmark = pytest.mark.skipif(not dynvm.vm_available(), reason="the VM is not built")

BACKENDS = ["eager", pytest.param("dynvm", marks=needs_codegen)]

THIS = sys.modules[__name__]


def _same(a, b):
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                and torch.allclose(a, b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


_MISSING = object()


def _copy(value):
    return type(value)(value) if type(value) in (list, dict) else value


def _snapshot(module, names):
    return {n: _copy(getattr(module, n, _MISSING)) for n in names}


def _set(module, values):
    for name, value in values.items():
        if value is _MISSING:
            if hasattr(module, name):
                delattr(module, name)
        else:  # a fresh list or dict each time: the runs must not share one
            setattr(module, name, _copy(value))


def _compare(fn, backend, calls, names, module=THIS, initial=None):
    """Runs fn eagerly and compiled, each from the same `initial` globals, on each args tuple of
    `calls`, comparing the results and the globals `names` of `module` after every call."""
    initial = initial if initial is not None else _snapshot(module, names)
    _set(module, initial)
    eager = []
    for args in calls:
        eager.append((fn(*args), _snapshot(module, names)))
    _set(module, initial)
    compiled = dynvm.compile(fn, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the cache limit's warning
        for i, args in enumerate(calls):
            result = compiled(*args)
            expected, expected_globals = eager[i]
            assert _same(result, expected), (i, result, expected)
            got = _snapshot(module, names)
            for name in names:
                assert _same(got[name], expected_globals[name]), (i, name, got[name],
                                                                  expected_globals[name])
    _set(module, initial)


def _explain(fn, *args, module=THIS, names=(), initial=None):
    """explain's report on a fresh trace of fn(*args) (the globals restored afterwards)."""
    saved = _snapshot(module, names)
    if initial is not None:
        _set(module, initial)
    dynvm.reset()
    report = dynvm.explain(fn)(*args)
    _set(module, saved)
    dynvm.reset()
    return report


def _no_break(fn, *args, module=THIS, names=(), initial=None):
    report = _explain(fn, *args, module=module, names=names, initial=initial)
    assert report.graph_break_count == 0, str(report)
    assert report.graph_count == 1, str(report)
    return report


# --- a counter ------------------------------------------------------------------------------

counter = 0


def _count(x):
    global counter
    counter += 1
    return x * counter


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_counter_called_twenty_times(backend):
    x = torch.randn(4)
    _compare(_count, backend, [(x,)] * 20, ["counter"], initial={"counter": 0})
    # The changing counter does not fill the cache: it turns opaque after the first change.
    assert dynvm.counters["recompiles"] <= 3, dict(dynvm.counters)
    _no_break(_count, x, names=["counter"], initial={"counter": 0})


def test_a_counter_write_is_a_side_effect_not_a_break():
    x = torch.randn(3)
    global counter
    counter = 5
    report = _no_break(_count, x, names=["counter"])
    assert "CONSTANT_MATCH G['counter'] == 5" in report.guards, report.guards


# --- tensors ---------------------------------------------------------------------------------

cache = None


def _store_tensor(x):
    global cache
    cache = x * 2
    return cache + 1  # read back in the same trace: the value just stored


def _use_cached(x):
    return cache - x  # the tensor the other function stored, a call later


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_tensor_stored_and_read_back(backend):
    xs = [(torch.randn(5),) for _ in range(3)]
    _compare(_store_tensor, backend, xs, ["cache"], initial={"cache": None})
    _no_break(_store_tensor, *xs[0], names=["cache"])

    global cache
    _store_tensor(xs[0][0])
    compiled = dynvm.compile(_use_cached, backend=backend)
    for (x,) in xs:
        assert torch.allclose(compiled(x), cache - x)
        cache = x * 3  # a new tensor of the same metadata: the same variant reads it
    cache = None


def _accumulate(x):
    global cache
    cache = cache + x if cache is not None else x.clone()
    return cache.sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_tensor_global_that_grows_call_by_call(backend):
    xs = [(torch.randn(3),) for _ in range(5)]
    _compare(_accumulate, backend, xs, ["cache"], initial={"cache": None})
    _no_break(_accumulate, torch.randn(2), names=["cache"], initial={"cache": None})


def _store_argument(x):
    global cache
    cache = x  # the caller's own tensor, not a copy
    return cache is x


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_argument_stored_is_the_same_object(backend):
    x = torch.randn(2)
    compiled = dynvm.compile(_store_argument, backend=backend)
    assert compiled(x) is True
    assert cache is x
    _set(THIS, {"cache": None})


# --- another module's globals ------------------------------------------------------------------


def _call_helper(x):
    y = helper.bump(x)
    # The helper's module sees its own write, read as a module attribute and by its code.
    return y, helper.count, helper.read_last() * 2, helper.last + 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_callee_in_another_module_writes_its_own_globals(backend):
    xs = [(torch.randn(3),) for _ in range(4)]
    names = ["count", "last"]
    _compare(_call_helper, backend, xs, names, module=helper,
             initial={"count": 0, "last": None})
    assert not hasattr(THIS, "count") and not hasattr(THIS, "last")
    _no_break(_call_helper, *xs[0], module=helper, names=names,
              initial={"count": 0, "last": None})


def _read_then_call_helper(x):
    before = helper.count  # read as a module attribute, before the callee writes it
    return helper.bump(x) * before


@pytest.mark.parametrize("backend", BACKENDS)
def test_another_modules_counter_read_as_an_attribute_called_often(backend):
    xs = [(torch.randn(3),)] * 20
    _compare(_read_then_call_helper, backend, xs, ["count", "last"], module=helper,
             initial={"count": 0, "last": None})
    # Each of the two names it is read by goes opaque after its first change (and bump, run
    # on its own once the caller breaks at it, has its own two), not one retrace per call.
    assert dynvm.counters["recompiles"] <= 6, dict(dynvm.counters)


def _exec_module():
    module = types.ModuleType("exec_globals_module")
    exec("total = 10\n"
         "def add(x):\n"
         "    global total\n"
         "    total = total + 1\n"
         "    return x + total\n", module.__dict__)
    return module


made = _exec_module()


def _call_made(x):
    return made.add(x) * made.total


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_callee_of_a_module_made_with_exec(backend):
    xs = [(torch.randn(2),) for _ in range(4)]
    _compare(_call_made, backend, xs, ["total"], module=made, initial={"total": 10})
    _no_break(_call_made, *xs[0], module=made, names=["total"], initial={"total": 10})


def _forget_helper(x):
    helper.forget()
    return x + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_callee_deletes_its_global(backend):
    xs = [(torch.randn(2),)]
    names = ["last"]
    _compare(_forget_helper, backend, xs, names, module=helper, initial={"last": 1.5})
    _no_break(_forget_helper, *xs[0], module=helper, names=names, initial={"last": 1.5})
    helper.last = None


def _forget_and_read(x):
    helper.forget()
    return helper.last  # AttributeError, as in eager


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_module_attribute_deleted_by_its_code_raises(backend):
    helper.last = 1
    with pytest.raises(AttributeError):
        _forget_and_read(torch.ones(1))
    helper.last = 1
    with pytest.raises(AttributeError):
        dynvm.compile(_forget_and_read, backend=backend)(torch.ones(1))
    assert not hasattr(helper, "last")
    helper.last = None


def _forget_then_ask(x):
    had = hasattr(helper, "last")
    helper.forget()
    return x + 1, had, hasattr(helper, "last"), getattr(helper, "last", "gone")


@pytest.mark.parametrize("backend", BACKENDS)
def test_hasattr_and_getattr_after_a_callee_deleted_its_global(backend):
    # The live module still has the name while the trace runs (the del is replayed later):
    # hasattr and getattr with a default must not answer from it.
    xs = [(torch.randn(2),)]
    _compare(_forget_then_ask, backend, xs, ["last"], module=helper, initial={"last": 2.5})
    helper.last = None


# --- a write, a graph break, a read ----------------------------------------------------------

step = 0


def _write_break_read(x):
    global step
    step = step + 10
    y = x * step
    print("step", step)  # a graph break
    return y + step


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_write_before_a_graph_break_is_seen_after_it(backend, capsys):
    xs = [(torch.randn(3),) for _ in range(4)]
    _compare(_write_break_read, backend, xs, ["step"], initial={"step": 0})
    report = _explain(_write_break_read, *xs[0], names=["step"], initial={"step": 0})
    assert report.graph_break_count == 1 and "print" in report.break_reasons[0].reason, str(report)
    assert report.graph_count == 2, str(report)


ticks = 0


def _read_break_write(x):
    global ticks
    seen = ticks
    y = x * seen  # a graph before the break that holds the global's value
    print("tick", seen)  # a graph break
    ticks = seen + 1  # written after it, in the next part of the frame
    return y + ticks


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_counter_read_before_a_break_and_written_after_it(backend, capsys):
    # The part that reads the counter does not write it; the part after the break does: the
    # read still goes opaque once it changes, instead of a retrace per call up to the limit.
    xs = [(torch.randn(3),)] * 20
    _compare(_read_break_write, backend, xs, ["ticks"], initial={"ticks": 0})
    assert dynvm.counters["recompiles"] <= 6, dict(dynvm.counters)


# --- delete and create again ------------------------------------------------------------------

scratch = 1.0


def _delete_and_recreate(x):
    global scratch
    y = x * scratch
    del scratch
    scratch = 3.0
    return y + scratch


@pytest.mark.parametrize("backend", BACKENDS)
def test_delete_then_create_again(backend):
    xs = [(torch.randn(2),) for _ in range(3)]
    _compare(_delete_and_recreate, backend, xs, ["scratch"], initial={"scratch": 1.0})
    _no_break(_delete_and_recreate, *xs[0], names=["scratch"], initial={"scratch": 1.0})


def _create_and_delete(x):
    global temporary
    temporary = x + 1
    y = temporary * 2
    del temporary
    return y


@pytest.mark.parametrize("backend", BACKENDS)
def test_create_then_delete_leaves_no_global(backend):
    xs = [(torch.randn(2),) for _ in range(3)]
    _compare(_create_and_delete, backend, xs, ["temporary"], initial={"temporary": _MISSING})
    _no_break(_create_and_delete, *xs[0], names=["temporary"],
              initial={"temporary": _MISSING})


def _delete_then_read(x):
    global scratch
    del scratch
    return x * scratch  # NameError


@pytest.mark.parametrize("backend", BACKENDS)
def test_reading_a_deleted_global_raises_name_error(backend):
    _set(THIS, {"scratch": 2.0})
    compiled = dynvm.compile(_delete_then_read, backend=backend)
    with pytest.raises(NameError):
        compiled(torch.ones(2))
    assert not hasattr(THIS, "scratch")
    with pytest.raises(NameError):  # the name is gone: del itself raises now, as in eager
        compiled(torch.ones(2))
    _set(THIS, {"scratch": 1.0})


# --- lists and dicts --------------------------------------------------------------------------

registry = []
table = {}


def _containers(x):
    global registry, table
    registry = registry + [x.sum()]  # a new list each call
    table = dict(table)
    table[len(registry)] = x * 2
    registry.append(len(table))  # the list just stored, mutated after the store
    return len(registry), table[len(registry) - 1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_list_and_dict_globals_rebound(backend):
    xs = [(torch.randn(2),) for _ in range(3)]
    _compare(_containers, backend, xs, ["registry", "table"],
             initial={"registry": [], "table": {}})
    _no_break(_containers, torch.randn(2), names=["registry", "table"],
              initial={"registry": [], "table": {}})


log = []


def _append_to_global_list(x):
    global log
    log.append(x * 2)  # an existing list mutated in place: not a STORE_GLOBAL
    snapshot = log
    log = list(log)  # then rebound to a copy
    return snapshot is log, len(log)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_global_list_mutated_then_rebound(backend):
    xs = [(torch.randn(2),) for _ in range(3)]
    _compare(_append_to_global_list, backend, xs, ["log"], initial={"log": []})
    _no_break(_append_to_global_list, torch.randn(2), names=["log"], initial={"log": []})


# --- a global that shadows a builtin ------------------------------------------------------------


def _shadow_builtin(x):
    global sum
    sum = x.sum() * 2  # from now on `sum` is this module's global, not the builtin
    y = sum + 1
    del sum
    return y, sum([1, 2, 3])  # the builtin again


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_global_shadowing_a_builtin(backend):
    xs = [(torch.randn(3),) for _ in range(3)]
    _compare(_shadow_builtin, backend, xs, ["sum"], initial={"sum": _MISSING})
    _no_break(_shadow_builtin, *xs[0], names=["sum"], initial={"sum": _MISSING})


def _shadow_and_keep(x):
    global max
    max = 7
    return x * max


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_builtin_shadowed_for_good(backend):
    xs = [(torch.randn(3),) for _ in range(3)]
    _compare(_shadow_and_keep, backend, xs, ["max"], initial={"max": _MISSING})
    _no_break(_shadow_and_keep, torch.randn(2), names=["max"], initial={"max": _MISSING})
    assert not hasattr(THIS, "max")


# --- loops ------------------------------------------------------------------------------------

total = 0


def _loop(x, n):
    global total
    for i in range(n):
        total = total + i
        x = x + total
    return x


@pytest.mark.parametrize("backend", BACKENDS)
def test_writes_inside_a_loop(backend):
    calls = [(torch.randn(2), 4)] * 6
    _compare(_loop, backend, calls, ["total"], initial={"total": 0})
    _no_break(_loop, *calls[0], names=["total"], initial={"total": 0})


running = None


def _loop_tensor(xs):
    global running
    running = torch.zeros(2)
    for x in xs:
        running = running + x  # one graph output stored at the end, not one per iteration
    return running * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_tensor_accumulated_in_a_global_inside_a_loop(backend):
    calls = [([torch.randn(2) for _ in range(5)],) for _ in range(3)]
    _compare(_loop_tensor, backend, calls, ["running"], initial={"running": None})
    _no_break(_loop_tensor, *calls[0], names=["running"])


# --- what stays a break -------------------------------------------------------------------------

callback = None


def _store_lambda(x):
    global callback
    callback = lambda y: y + 1  # noqa: E731 (a function the trace made)
    return callback(x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_storing_a_function_made_by_the_trace_breaks_but_stays_right(backend):
    compiled = dynvm.compile(_store_lambda, backend=backend)
    x = torch.randn(2)
    assert torch.allclose(compiled(x), x + 1)
    assert callable(callback) and torch.allclose(callback(x), x + 1)
    report = dynvm.explain(_store_lambda)(x)
    assert report.graph_break_count == 1, str(report)
    _set(THIS, {"callback": None})


# --- generators: the VM runs them ahead, eager step by step --------------------------------------

position = 0


def _positions(n):
    global position
    for i in range(n):
        position = i
        yield i


def _consume_positions(x):
    out = x
    for i in _positions(3):
        out = out + position * i  # the value the generator set at this step
    return out


scale = 1


def _scaled(n):
    for i in range(n):
        yield scale * i  # read when the step runs, after the consumer's write


def _consume_scaled(x):
    global scale
    out = x
    for v in _scaled(3):
        out = out + v
        scale += 1
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,names,initial", [
    (_consume_positions, ["position"], {"position": 0}),
    (_consume_scaled, ["scale"], {"scale": 1}),
])
def test_globals_and_generators_keep_eager_order(backend, fn, names, initial):
    _compare(fn, backend, [(torch.randn(2),)] * 3, names, initial=initial)
