"""The call path of dynvm.compile's wrappers: on a cache hit a compiled function or module
calls its native object directly (dynvm._C.wrapper_call), and falls back to the Python
path, with eager's behaviour, wherever that path would do more (hooks, jit tracing)."""

import copy
import pickle

import pytest
import torch

import dynvm
from dynvm import _native, wrappers


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x, scale=1.0):
        return torch.relu(self.linear(x)) * scale


def counting(monkeypatch, cls, name):
    """Replaces cls.name by a wrapper counting its calls; returns the list of calls."""
    calls = []
    original = cls.__dict__[name]

    def counted(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(cls, name, counted)
    return calls


@pytest.fixture
def module_and_input():
    torch.manual_seed(0)
    return Scaled(), torch.randn(2, 4)


def test_a_compiled_module_calls_its_native_object_directly(monkeypatch, module_and_input):
    model, x = module_and_input
    compiled = dynvm.compile(model, backend="eager")
    first = compiled(x, scale=2.0)
    cls = type(compiled)
    assert cls.__dict__["__call__"] is _native.core().wrapper_call
    slow = counting(monkeypatch, cls, "_dynvm_slow_call")
    forward = counting(monkeypatch, cls, "forward")
    again = compiled(x, scale=2.0)
    positional = compiled(x, 2.0)
    assert slow == [] and forward == []
    torch.testing.assert_close(first, model(x, scale=2.0), rtol=0, atol=0)
    torch.testing.assert_close(again, first, rtol=0, atol=0)
    torch.testing.assert_close(positional, first, rtol=0, atol=0)


def test_hooks_on_the_wrapper_run_as_in_eager(monkeypatch, module_and_input):
    model, x = module_and_input
    compiled = dynvm.compile(model, backend="eager")
    compiled(x)
    seen = []

    def pre_hook(module, args):
        seen.append(("pre", module))
        return (args[0] * 2,)

    def hook(module, args, output):
        seen.append(("post", module))
        return output + 1

    pre = compiled.register_forward_pre_hook(pre_hook)
    post = compiled.register_forward_hook(hook)
    forward = counting(monkeypatch, type(compiled), "forward")
    result = compiled(x)
    torch.testing.assert_close(result, model(x * 2) + 1, rtol=0, atol=0)
    assert seen == [("pre", compiled), ("post", compiled)] and len(forward) == 1
    pre.remove()
    post.remove()
    result = compiled(x)
    torch.testing.assert_close(result, model(x), rtol=0, atol=0)
    assert len(seen) == 2 and len(forward) == 1  # no hooks: the direct call again


def test_global_module_hooks_reach_the_wrapper(monkeypatch, module_and_input):
    model, x = module_and_input
    compiled = dynvm.compile(model, backend="eager")
    compiled(x)
    called = []
    handle = torch.nn.modules.module.register_module_forward_hook(
        lambda module, args, output: called.append(type(module).__name__)
    )
    try:
        forward = counting(monkeypatch, type(compiled), "forward")
        result = compiled(x)
    finally:
        handle.remove()
    torch.testing.assert_close(result, model(x), rtol=0, atol=0)
    assert len(forward) == 1 and "CompiledModule" in called


def test_a_forward_set_on_the_wrapper_is_called(module_and_input):
    model, x = module_and_input
    compiled = dynvm.compile(model, backend="eager")
    compiled(x)
    compiled.forward = lambda x: x - 1
    torch.testing.assert_close(compiled(x), x - 1, rtol=0, atol=0)
    del compiled.forward
    torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0)


@pytest.mark.filterwarnings("ignore:`torch.jit.trace")
def test_jit_tracing_a_compiled_module_goes_through_module_call(monkeypatch, module_and_input):
    model, x = module_and_input
    compiled = dynvm.compile(model, backend="eager")
    compiled(x)
    slow = counting(monkeypatch, type(compiled), "_dynvm_slow_call")
    traced = torch.jit.trace(compiled, (x,), check_trace=False)
    assert slow, "under torch.jit.trace the call must take nn.Module.__call__"
    torch.testing.assert_close(traced(x), model(x), rtol=0, atol=0)


def test_compiled_functions_methods_and_callables_pass_their_arguments():
    class Counter:
        def __init__(self):
            self.offset = torch.tensor(3.0)

        def shift(self, x, *, by=1.0):
            return x + self.offset * by

        def __call__(self, x):
            return x * self.offset

    obj = Counter()
    x = torch.arange(4.0)
    method = dynvm.compile(obj.shift, backend="eager")
    callable_object = dynvm.compile(obj, backend="eager")
    function = dynvm.compile(lambda a, b=2: a * b, backend="eager")
    for _ in range(3):
        torch.testing.assert_close(method(x, by=2.0), x + 6)
        torch.testing.assert_close(callable_object(x), x * 3)
        torch.testing.assert_close(function(x), x * 2)
        torch.testing.assert_close(function(x, b=5), x * 5)
    assert type(function).__dict__["__call__"] is _native.core().wrapper_call
    assert method.native() is method.__dict__["_dynvm_native"]
    # Many arguments (more than fit the native object's small argument stack).
    many = dynvm.compile(obj.shift.__func__, backend="eager")
    torch.testing.assert_close(many(obj, x, by=0.5), x + 1.5)


def test_a_decorated_method_binds_like_a_function():
    class Model:
        def __init__(self, k):
            self.k = k

        @dynvm.compile(backend="eager")
        def apply(self, x):
            return x * self.k

    a, b = Model(2.0), Model(5.0)
    x = torch.ones(3)
    for _ in range(2):
        torch.testing.assert_close(a.apply(x), x * 2)
        torch.testing.assert_close(b.apply(x), x * 5)
    bound = a.apply
    assert bound.__self__ is a and bound(x).tolist() == [2.0, 2.0, 2.0]


def test_errors_from_the_direct_call_are_the_functions():
    def needs_two(x, y):
        return x + y

    compiled = dynvm.compile(needs_two, backend="eager")
    x = torch.ones(2)
    compiled(x, x)
    with pytest.raises(TypeError, match="needs_two"):
        compiled(x)
    module = dynvm.compile(torch.nn.Linear(2, 2), backend="eager")
    module(x)
    with pytest.raises(RuntimeError):
        module(torch.ones(3))  # the shapes do not fit: eager's error, from the fallback trace


def test_wrapper_call_as_an_attribute_binds():
    compiled = dynvm.compile(lambda x: x + 1, backend="eager")
    x = torch.zeros(2)
    compiled(x)
    assert compiled.__call__(x).tolist() == [1.0, 1.0]
    with pytest.raises(TypeError, match="first argument"):
        _native.core().wrapper_call()


def test_a_compiled_module_deep_copies_and_pickles_as_a_compiled_copy(module_and_input):
    # As torch.compile's wrapper: the copy wraps a copy of the original and compiles it
    # afresh (an EMA model copied from a compiled one); no native object is shared.
    model, x = module_and_input
    compiled = dynvm.compile(model, backend="eager", mode="default")
    compiled(x)
    for duplicate in (copy.deepcopy(compiled), pickle.loads(pickle.dumps(compiled))):
        assert type(duplicate) is type(compiled)
        assert duplicate._orig_mod is not model
        assert duplicate.__dict__["_dynvm_options"] == compiled.__dict__["_dynvm_options"]
        assert "_dynvm_native" not in duplicate.__dict__
        torch.testing.assert_close(duplicate(x), model(x), rtol=0, atol=0)
        with torch.no_grad():
            duplicate._orig_mod.linear.weight.add_(1.0)
        torch.testing.assert_close(duplicate(x), duplicate._orig_mod(x), rtol=0, atol=0)
        torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0)


def test_module_idle_attributes_are_nn_module_attributes():
    # The names wrapper_call reads (the native core's hook names and the two attributes
    # that reroute a call) must be the ones this torch's Module uses.
    wrappers.compiled_module_class()
    module = torch.nn.Linear(2, 2)
    assert "_forward_hooks" in wrappers._module_idle_attributes
    for name in wrappers._module_idle_attributes:
        if name == "forward":
            continue
        # Instance attributes, or class defaults (None) that Module.compile() overrides.
        assert name in module.__dict__ or getattr(torch.nn.Module, name) is None, name
    import torch.nn.modules.module as module_module

    _, global_hooks = _native.core().hook_names()
    assert global_hooks[:4] == ("_global_forward_hooks", "_global_forward_pre_hooks",
                                "_global_backward_hooks", "_global_backward_pre_hooks")
    for name in global_hooks:
        assert isinstance(getattr(module_module, name), dict), name


def test_compiled_callees_are_traced_into_their_callers_graph(module_and_input):
    model, x = module_and_input
    inner_module = dynvm.compile(model, backend="eager")
    inner_function = dynvm.compile(lambda t: t * 3 - 1, backend="eager")

    class Holder:
        def method(self, t):
            return t.sin()

    inner_method = dynvm.compile(Holder().method, backend="eager")

    def outer(t):
        return inner_method(inner_function(inner_module(t, scale=0.5))) + 1

    compiled = dynvm.compile(outer, backend="eager")
    for _ in range(3):
        torch.testing.assert_close(compiled(x), outer(x), rtol=0, atol=0)
    explained = dynvm.explain(outer)(x)
    assert explained.graph_count == 1 and explained.graph_break_count == 0, explained
    # The wrappers are guarded by type: a hook on the inner wrapper makes that call break
    # (hooks are not traced) and still run.
    handle = inner_module.register_forward_hook(lambda m, a, out: out * 0)
    try:
        torch.testing.assert_close(compiled(x), outer(x), rtol=0, atol=0)
        assert compiled(x).tolist() == (torch.full((2, 3), -1.0).sin() + 1).tolist()
    finally:
        handle.remove()
