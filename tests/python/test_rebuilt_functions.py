"""Functions the traced code makes (nested `def`, `lambda`) are rebuilt after the graph: at
a graph break, where the frame holds one, and as a returned value. Before, either made the
whole frame run eagerly ("a graph break where the frame holds a function, which cannot be
rebuilt"; "returning a function"). Each function is compared with eager under both
backends, with the number of graphs it now keeps."""
import types

import pytest
import torch

import dynvm

pytestmark = pytest.mark.skipif(not dynvm.vm_available(), reason="the VM is not built")


def closure_then_break(x):
    k = 3
    scale = lambda t: t * k  # noqa: E731
    def add(t, c=2, *, d=1):
        return t + c + d + k
    y = scale(x) + add(x)
    print("a break")
    k = 5  # the rebuilt closures share the frame's cell: they see the new value
    return scale(y), add(y, d=4), add.__defaults__, add.__kwdefaults__, add.__qualname__


def defaults_from_the_graph(x):
    def shift(t, by=x.sum() * 2):
        return t + by
    print("a break")
    return shift(x), shift(x, 1.0)


def make_adder(x):
    w = x * 2
    return lambda t: t + w


def nested_factory(x):
    def outer(a):
        def inner(b):
            return a * b + x
        return inner
    f = outer(x.sum())
    print("a break")
    return f(x), f(2.0)


def annotated_then_break(x):
    def g(t: torch.Tensor) -> torch.Tensor:
        return t * 2
    y = g(x)
    print("a break")
    return g(y), g.__annotations__["t"] is torch.Tensor


@pytest.mark.parametrize("backend", ["eager", "dynvm"])
@pytest.mark.parametrize("fn,graphs", [(closure_then_break, 2), (defaults_from_the_graph, 2),
                                       (nested_factory, 2), (annotated_then_break, 1)],
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_a_break_where_the_frame_holds_a_function(fn, graphs, backend, capsys):
    x = torch.arange(4.0)
    report = dynvm.explain(dynvm.compile(fn, backend=backend))(x)
    assert report.graph_count >= graphs, str(report)
    compiled = dynvm.compile(fn, backend=backend)
    capsys.readouterr()
    for call in range(3):
        x = torch.arange(4.0) + call
        want = fn(x)
        want_out = capsys.readouterr().out
        got = compiled(x)
        assert capsys.readouterr().out == want_out
        assert repr(got) == repr(want), f"call {call}"


@pytest.mark.parametrize("backend", ["eager", "dynvm"])
def test_a_returned_closure(backend):
    report = dynvm.explain(dynvm.compile(make_adder, backend=backend))(torch.ones(3))
    assert (report.graph_count, report.graph_break_count) == (1, 0), str(report)
    compiled = dynvm.compile(make_adder, backend=backend)
    for call in range(3):
        x = torch.arange(3.0) + call
        got, want = compiled(x), make_adder(x)
        assert got.__qualname__ == want.__qualname__ and got.__code__ is want.__code__
        torch.testing.assert_close(got(torch.ones(3)), want(torch.ones(3)))


@pytest.mark.parametrize("backend", ["eager", "dynvm"])
def test_a_returned_function_gets_the_globals_of_the_call(backend):
    # One code object under two globals shares its variants: the rebuilt function takes the
    # calling frame's globals, as eager's does. Before, it kept those of the call traced
    # first (and with them, that code object, for good).
    first = {"K": 2}
    exec("def f(x):\n    def h(y):\n        return y * K\n    return h, x + 1\n", first)
    second = {"K": 3}
    f_first = first["f"]
    f_second = types.FunctionType(f_first.__code__, second)
    compiled_first = dynvm.compile(f_first, backend=backend)
    compiled_second = dynvm.compile(f_second, backend=backend)
    x = torch.ones(2)
    for _ in range(3):
        h_first, _ = compiled_first(x)
        h_second, _ = compiled_second(x)
        assert h_first.__globals__ is first and h_second.__globals__ is second
        assert torch.equal(h_second(x), f_second(x)[0](x))
    assert dynvm.counters["frames_traced"] == 1
