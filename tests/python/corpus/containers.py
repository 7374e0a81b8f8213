"""Corpus: containers and unpacking: tuples, lists, dicts, sets, namedtuples, starred
unpacking and building, dict merging, and mutation of container arguments."""

import collections

import torch

from corpus._case import Args, case, randn

Point = collections.namedtuple("Point", ["x", "y"])


def _tensors(n, *shape):
    return lambda: ([randn(*shape) for _ in range(n)],)


@case((3,), (3,))
def build_tuple_list_dict(x, y):
    t = (x, y)
    items = [x + 1, y - 1]
    d = {"sum": x + y, "diff": x - y}
    return t[0] * items[1], d["sum"], len(items), list(d)


@case((2, 3), (2, 3), (2, 3))
def tuple_unpacking_and_swap(a, b, c):
    a, b = b, a
    first, (second, third) = a, (b, c)
    return first - second * third


@case(inputs=_tensors(4, 3))
def starred_unpack_head(xs):
    head, *rest = xs
    return head * 2, len(rest), sum(rest)


@case(inputs=_tensors(5, 2))
def starred_unpack_middle(xs):
    first, *middle, last = xs
    return first + last, torch.stack(middle), type(middle) is list


@case(inputs=lambda: (randn(3), [randn(3), randn(3)]))
def starred_build_list(x, ys):
    both = [*ys, x]
    return torch.stack(both), len(both)


@case(inputs=lambda: (randn(3), (randn(3), randn(3))))
def starred_build_tuple(x, ys):
    t = (*ys, x, *ys)
    return torch.cat(t), len(t)


@case((2, 2))
def dict_merge_with_double_star(x):
    base = {"a": x, "b": x * 2}
    merged = {**base, "c": x + 1, "a": x - 1}
    return merged


@case((2, 2))
def dict_union_operators(x):
    left = {"a": x, "b": x + 1}
    right = {"b": x * 3, "c": x - 1}
    both = left | right
    left |= {"d": x * 0}
    return both, list(left)


@case((3,))
def dict_methods(x):
    d = {"a": x, "b": x * 2}
    d.update(c=x * 3)
    d.setdefault("e", x + 10)
    d.setdefault("a", x * 100)
    removed = d.pop("b")
    missing = d.get("zzz", None) is None
    return d, removed, missing, list(d.keys()), len(d.values())


@case(inputs=lambda: (randn(3), {"keep": randn(3), "drop": randn(3)}))
def dict_argument_mutated(x, d):
    d["out"] = x * 2
    dropped = d.pop("drop")
    return d["keep"] + dropped


@case(inputs=lambda: ([randn(2), randn(2)], randn(2)))
def list_argument_mutated(xs, y):
    xs.append(y * 2)
    xs[0] = xs[0] + 1
    xs.extend([y, y])
    return len(xs), xs[-3]


@case((3,))
def list_methods(x):
    items = [x]
    items.append(x + 1)
    items.insert(0, x - 1)
    last = items.pop()
    items.reverse()
    items.extend((x * 5,))
    return torch.stack(items), last


@case((2,))
def lists_of_ints(x):
    nums = [5, 3, 8, 1]
    nums.sort()
    nums.remove(3)
    position = nums.index(8)
    return x * position, nums, sorted(nums, reverse=True), nums.count(5), nums * 2


@case((2,), (2,))
def nested_containers(x, y):
    d = {"a": [x, (y, {"b": x * 2})], "c": (y,)}
    inner = d["a"][1][1]["b"]
    return inner + d["c"][0], d


@case((2,), (2,))
def tuple_concat_and_repeat(x, y):
    t = (x,) * 3 + (y,)
    return torch.stack(t), len(t)


@case((2,))
def python_sets(x):
    s = {1, 2, 3}
    t = {2, 3, 4}
    s.add(9)
    s.discard(1)
    n = len(s | t) + len(s & t) + len(s - t) + len(s ^ t)
    return x * n, sorted(s), 2 in s, frozenset({1, 2}) <= frozenset({1, 2, 3})


@case((2,), (2,))
def namedtuple_built_inside(x, y):
    p = Point(x, y)
    q = p._replace(x=x * 2)
    return p.x + p.y, q, q[0] - p[0]


@case(inputs=lambda: (Point(randn(3), randn(3)),))
def namedtuple_argument(p):
    a, b = p
    return p.x * p.y, a - b, p._fields


@case(inputs=_tensors(3, 2))
def dict_from_zip(xs):
    keys = ("first", "second", "third")
    d = dict(zip(keys, xs))
    return d["second"] * 2, list(d.items())[-1][0]


@case((2,), (2,))
def list_copy_is_new_object(x, y):
    base = [x, y]
    copy = list(base)
    copy.append(x + y)
    other = base.copy()
    return len(base), len(copy), copy is base, other == base, copy[-1]


@case((3,))
def tuple_keys_and_comparisons(x):
    d = {(0, 1): x, (1, 0): x * 2}
    order = (1, 2) < (1, 3)
    return d[(1, 0)] + d[0, 1], order, max((1, 5), (2, 0))


@case((2,))
def ordered_and_default_dicts(x):
    od = collections.OrderedDict()
    od["z"] = x
    od["a"] = x + 1
    od.move_to_end("z")
    counts = collections.defaultdict(int)
    for word in ("a", "b", "a"):
        counts[word] += 1
    return list(od), od["z"] * counts["a"], dict(counts)


@case((2,), (2,))
def delete_items(x, y):
    items = [x, y, x + y]
    del items[0]
    d = {"a": x, "b": y}
    del d["a"]
    return items, d


@case(inputs=lambda: Args.of([randn(2), randn(2)], {"scale": 3.0}))
def containers_of_tensors_and_scalars(xs, options):
    scale = options["scale"]
    return [t * scale for t in xs], options.get("shift", 0.5)
