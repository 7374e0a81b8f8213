"""Corpus: Python builtins and small standard-library helpers over known values:
isinstance, len, getattr, hasattr, type(x) is, min, max, abs, sum, range, map,
filter, sorted, iter/next, math and operator functions."""

import functools
import math
import operator

import torch

from corpus._case import Args, case, randn


class _Config:
    hidden = 4
    name = "cfg"


@case((3,))
def isinstance_checks(x):
    out = x
    if isinstance(x, torch.Tensor):
        out = out + 1
    if isinstance(3, (int, float)):
        out = out * 2
    return out, isinstance(x, (list, tuple)), isinstance(True, int)


@case(inputs=lambda: Args.of(randn(3), [1, 2, 3]))
def len_of_containers(x, items):
    return x * len(items), len(x), len("abc"), len({"a": 1}), len(range(2, 9, 3))


@case((3,))
def getattr_on_modules_and_objects(x):
    relu = getattr(torch, "relu")
    hidden = getattr(_Config, "hidden")
    missing = getattr(_Config, "missing", 7)
    return relu(x) * hidden, missing, getattr(x, "shape")


@case((3,))
def hasattr_checks(x):
    return x + 1, hasattr(x, "shape"), hasattr(_Config, "nothing"), hasattr(torch, "relu")


@case((3,))
def type_identity_checks(x):
    n = 3
    return x * 2, type(x) is torch.Tensor, type(n) is int, type(n) is float, type(x).__name__


@case((3,))
def min_max_of_python_values(x):
    a = min(3, 1, 2)
    b = max([4, 9, 2])
    c = max(x.shape[0], 2)
    d = min((5, "e"), (2, "b"))
    return x * a + b, c, d, max("abc", key=ord)


@case((3,), (3,))
def min_max_of_tensors_elementwise(x, y):
    return torch.max(x, y), torch.min(x, y), torch.max(x), x.max(0).values


@case((3,))
def abs_builtin(x):
    return abs(x), abs(-3), abs(-2.5), abs(x - 1).sum()


@case(inputs=lambda: ([randn(2) for _ in range(3)],))
def sum_builtin(xs):
    return sum(xs), sum([1, 2, 3]), sum(xs, torch.ones(2)), sum([0.5, 0.25], 1.0)


@case((2,))
def range_objects(x):
    r = range(1, 10, 2)
    return x * r[2], list(r), len(r), 5 in r, r.index(7)


@case(inputs=lambda: ([randn(2) for _ in range(3)],))
def map_and_filter(xs):
    doubled = list(map(lambda t: t * 2, xs))
    evens = list(filter(lambda n: n % 2 == 0, range(7)))
    return doubled, evens, list(map(operator.add, [1, 2], [10, 20]))


@case((2,))
def sorted_with_key(x):
    words = ["pear", "fig", "banana"]
    by_len = sorted(words, key=len)
    pairs = sorted({"b": 2, "a": 1}.items())
    return x * len(by_len[0]), by_len, pairs, sorted(words, key=lambda w: w[-1], reverse=True)


@case(inputs=lambda: ([randn(2) for _ in range(3)],))
def iter_and_next(xs):
    it = iter(xs)
    first = next(it)
    second = next(it)
    rest = list(it)
    return first + second, len(rest), next(iter([]), None)


@case((2, 3))
def math_functions(x):
    d = x.shape[-1]
    return (x / math.sqrt(d), math.pi, math.floor(2.7), math.ceil(2.1), math.log(math.e),
            math.exp(0.0), math.isclose(0.1 + 0.2, 0.3), math.gcd(12, 18), math.inf > 1e308)


@case((3,))
def operator_module(x):
    get_second = operator.itemgetter(1)
    return operator.mul(x, 2), operator.neg(x), get_second((1, 2, 3)), operator.getitem(x, 0)


@case(inputs=lambda: ([randn(2) for _ in range(4)],))
def functools_reduce(xs):
    return functools.reduce(operator.add, xs), functools.reduce(lambda a, b: a * b, [1, 2, 3, 4])


@case((2,))
def conversions_of_python_values(x):
    return x + 1, int("12"), float("2.5"), bool(0), str(42), int(True), bool([]), list("ab")


@case((2,))
def all_any_zip_enumerate(x):
    flags = [True, True, False]
    pairs = list(zip("ab", range(2)))
    return x * sum(flags), all(flags), any(flags), pairs, list(enumerate("xy"))


@case((3,))
def callable_and_chr_ord(x):
    return x * ord("b"), callable(torch.relu), callable(3), chr(ord("a") + 2), divmod(-7, 2)


@case((2, 2))
def round_and_pow_builtins(x):
    return x * pow(2, 3), pow(2, -1), round(x.shape[0] / 3, 3), pow(3, 2, 5)
