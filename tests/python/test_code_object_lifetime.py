"""Code made at run time (exec, torch.fx's generated forward) is freed once nothing uses it,
after dynvm traced it. Before, the VM's decoded-code cache held every traced code object for
the life of the process (a one-hour fuzz run grew to 6.3 GB, mostly from that), and a
variant, kept on the code object itself (co_extra, where the cycle collector cannot look),
held strongly the functions, modules and classes its guards compare by identity and those
that rebuild its result, and through their globals the code again."""
import gc
import os
import types
import weakref

import pytest
import torch
import torch.fx

import dynvm
from conftest import codegen_built, needs_codegen

pytestmark = pytest.mark.skipif(not dynvm.vm_available(), reason="the VM is not built")

BACKENDS = ["eager", pytest.param("dynvm", marks=needs_codegen)]


def fresh_namespace(source):
    """The globals of `source`, compiled now: every function in it has a new code object."""
    namespace = {"torch": torch}
    exec(compile(source, "dynvm_fresh_code.py", "exec"), namespace)
    return namespace


def assert_freed(refs):
    gc.collect()
    alive = [r() for r in refs if r() is not None]
    assert not alive, f"still alive: {alive}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_traced_code_made_by_exec_is_freed(backend):
    refs = []
    for n in range(3):  # each its own code object
        f = fresh_namespace(f"def f(x):\n    return x * 2 + {n}\n")["f"]
        refs.append(weakref.ref(f.__code__))
        compiled = dynvm.compile(f, backend=backend)
        for _ in range(3):  # traced, then hits: the compiled guards too
            assert torch.equal(compiled(torch.ones(3)), torch.full((3,), 2.0 + n))
        del f, compiled
    assert dynvm.counters["frames_traced"] == 3
    assert_freed(refs)


# Each traced function reaches its own globals through what its variant keeps: the objects
# its guards compare by identity (a helper function, a module instance and its class's
# forward, itself, the classes of its arguments) and what rebuilds its result (the class of
# a new object, the globals of a nested function).
KEPT_BY_A_VARIANT = {
    "a helper": "def g(x):\n    return x + 1\ndef f(x):\n    return g(x) * 2\n",
    "a module": "class M(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
                "m = M()\ndef f(x):\n    return m(x) + 1\n",
    "a leaf module's class": "class L(torch.nn.Linear):\n    pass\nlin = L(3, 3)\n"
                             "def f(x):\n    return lin(x)\n",
    "itself": "def f(x, n=2):\n    return x if n == 0 else f(x, n - 1) + 1\n",
    "an argument's class": "class K:\n    def scale(self):\n        return 3\n"
                           "def f(x, k):\n    return x * k.scale()\n",
    "a dict argument's class": "class D(dict):\n    pass\ndef f(x, d):\n    return x + d['a']\n",
    "a tensor argument's class": "class P(torch.Tensor):\n    pass\n"
                                 "def f(x, p):\n    return x + p\n",
    "a break": "def g(x):\n    return x * 3\n"
               "def f(x):\n    y = x + 1\n    print('', end='')\n    return g(y)\n",
    "a new object": "class B:\n    def __init__(self, t):\n        self.t = t\n"
                    "def f(x):\n    return B(x + 1)\n",
    "a nested function": "def f(x):\n    def h(y):\n        return y * 2\n    return h, x + 1\n",
}


def arguments(namespace):
    """x, and an instance of the class the case's f takes as its second argument."""
    x = torch.ones(3)
    if "K" in namespace:
        return x, namespace["K"]()
    if "D" in namespace:
        return x, namespace["D"](a=torch.ones(3))
    if "P" in namespace:
        return x, torch.ones(3).as_subclass(namespace["P"])
    return (x,)


def same_result(a, b):
    if isinstance(a, tuple):  # (h, t): the rebuilt h computes what eager's does
        return torch.equal(a[1], b[1]) and torch.equal(a[0](a[1]), b[0](b[1]))
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    return type(a) is type(b) and torch.equal(a.t, b.t)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(KEPT_BY_A_VARIANT))
def test_a_variant_does_not_keep_the_globals_of_its_code_alive(case, backend):
    namespace = fresh_namespace(KEPT_BY_A_VARIANT[case])
    args = arguments(namespace)
    expected = namespace["f"](*args)
    refs = [weakref.ref(v) for v in namespace.values()
            if isinstance(v, (types.FunctionType, type, torch.nn.Module))]
    refs.append(weakref.ref(namespace["f"].__code__))
    compiled = dynvm.compile(namespace["f"], backend=backend)
    for _ in range(4):
        assert same_result(compiled(*args), expected)
    assert dynvm.counters["frames_traced"] >= 1
    report = dynvm.explain(namespace["f"])(*args)
    assert report.graph_count >= 1
    del namespace, args, expected, compiled, report
    assert_freed(refs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_compiled_fx_graph_module_is_freed(backend):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 4)

        def forward(self, x):
            return torch.relu(self.linear(x)) * 2

    gm = torch.fx.symbolic_trace(Net())
    refs = [weakref.ref(gm), weakref.ref(type(gm)), weakref.ref(type(gm).forward.__code__)]
    compiled = dynvm.compile(gm, backend=backend)
    x = torch.randn(2, 4)
    with torch.no_grad():
        for _ in range(4):
            assert torch.allclose(compiled(x), gm(x))
    del gm, compiled
    assert_freed(refs)


def test_a_function_a_guard_held_that_died_never_matches_again():
    # Held weakly, a guarded function's address is often taken by the next one made: the
    # variant traced for the dead one must not run for it. Seven rounds stay under the cache
    # limit; in each the variant is reused enough for its guards to compile.
    holder = types.SimpleNamespace()

    def f(x):
        return holder.g(x)

    compiled = dynvm.compile(f, backend="eager")
    x = torch.zeros(1)
    for n in range(7):
        holder.g = None
        gc.collect()
        holder.g = fresh_namespace(f"def g(x):\n    return x + {n}\n")["g"]
        for _ in range(4):
            assert float(compiled(x)) == n
    if "DYNVM_GUARD_GLUE" not in os.environ and codegen_built():
        assert dynvm.counters["guard_glues"] == 7  # the default policy compiles them
    # Gone, a weakly held object reads as None: None must not pass for it.
    holder.g = None
    gc.collect()
    with pytest.raises(TypeError, match="'NoneType' object is not callable"):
        compiled(x)
