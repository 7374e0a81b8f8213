"""Guards remember what they read (vm/source_resolver.cpp `LastRead`, the NO_HOOKS,
MODULE_ATTRS and DICT_KEYS payloads): a source is read again only when a dict or type it
was read through has changed since. Each test warms a variant up (interpreted guards, then
compiled ones), changes one thing the reads went through, and checks that the call sees
the change: a recompile, or a guard failure handled, and always eager's result."""

import pytest
import torch

import dynvm

# Calls before a change: the first traces, the next checks guards in the interpreter, the
# later ones through the compiled guards (DYNVM_GUARD_GLUE defaults to 2).
WARM_CALLS = 5


@pytest.fixture(params=["interpreted", "compiled"])
def guard_mode(request, monkeypatch):
    if request.param == "interpreted":
        monkeypatch.setenv("DYNVM_GUARD_GLUE", "off")
    dynvm.reset()
    yield request.param
    dynvm.reset()


def warm(fn, *args):
    for _ in range(WARM_CALLS):
        fn(*args)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.norm = torch.nn.LayerNorm(4)
        self.scale = 2.0

    def forward(self, x):
        return self.norm(self.linear(x)) * self.scale


def check(compiled, model, x):
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0)


def test_a_global_rebound_after_the_reads_are_remembered(guard_mode):
    namespace = {"offset": torch.ones(3)}
    exec("def shifted(x):\n    return x + offset\n", namespace)
    shifted = namespace["shifted"]
    compiled = dynvm.compile(shifted, backend="eager")
    x = torch.zeros(3)
    warm(compiled, x)
    namespace["offset"] = torch.full((3,), 5.0)
    assert compiled(x).tolist() == [5.0, 5.0, 5.0]
    namespace["offset"] = torch.full((2, 3), 7.0)  # another shape: a recompile
    assert compiled(x).tolist() == [[7.0] * 3] * 2
    del namespace["offset"]
    with pytest.raises(NameError):
        compiled(x)


def test_parameters_children_and_attributes_replaced_after_warm_up(guard_mode):
    torch.manual_seed(0)
    model = Block()
    compiled = dynvm.compile(model, backend="eager")
    x = torch.randn(2, 4)
    with torch.no_grad():
        warm(compiled, x)
    model.linear.weight = torch.nn.Parameter(torch.randn(4, 4))  # same shape, new object
    check(compiled, model, x)
    model.linear.bias = torch.nn.Parameter(torch.randn(4, dtype=torch.float64))  # new dtype
    with pytest.raises(RuntimeError):
        with torch.no_grad():
            model(x)
    with pytest.raises(RuntimeError):
        check(compiled, model, x)
    model.linear.bias = torch.nn.Parameter(torch.randn(4))
    check(compiled, model, x)
    model.norm = torch.nn.Identity()  # a child replaced
    check(compiled, model, x)
    model.scale = -1.0  # a plain attribute
    check(compiled, model, x)
    with torch.no_grad():
        model.linear.weight.data = torch.randn(4, 4).t()  # same object, other strides
    check(compiled, model, x)


def test_metadata_changed_in_place_is_seen_through_a_remembered_read(guard_mode):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 3)
    compiled = dynvm.compile(model, backend="eager")
    x = torch.randn(2, 3)
    warm(compiled, x)
    model.weight.requires_grad_(False)  # the dicts are unchanged; the tensor is not
    out = compiled(x)
    out.sum().backward()
    assert model.weight.grad is None and model.bias.grad is not None
    torch.testing.assert_close(out, model(x), rtol=0, atol=0)


def test_class_attributes_changed_after_warm_up(guard_mode):
    class Doubler(torch.nn.Module):
        def forward(self, x):
            return x * 2

    model = Doubler()
    compiled = dynvm.compile(model, backend="eager")
    x = torch.ones(2)
    warm(compiled, x)
    Doubler.forward = lambda self, x: x * 3  # the class's function replaced
    assert compiled(x).tolist() == [3.0, 3.0]

    class Holder:
        factor = 4.0

    holder = Holder()

    def use(x):
        return x * holder.factor

    compiled_use = dynvm.compile(use, backend="eager")
    warm(compiled_use, x)
    Holder.factor = 5.0
    assert compiled_use(x).tolist() == [5.0, 5.0]
    holder.factor = 6.0  # an instance attribute now shadows the class's
    assert compiled_use(x).tolist() == [6.0, 6.0]
    Holder.factor = property(lambda self: 7.0)  # a data descriptor wins over the instance
    assert compiled_use(x).tolist() == [7.0, 7.0]


def test_hooks_added_to_a_module_after_its_hook_dicts_were_remembered(guard_mode):
    torch.manual_seed(0)
    model = Block()
    compiled = dynvm.compile(model, backend="eager")
    x = torch.randn(2, 4)
    warm(compiled, x)
    # A hook dict rebound to a fresh one (the module's __dict__ changes), then a hook added
    # to the new dict (only the new dict changes).
    model.linear._forward_hooks = type(model.linear._forward_hooks)()
    check(compiled, model, x)
    check(compiled, model, x)
    handle = model.linear.register_forward_hook(lambda m, a, out: out * 10)
    check(compiled, model, x)
    handle.remove()
    check(compiled, model, x)


def test_module_constants_changed_after_a_slow_check(guard_mode):
    torch.manual_seed(0)
    model = torch.nn.LayerNorm(4)
    compiled = dynvm.compile(model, backend="eager")
    x = torch.randn(2, 4)
    warm(compiled, x)
    model.some_note = "unrelated"  # the dict changes; the constants are re-read, still equal
    check(compiled, model, x)
    check(compiled, model, x)
    model.eps = 0.5  # now one differs
    check(compiled, model, x)


def test_modules_added_or_reordered_after_their_keys_were_remembered(guard_mode):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())
    compiled = dynvm.compile(model, backend="eager")
    x = torch.randn(2, 3)
    warm(compiled, x)
    model.append(torch.nn.Tanh())
    check(compiled, model, x)
    del model[1]
    check(compiled, model, x)
    model._modules = dict(reversed(list(model._modules.items())))  # the order of children
    check(compiled, model, x)
