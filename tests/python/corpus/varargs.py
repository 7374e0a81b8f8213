"""Corpus: *args and **kwargs: functions that take them, calls that spread them
(`f(*xs, **kw)`), forwarding wrappers, and top-level functions called with them."""

import torch

from corpus._case import Args, case, randn


def _total(*args):
    out = 0
    for a in args:
        out = out + a
    return out


def _describe(a, *args, b=1, **kwargs):
    return a * b, len(args), sorted(kwargs)


@case(inputs=lambda: ([randn(3) for _ in range(3)],))
def call_with_star_list(xs):
    return _total(*xs), _total(xs[0]), _total()


@case(inputs=lambda: Args.of(randn(2), randn(2), randn(2)))
def top_level_star_args(*args):
    return torch.stack(args), len(args), args[-1] * 2


@case(inputs=lambda: Args.of(randn(2), alpha=randn(2), beta=randn(2)))
def top_level_star_kwargs(x, **kwargs):
    out = x
    for name, value in kwargs.items():
        out = out + value
    return out, list(kwargs)


@case((2,), (2,))
def call_with_star_and_double_star(x, y):
    kw = {"b": 3, "extra": y}
    return _describe(x, *[y, y], **kw)


@case((2,))
def kwargs_insertion_order(x):
    def keys(**kwargs):
        return list(kwargs), tuple(kwargs.values())

    names, values = keys(zeta=x, alpha=x + 1, mid=2)
    return names, values


@case((3,))
def forwarding_wrapper(x):
    def inner(a, b=0.0, *, c=1.0):
        return a * c + b

    def wrapper(*args, **kwargs):
        return inner(*args, **kwargs) + 1

    return wrapper(x), wrapper(x, 2.0), wrapper(x, c=3.0), wrapper(x, b=1.0, c=0.5)


@case((2,), (2,))
def several_stars_in_one_call(x, y):
    first = [x]
    second = (y, x)
    d1 = {"a": 1}
    d2 = {"b": 2}

    def collect(*args, **kwargs):
        return torch.stack(args), kwargs

    return collect(*first, *second, **d1, **d2)


@case((2,))
def dict_from_keywords(x):
    d = dict(a=x, b=x * 2)
    e = dict(d, c=x * 3)
    return e, dict([("k", x)])


@case((2, 3))
def star_args_with_defaults_mixed(x):
    def f(a, b=2, *args, c, d=4, **kw):
        return a * b + c * d + sum(args), sorted(kw.items())

    return f(x, c=1), f(x, 3, 5, 6, c=2, d=1, e=7)


@case((3,))
def unpack_tensor_shape_into_call(x):
    shape = (3, 1)
    return x.view(*shape), x.reshape(*shape).expand(*(3, 2)), torch.zeros(*shape) + 1


@case((2,))
def args_tuple_is_a_tuple(x):
    def f(*args, **kwargs):
        return type(args) is tuple, type(kwargs) is dict, args

    return f(x * 2, 1, "s")


@case((2,), (2,))
def kwargs_passed_through_unchanged(x, y):
    def inner(**kwargs):
        kwargs["added"] = x + 1
        return kwargs

    options = {"y": y}
    result = inner(**options)
    return result, list(options)


@case(inputs=lambda: Args.of(randn(2, 2), randn(2, 2), scale=0.5))
def top_level_star_args_and_keyword(*tensors, scale=1.0):
    return [t * scale for t in tensors], scale


@case((4,))
def starred_call_from_shape(x):
    parts = [1, 3]
    return torch.split(x, parts), x.new_zeros(*x.shape)
