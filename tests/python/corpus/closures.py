"""Corpus: nested functions, closures and cells, `nonlocal`, default and keyword-only
arguments, lambdas, functools.partial and calls of module-level helpers."""

import functools

import torch

from corpus._case import Args, case, randn


def _helper_with_default(t, k=2):
    return t * k


def _make_scaler(factor):
    def scale(t):
        return t * factor

    return scale


_TRIPLE = _make_scaler(3)


@case((3,))
def nested_def_reads_outer_variable(x):
    offset = x.sum()

    def shift(t):
        return t - offset

    return shift(x), shift(x * 2)


@case((3,))
def closure_returned_then_called(x):
    def make_adder(n):
        def add(t):
            return t + n

        return add

    add_two = make_adder(2)
    add_x = make_adder(x)
    return add_two(x), add_x(x)


@case((3,))
def nonlocal_counter(x):
    calls = 0

    def step(t):
        nonlocal calls
        calls += 1
        return t * 2

    y = step(step(x))
    return y, calls


@case((3,))
def nonlocal_tensor_accumulator(x):
    total = torch.zeros(3)

    def add(t):
        nonlocal total
        total = total + t

    add(x)
    add(x * 3)
    return total


@case((3,))
def cell_updated_after_closure_made(x):
    scale = 1

    def apply(t):
        return t * scale

    scale = 3
    return apply(x)


@case((2, 2))
def default_arguments(x):
    def combine(a, b=None, alpha=0.5):
        if b is None:
            b = a
        return a * alpha + b

    return combine(x), combine(x, x + 1), combine(x, alpha=2.0), _helper_with_default(x)


@case((2, 2))
def keyword_only_arguments(x):
    def affine(t, *, scale, shift=0.0):
        return t * scale + shift

    return affine(x, scale=2.0), affine(x, shift=1.0, scale=-1.0)


@case((2, 2))
def positional_only_arguments(x):
    def mix(a, b, /, c=1.0):
        return a - b * c

    return mix(x, x + 1), mix(x, 2.0, c=3.0)


@case(inputs=lambda: Args.of(randn(3), scale=2.0, shift=-1.0))
def top_level_keyword_only(x, *, scale, shift=0.0):
    return x * scale + shift


@case((3,))
def lambdas(x):
    square = lambda t: t * t  # noqa: E731
    add = lambda a, b=1: a + b  # noqa: E731
    return square(x), add(x), add(x, x), (lambda: x.sum())()


@case((3,))
def lambda_late_binding(x):
    late = [lambda: x * i for i in range(3)]
    bound = [lambda i=i: x * i for i in range(3)]
    return [f() for f in late], [f() for f in bound]


@case((3,))
def module_level_closure(x):
    return _TRIPLE(x), _make_scaler(0.5)(x)


@case((3,))
def functools_partial(x):
    add_twice = functools.partial(torch.add, alpha=2)
    scaled = functools.partial(_helper_with_default, k=5)
    return add_twice(x, x), scaled(x)


@case((3,))
def function_decorator_inside(x):
    def twice(f):
        def run(t):
            return f(f(t))

        return run

    @twice
    def bump(t):
        return t + 1

    return bump(x)


@case((2,))
def recursion_with_constant_depth(x):
    def power(t, n):
        if n == 0:
            return torch.ones_like(t)
        return t * power(t, n - 1)

    def factorial(n):
        return 1 if n <= 1 else n * factorial(n - 1)

    return power(x, 3), factorial(5)


@case((2, 3))
def closure_over_argument_and_default(x):
    def inner(t, base=x):
        return t + base

    return inner(x * 2), inner(x, base=x.t().t())


@case((3,))
def nested_three_levels(x):
    a = 1

    def level1(t):
        b = 2

        def level2(u):
            return u * a + b

        return level2(t) * 2

    return level1(x)


@case((3,))
def function_as_argument(x):
    def apply(f, t, *rest):
        return f(t, *rest)

    return apply(torch.relu, x), apply(torch.add, x, x), apply(_TRIPLE, x)
