"""Instances of classes with __slots__ or an ABCMeta metaclass, iteration through a class's
own __iter__, `in` on sets, id(), returned bound methods and live list iterators: each was
a graph break in Hugging Face transformers models (the configs' per-layer views, the KV
cache's layers). Every case compares the compiled function with plain Python: results,
side effects, exceptions, and the graphs and breaks dynvm.explain counts."""
import abc
import collections.abc
import functools

import pytest
import torch

import dynvm

pytestmark = pytest.mark.skipif(not dynvm.vm_available(), reason="the VM is not built")

# The eager backend replays the graph op by op: results equal plain Python's bit for bit.
compile_eager = functools.partial(dynvm.compile, backend="eager")


def counts(fn, *args):
    explained = dynvm.explain(fn)(*args)
    dynvm.reset()
    return explained.graph_count, explained.graph_break_count


def reasons(fn, *args):
    explained = dynvm.explain(fn)(*args)
    dynvm.reset()
    return [b.reason for b in explained.break_reasons]


# --- classes with __slots__ and abc.ABCMeta -------------------------------------------


class Slotted:
    __slots__ = ("scale", "bias")

    def __init__(self, scale):
        self.scale = scale


class Layer(abc.ABC):
    """Like transformers' CacheLayerMixin: an ABC (ABCMeta, empty __slots__) with state."""

    def __init__(self):
        self.keys = None

    @abc.abstractmethod
    def update(self, x): ...


class DynamicLayer(Layer):
    def update(self, x):
        self.keys = x if self.keys is None else torch.cat([self.keys, x])
        return self.keys


class View(collections.abc.Sequence):
    """Like transformers' _PerLayerConfigView: a Sequence whose __getitem__ raises
    IndexError past the end, iterated by Sequence.__iter__."""

    def __init__(self, n, value):
        self._n = n
        self._value = value

    def __len__(self):
        return self._n

    def __getitem__(self, i):
        if i < 0 or i >= len(self):
            raise IndexError("list index out of range")
        return self._value * (i + 1)


def slotted_object(x):
    s = Slotted(2.0)
    missing = hasattr(s, "bias")
    default = getattr(s, "bias", 10.0)
    s.bias = 1.0
    return x * s.scale + s.bias + default, missing, s


def test_a_slotted_class_made_by_the_trace():
    x = torch.randn(3)
    got, expected = compile_eager(slotted_object, fullgraph=True)(x), slotted_object(x)
    assert torch.equal(got[0], expected[0]) and got[1] is expected[1] is False
    obj = got[2]
    assert type(obj) is Slotted and (obj.scale, obj.bias) == (2.0, 1.0)
    assert not hasattr(obj, "__dict__")
    assert counts(slotted_object, x) == (1, 0)


def reads_an_unset_slot(x):
    s = Slotted(2.0)
    return x + s.bias


def sets_an_attribute_that_is_no_slot(x):
    s = Slotted(2.0)
    s.other = 1
    return x + s.scale


@pytest.mark.parametrize("fn", [reads_an_unset_slot, sets_an_attribute_that_is_no_slot])
def test_slotted_instances_raise_attribute_error_as_python_does(fn):
    x = torch.randn(3)
    with pytest.raises(AttributeError):
        fn(x)
    with pytest.raises(AttributeError):
        compile_eager(fn)(x)


def test_an_abc_subclass_is_made_and_mutated_by_the_trace():
    def fn(x):
        layers = [DynamicLayer() for _ in range(2)]
        for layer in layers:
            layer.update(x)
            layer.update(x + 1)
        return [layer.keys for layer in layers], isinstance(layers[0], Layer)

    x = torch.randn(2)
    got, expected = compile_eager(fn, fullgraph=True)(x), fn(x)
    assert all(torch.equal(a, b) for a, b in zip(got[0], expected[0])) and got[1] is True
    assert counts(fn, x) == (1, 0)


def test_an_abstract_class_is_not_instantiated_by_the_trace():
    def fn(x):
        Layer()
        return x

    with pytest.raises(TypeError):
        compile_eager(fn)(torch.randn(2))


class Pair:
    __slots__ = ("first", "second")


def test_slots_of_an_argument_are_read_and_guarded():
    def fn(x, pair):
        extra = pair.second if hasattr(pair, "second") else 0.0
        return x * pair.first + extra

    compiled = compile_eager(fn)
    pair = Pair()
    pair.first = 2.0
    x = torch.randn(3)
    assert torch.equal(compiled(x, pair), fn(x, pair))
    pair.first = 3.0  # the slot's value is guarded
    assert torch.equal(compiled(x, pair), fn(x, pair))
    pair.second = 5.0  # and whether it is set
    assert torch.equal(compiled(x, pair), fn(x, pair))
    del pair.second
    assert torch.equal(compiled(x, pair), fn(x, pair))


def test_a_slot_of_an_argument_is_assigned_after_the_graph():
    def fn(x, pair):
        pair.second = x + 1
        return x * pair.first

    pair, reference = Pair(), Pair()
    pair.first = reference.first = 2.0
    x = torch.randn(3)
    assert torch.equal(compile_eager(fn)(x, pair), fn(x, reference))
    assert torch.equal(pair.second, reference.second)


# --- iteration through a class's own __iter__ -------------------------------------------


class Bag:
    def __init__(self, items):
        self.items = items

    def __iter__(self):
        return iter(self.items)


class Gen:
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        for i in range(self.n):
            yield i * 10


def iterates_new_objects(x):
    view = View(3, x)
    total = sum(v for v in view)
    total = total + sum(Bag([x, x * 2]))
    numbers = View(3, 5)
    return total + sum(Gen(3)), len(list(view)), 10 in numbers, 11 in numbers, list(numbers)


def test_new_objects_are_iterated_through_their_own_iter():
    x = torch.randn(3)
    got, expected = compile_eager(iterates_new_objects, fullgraph=True)(x), iterates_new_objects(x)
    assert torch.equal(got[0], expected[0]) and got[1:] == expected[1:]
    assert counts(iterates_new_objects, x) == (1, 0)


def iterates_arguments(x, view, bag, gen):
    return sum(list(view)) + sum(t for t in bag) + sum(gen)


def test_arguments_are_iterated_through_their_own_iter():
    x = torch.randn(3)
    args = (x, View(4, x), Bag([x, x + 1]), Gen(2))
    got, expected = compile_eager(iterates_arguments)(*args), iterates_arguments(*args)
    assert torch.equal(got, expected)
    assert counts(iterates_arguments, *args) == (1, 0)
    args = (x, View(2, x), Bag([x]), Gen(5))  # other lengths: guarded
    assert torch.equal(compile_eager(iterates_arguments)(*args), iterates_arguments(*args))


class Guarded(collections.abc.Sequence):
    """An IndexError raised and caught inside __getitem__ is no end of the iteration."""

    def __init__(self, data):
        self.data = data

    def __len__(self):
        return 3

    def __getitem__(self, i):
        if i >= 3:
            raise IndexError(i)
        try:
            if i >= len(self.data):
                raise IndexError(i)
            return self.data[i]
        except IndexError:
            return -1


def test_an_index_error_caught_inside_getitem_does_not_end_the_iteration():
    def fn(x):
        return x + sum(Guarded([1, 2])), list(Guarded([5]))

    x = torch.zeros(2)
    got, expected = compile_eager(fn)(x), fn(x)
    assert torch.equal(got[0], expected[0]) and got[1] == expected[1] == [5, -1, -1]


# --- 'in' on sets, id(), bound methods ------------------------------------------------


NAMES = {"gelu", "relu"}
FROZEN = frozenset({1, 2, 3})
REGISTERED = set()  # classes, like transformers' registered ModelOutput types


class Config:
    def __init__(self):
        self.skip = {"dropout"}


def membership(x, act, config, allowed):
    y = x * 2 if act in NAMES else x
    y = y + 1 if 2 in FROZEN else y
    y = y - 1 if "dropout" in config.skip else y
    local = {"a", act}
    y = y + 10 if type(config) in REGISTERED else y
    return y * 3 if act in allowed and "a" in local else y


def test_in_on_sets_from_globals_attributes_arguments_and_the_trace():
    x = torch.randn(3)
    config = Config()
    args = (x, "gelu", config, {"gelu", "tanh"})
    compiled = compile_eager(membership)
    assert torch.equal(compiled(*args), membership(*args))
    assert counts(membership, *args) == (1, 0)
    NAMES.discard("gelu")  # a set changed in place: its guard fails, the trace redone
    try:
        assert torch.equal(compiled(*args), membership(*args))
    finally:
        NAMES.add("gelu")
    config.skip.clear()
    assert torch.equal(compiled(*args), membership(*args))
    REGISTERED.add(Config)
    try:
        assert torch.equal(compiled(*args), membership(*args))
    finally:
        REGISTERED.clear()
    args = (x, "gelu", config, {"tanh"})
    assert torch.equal(compiled(*args), membership(*args))


class Registry:
    def __init__(self, model):
        self.by_id = {id(model): "main"}


def ids(x, model, registry):
    name = registry.by_id.get(id(model), "other")
    return x + len(name)


def test_id_of_an_argument_is_a_constant_under_an_identity_guard():
    model_a, model_b = torch.nn.Linear(1, 1), torch.nn.Linear(1, 1)
    registry = Registry(model_a)
    x = torch.zeros(2)
    compiled = compile_eager(ids)
    assert torch.equal(compiled(x, model_a, registry), ids(x, model_a, registry))
    assert torch.equal(compiled(x, model_b, registry), ids(x, model_b, registry))
    assert counts(ids, x, model_a, registry) == (1, 0)


def test_id_of_an_object_the_trace_made_is_a_break():
    def fn(x):
        return x + (id([]) > 0)

    assert torch.equal(compile_eager(fn)(torch.zeros(2)), torch.ones(2))
    assert any("id()" in r for r in reasons(fn, torch.zeros(2)))


class Scaler:
    def __init__(self, k):
        self.k = k

    def apply(self, x):
        return x * self.k


def returns_bound_methods(x, scaler):
    return scaler.apply, Scaler(3.0).apply, x + 1


def test_returned_bound_methods_are_rebuilt():
    x = torch.randn(3)
    scaler = Scaler(2.0)
    got = compile_eager(returns_bound_methods, fullgraph=True)(x, scaler)
    expected = returns_bound_methods(x, scaler)
    assert got[0].__self__ is scaler and got[0].__func__ is Scaler.apply
    assert torch.equal(got[1](x), expected[1](x)) and type(got[1].__self__) is Scaler
    assert torch.equal(got[2], expected[2])
    assert counts(returns_bound_methods, x, scaler) == (1, 0)


# --- live list iterators ------------------------------------------------------------------


def consumes_after_a_break(x, items):
    it = iter(items)
    print("break")
    a = next(it)
    b = next(it)
    return x + a + b, list(it)


def test_a_live_list_iterator_is_traced_and_moved_on():
    x = torch.zeros(2)
    items = [1.0, 2.0, 3.0, 4.0]
    compiled = compile_eager(consumes_after_a_break)
    for _ in range(2):
        got, expected = compiled(x, items), consumes_after_a_break(x, items)
        assert torch.equal(got[0], expected[0]) and got[1] == expected[1] == [3.0, 4.0]
    assert not any("list_iterator" in r for r in reasons(consumes_after_a_break, x, items))


def loop_with_a_break(x, tensors):
    acc = x
    for i, t in enumerate(tensors):
        if i == 0:
            print("first step")
        acc = acc + t * 2
    return acc


def test_a_loop_resumed_after_a_break_iterates_the_live_iterator():
    # The break leaves the loop's iterator on the stack (rebuilt as a list iterator): the
    # trace resumed after it unrolls what the iterator has left instead of breaking at
    # FOR_ITER in every iteration.
    x = torch.zeros(2)
    tensors = [torch.ones(2), torch.full((2,), 3.0), torch.full((2,), 5.0)]
    compiled = compile_eager(loop_with_a_break)
    assert torch.equal(compiled(x, tensors), loop_with_a_break(x, tensors))
    assert torch.equal(compiled(x, tensors[:2]), loop_with_a_break(x, tensors[:2]))
    assert counts(loop_with_a_break, x, tensors) == (1, 1)  # no op before the print


def breaks_in_every_iteration(x, tensors):
    acc = x
    for t in tensors:
        print("step")
        acc = acc + t * 2
    return acc


def test_a_loop_that_breaks_in_every_iteration_gives_eager_results():
    # Unrolling the rest would break again: the iterator stays opaque (no variant per
    # iteration left), and the results are eager's.
    x = torch.zeros(2)
    tensors = [torch.ones(2), torch.full((2,), 3.0), torch.full((2,), 5.0), torch.ones(2)]
    compiled = compile_eager(breaks_in_every_iteration)
    for n in (4, 3, 4, 2):
        assert torch.equal(compiled(x, tensors[:n]), breaks_in_every_iteration(x, tensors[:n]))


def test_an_iterator_argument_is_moved_on_as_far_as_the_trace_took_it():
    def fn(x, it):
        return x + next(it) + next(it)

    it, reference = iter([1.0, 2.0, 3.0]), iter([1.0, 2.0, 3.0])
    x = torch.zeros(2)
    assert torch.equal(compile_eager(fn)(x, it), fn(x, reference))
    assert list(it) == list(reference) == [3.0]
    assert counts(fn, x, iter([1.0, 2.0, 3.0])) == (1, 0)


# --- transformers -----------------------------------------------------------------------


def test_transformers_per_layer_view_and_cache_layers_do_not_break():
    transformers = pytest.importorskip("transformers")
    from transformers.cache_utils import DynamicLayer as HFDynamicLayer

    config = transformers.GPT2Config(n_layer=2, n_embd=8, n_head=2)

    def fn(x):
        heads = [c.n_head for c in config.per_layer_config]
        layer = HFDynamicLayer()
        keys, values = layer.update(x, x)
        return keys + len(heads), values

    x = torch.randn(1, 2, 3, 4)
    got, expected = compile_eager(fn)(x), fn(x)
    assert all(torch.equal(a, b) for a, b in zip(got, expected))
    assert counts(fn, x) == (1, 0)
