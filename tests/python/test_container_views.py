"""Dict views and OrderedDicts made or read by traced code behave as in Python: a view
taken before the dict changes sees the change, and an OrderedDict stays one. Each case
runs under both backends, fully traced (fullgraph), against plain Python."""
import collections
import collections.abc

import pytest
import torch

import dynvm
from conftest import codegen_built

pytestmark = pytest.mark.skipif(not dynvm.vm_available(), reason="the VM is not built")

BACKENDS = ["eager"] + (["dynvm"] if codegen_built() else [])


def same(a, b):
    """Equal values of the same types, recursively (tensors by value)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, dict):
        return list(a.keys()) == list(b.keys()) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, (collections.abc.KeysView, collections.abc.ValuesView,
                      collections.abc.ItemsView)):
        return same(list(a), list(b))
    return a == b


def views_see_later_insertions(x):
    d = {"a": x, "b": x + 1}
    keys, values, items = d.keys(), d.values(), d.items()
    d["c"] = x * 2
    return len(keys), [v.sum() for v in values], list(keys), len(items), "c" in keys


def views_see_removals_and_replacements(x):
    d = {"a": x, "b": x + 1, "c": x + 2}
    values = d.values()
    items = d.items()
    del d["a"]
    d["b"] = x * 10
    d.pop("c")
    return [v.sum() for v in values], [k for k, _ in items], bool(values)


def views_of_an_argument_dict(x, d):
    keys = d.keys()
    d["z"] = x
    return list(keys), x + 1


def view_returned_then_dict_mutated(x):
    d = {"a": x}
    keys = d.keys()
    d["b"] = x + 1
    return keys, d


def view_types(x):
    d = {"a": x}
    return (isinstance(d.keys(), collections.abc.KeysView),
            type(d.values()).__name__, isinstance(d.items(), collections.abc.ItemsView), x + 1)


def ordered_dict_made_inside(x):
    od = collections.OrderedDict(a=x)
    if isinstance(od, collections.OrderedDict):
        return x + 1, type(od).__name__, type(od) is collections.OrderedDict
    return x - 1, type(od).__name__, False


def ordered_dict_returned(x):
    od = collections.OrderedDict([("b", x), ("a", x + 1)])
    od["c"] = x * 3
    return od, od.copy(), dict(od)


def ordered_dict_methods(x):
    od = collections.OrderedDict([("a", x), ("b", x + 1), ("c", x + 2)])
    od.move_to_end("a")
    od.move_to_end("c", last=False)
    first = od.popitem(last=False)
    last = od.popitem()
    return list(od.keys()), first[0], last[0], first[1] * 2


def ordered_equality_is_ordered(x):
    a = collections.OrderedDict([("p", 1), ("q", 2)])
    b = collections.OrderedDict([("q", 2), ("p", 1)])
    return a == b, dict(a) == dict(b), x + 1


CASES = [
    (views_see_later_insertions, lambda: (torch.ones(3),)),
    (views_see_removals_and_replacements, lambda: (torch.ones(3),)),
    (views_of_an_argument_dict, lambda: (torch.ones(3), {"a": 1})),
    (view_returned_then_dict_mutated, lambda: (torch.ones(3),)),
    (view_types, lambda: (torch.ones(3),)),
    (ordered_dict_made_inside, lambda: (torch.ones(3),)),
    (ordered_dict_returned, lambda: (torch.ones(3),)),
    (ordered_dict_methods, lambda: (torch.ones(3),)),
    (ordered_equality_is_ordered, lambda: (torch.ones(3),)),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,make_args", CASES, ids=[c[0].__name__ for c in CASES])
def test_matches_python(fn, make_args, backend):
    expected_args = make_args()
    expected = fn(*expected_args)
    compiled = dynvm.compile(fn, backend=backend, fullgraph=True)
    for _ in range(2):  # the second call runs the cached variant
        args = make_args()
        got = compiled(*args)
        assert same(got, expected), (got, expected)
        assert same(list(args), list(expected_args))  # mutated arguments too


def test_returned_view_is_live_on_the_returned_dict():
    keys, d = dynvm.compile(view_returned_then_dict_mutated, backend="eager",
                           fullgraph=True)(torch.ones(2))
    d["later"] = 1
    assert list(keys) == ["a", "b", "later"]
