"""Native variant functions: once a variant's guards compile, the same function binds the
graph's inputs, runs its steps (kernels called from the glue) and packs the result. Every
call is compared with eager: results, in-place mutations, side effects, graph breaks,
autograd and errors raised at run time."""


import pytest
import torch

import dynvm
from conftest import needs_codegen, run_python

# The default policy compiles a variant's function on its third guard check, so with one
# call tracing, calls 4 and later run through it.
CALLS = 7
NATIVE_CALLS = CALLS - 3


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and \
            torch.allclose(a, b, atol=1e-5, rtol=1e-5)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def _check_calls(fn, make_args, backend):
    compiled = dynvm.compile(fn, backend=backend)
    for i in range(CALLS):
        torch.manual_seed(i)
        expected = fn(*make_args())
        torch.manual_seed(i)
        actual = compiled(*make_args())
        assert _same(actual, expected), (i, actual, expected)


def returns_tensor(x):
    return (x + 1) * 2


def returns_tuple_with_constants(x, y):
    a = torch.relu(x @ y)
    return a.sum(-1), a * 2, 3, "done", None


def returns_list_and_dict(x):
    return [x.sin(), x.cos()], {"t": x.tanh(), "n": 2}


def returns_input_and_named_tuple(x):
    return x, torch.max(x * 2, 0)


def softmax_and_layer_norm(x):
    s = torch.softmax(x * 0.125, -1)
    return torch.nn.functional.layer_norm(s + x, (x.shape[-1],))


BACKENDS = ["eager", pytest.param("dynvm", marks=needs_codegen)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,make_args", [
    (returns_tensor, lambda: (torch.randn(16),)),
    (returns_tensor, lambda: (torch.randn(512, 1024),)),  # kernels split across threads
    (returns_tuple_with_constants, lambda: (torch.randn(8, 8), torch.randn(8, 8))),
    (returns_list_and_dict, lambda: (torch.randn(5, 3),)),
    (returns_input_and_named_tuple, lambda: (torch.randn(4, 6),)),
    (softmax_and_layer_norm, lambda: (torch.randn(64, 256),)),
])
def test_results_match_eager_on_every_call(fn, make_args, backend):
    _check_calls(fn, make_args, backend)
    if dynvm.counters["guard_glues"]:
        assert dynvm.counters["glue_runs"] == NATIVE_CALLS
    assert dynvm.counters["graph_failures"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_side_effects_and_in_place_mutation_are_replayed(backend):
    class Box:
        pass

    def step(x, box, log):
        x.mul_(2)  # the caller's tensor
        box.total = x.sum()
        log.append(x.mean())
        return x + 1

    compiled = dynvm.compile(step, backend=backend)
    for i in range(CALLS):
        x0 = torch.randn(6)
        xe, xc = x0.clone(), x0.clone()
        be, bc, le, lc = Box(), Box(), [], []
        expected = step(xe, be, le)
        actual = compiled(xc, bc, lc)
        assert torch.allclose(actual, expected)
        assert torch.equal(xc, xe), i
        assert torch.allclose(bc.total, be.total)
        assert len(lc) == 1 and torch.allclose(lc[0], le[0])
    if dynvm.counters["guard_glues"]:
        assert dynvm.counters["glue_runs"] == NATIVE_CALLS


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_graph_break_resumes_after_the_native_run(backend):
    def with_break(x):
        y = torch.tanh(x) * 3
        print("", end="")  # a break: the graph before it runs, then CPython
        return y.sum() + 1

    _check_calls(with_break, lambda: (torch.randn(10),), backend)
    assert dynvm.counters["graph_breaks"] >= 1
    if dynvm.counters["guard_glues"]:
        assert dynvm.counters["glue_runs"] >= NATIVE_CALLS


def test_gradients_flow_through_a_native_run():
    w = torch.randn(4, 4, requires_grad=True)

    def loss(x):
        return torch.tanh(x @ w).pow(2).sum()

    compiled = dynvm.compile(loss, backend="eager")  # autograd: op by op either way
    for _ in range(CALLS):
        x = torch.randn(3, 4)
        w.grad = None
        loss(x).backward()
        expected = w.grad.clone()
        w.grad = None
        compiled(x).backward()
        assert torch.allclose(w.grad, expected, atol=1e-6)
    if dynvm.counters["guard_glues"]:
        assert dynvm.counters["glue_runs"] == NATIVE_CALLS


def test_grad_mode_inside_and_after_a_native_run():
    w = torch.randn(3, requires_grad=True)

    def f(x):
        with torch.no_grad():
            a = x * w
        return a + w

    compiled = dynvm.compile(f, backend="eager")
    for _ in range(CALLS):
        out = compiled(torch.randn(3))
        assert out.requires_grad
        assert torch.is_grad_enabled()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_run_time_error_runs_the_call_eagerly_and_raises_eagers_error(backend):
    def gather(x, index):
        return torch.index_select(x * 2, 0, index) + 1

    compiled = dynvm.compile(gather, backend=backend)
    x = torch.randn(5, 3)
    good = torch.tensor([0, 4, 2])
    for _ in range(CALLS):
        assert torch.allclose(compiled(x, good), gather(x, good))
    bad = torch.tensor([0, 9, 2])  # same guards (dtype, shape): fails inside the graph
    with pytest.raises(IndexError) as eager_error:
        gather(x, bad)
    with pytest.raises(IndexError) as compiled_error:
        compiled(x, bad)
    assert str(compiled_error.value) == str(eager_error.value)
    assert dynvm.counters["graph_failures"] == 1
    # The variant still serves good calls afterwards.
    assert torch.allclose(compiled(x, good), gather(x, good))


@needs_codegen
def test_dynvm_glue_run_off_keeps_the_run_out_of_the_compiled_function():
    code = (
        "import torch, dynvm\n"
        "f = dynvm.compile(lambda x: (x + 1) * 2)\n"
        "x = torch.randn(16)\n"
        "for _ in range(6): assert torch.equal(f(x), (x + 1) * 2)\n"
        "print(dynvm.counters['guard_glues'], dynvm.counters['glue_runs'])\n")
    off = run_python(code, DYNVM_GLUE_RUN="off")
    assert off.returncode == 0, off.stderr
    assert off.stdout.split() == ["1", "0"]
    on = run_python(code)
    assert on.returncode == 0, on.stderr
    assert on.stdout.split() == ["1", "3"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_native_runs_from_several_threads(backend):
    # Threads share the variant (its native function, its kernels and the arena of planned
    # memory); every call must still get its own results.
    import threading

    def groups_around_cumsum(x):
        h = torch.tanh(x) * 0.5 + x
        return torch.sigmoid(torch.cumsum(h, -1)) * h

    compiled = dynvm.compile(groups_around_cumsum, backend=backend)
    inputs = [torch.randn(64, 256) for _ in range(4)]
    expected = [groups_around_cumsum(x) for x in inputs]
    for _ in range(CALLS):  # compile the native function first
        compiled(inputs[0])
    errors = []

    def work(i):
        try:
            for _ in range(40):
                out = compiled(inputs[i])
                if not torch.allclose(out, expected[i], atol=1e-5):
                    errors.append(i)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    if dynvm.counters["guard_glues"]:
        assert dynvm.counters["glue_runs"] >= 160
