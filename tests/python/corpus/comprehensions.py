"""Corpus: list, dict and set comprehensions, generator expressions consumed by sum,
tuple, any, all and max, and torch.stack/cat over comprehensions."""

import torch

from corpus._case import case, randn


def _tensor_list(n, *shape):
    return lambda: ([randn(*shape) for _ in range(n)],)


@case(inputs=_tensor_list(3, 2))
def list_comprehension(xs):
    return [t * 2 for t in xs]


@case(inputs=_tensor_list(5, 2))
def list_comprehension_with_condition(xs):
    return [t + i for i, t in enumerate(xs) if i % 2 == 0]


@case(inputs=_tensor_list(3, 2))
def dict_comprehension(xs):
    return {f"t{i}": t.sum() for i, t in enumerate(xs)}


@case((2,))
def set_comprehension(x):
    s = {i % 3 for i in range(10)}
    return x * len(s), sorted(s)


@case(inputs=_tensor_list(4, 3))
def generator_into_sum(xs):
    return sum(t * t for t in xs), sum(i for i in range(5))


@case(inputs=_tensor_list(3, 3))
def generator_into_tuple(xs):
    return tuple(t + 1 for t in xs)


@case((2, 2))
def nested_comprehension(x):
    grid = [[x * i + j for j in range(2)] for i in range(3)]
    return torch.stack([torch.stack(row) for row in grid]), len(grid)


@case(inputs=lambda: ([randn(2) for _ in range(3)], [randn(2) for _ in range(3)]))
def comprehension_over_zip(xs, ys):
    return torch.stack([a * b for a, b in zip(xs, ys)])


@case(inputs=lambda: ({"a": randn(2), "b": randn(2)},))
def dict_comprehension_over_items(d):
    return {k.upper(): v.neg() for k, v in d.items()}, {v: k for k, v in {"x": 1}.items()}


@case(inputs=_tensor_list(3, 2))
def comprehension_reads_closure(xs):
    scale = 3.0
    shift = xs[0]
    return [t * scale - shift for t in xs]


@case((2,))
def any_all_max_over_generators(x):
    sizes = [1, 4, 2]
    a = any(s > 3 for s in sizes)
    b = all(s > 0 for s in sizes)
    m = max(s * 2 for s in sizes)
    return x * m, a, b, min((s for s in sizes), default=0)


@case(inputs=_tensor_list(4, 2, 3))
def stack_and_cat_comprehensions(xs):
    return torch.cat([t.relu() for t in xs], dim=0), torch.stack([t.sum(0) for t in xs], dim=1)


@case((3,))
def comprehension_variable_does_not_leak(x):
    t = x
    doubled = [t * 2 for t in (x + 1, x + 2)]
    return t, doubled


@case(inputs=_tensor_list(3, 2))
def list_of_tuples_comprehension(xs):
    pairs = [(i, t.mean()) for i, t in enumerate(xs)]
    return pairs, [p[0] for p in pairs]


@case((2, 3))
def comprehension_over_shape_and_range(x):
    dims = [d for d in range(x.dim()) if x.shape[d] > 2]
    return x.sum(dims), dims, [x.size(d) for d in range(x.dim())]


@case(inputs=_tensor_list(4, 2))
def generator_with_enumerate_and_condition(xs):
    return sum(t * i for i, t in enumerate(xs) if i != 1)
