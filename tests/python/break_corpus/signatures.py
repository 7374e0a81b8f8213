"""Break corpus: how the compiled function is called and what it returns — *args,
**kwargs, defaults, keyword-only arguments, mutable defaults, and tuples, dicts and
named tuples of tensors computed after the break."""

import collections


from corpus._case import Args
from break_corpus._scenario import randn, scenario

Pair = collections.namedtuple("Pair", ["low", "high"])


@scenario(lambda: (randn(2), randn(2), randn(2)), other=lambda: (randn(2), randn(2)))
def star_args_with_break(*tensors):
    total = sum(tensors)
    print("got", len(tensors), "tensors")
    return total * len(tensors)


@scenario(lambda: Args.of(randn(3), scale=2.0, shift=randn(3)),
          other=lambda: Args.of(randn(3), scale=3.0))
def star_kwargs_with_break(x, **options):
    y = x * options.get("scale", 1.0)
    print("options:", sorted(options))
    if "shift" in options:
        y = y + options["shift"]
    return y.relu()


@scenario(lambda: (randn(3),), other=lambda: (randn(3), 5))
def default_argument_used_after_break(x, repeat=2, label="default"):
    y = x.repeat(repeat)
    print(label, repeat)
    return y.cumsum(0)


@scenario(lambda: Args.of(randn(2, 2), normalize=True),
          other=lambda: Args.of(randn(2, 2), normalize=False, eps=0.5))
def keyword_only_arguments(x, *, normalize, eps=1e-3):
    y = x.abs() + eps
    print("normalize" if normalize else "raw", eps)
    if normalize:
        y = y / y.sum()
    return y


@scenario(lambda: (randn(3),))
def returns_tuple_computed_after_break(x):
    a = x.exp()
    print("computing the rest")
    b = a.log()
    return a, b, a + b, a.shape


@scenario(lambda: (randn(2, 3),))
def returns_dict_computed_after_break(x):
    mean = x.mean(dim=1)
    print("mean shape", tuple(mean.shape))
    return {"mean": mean, "centered": x - mean.unsqueeze(1), "n": x.shape[1],
            "max": x.max().item()}


@scenario(lambda: (randn(4),))
def returns_namedtuple_after_break(x):
    lo, hi = x.min(), x.max()
    print("range", round((hi - lo).item(), 4))
    return Pair(lo * 2, hi * 2)


SEEN = []


def _with_mutable_default(t, seen=SEEN):
    seen.append(t.shape[0])
    print("seen so far", len(seen))
    return t * len(seen)


@scenario(lambda: (randn(2),), globals=("SEEN",))
def helper_with_mutable_default_argument(x):
    y = _with_mutable_default(x + 1)
    return y, len(_with_mutable_default.__defaults__[0]) > 0


@scenario(lambda: Args.of(randn(3), randn(3), 4, flag=True, extra=randn(3)))
def mixed_positional_star_and_keywords(a, b, /, n, *rest, flag=False, **more):
    c = (a + b) * n
    print("rest", len(rest), "more", sorted(more), "flag", flag)
    return c + more["extra"] if flag else c


@scenario(lambda: (randn(3),))
def returns_input_and_view_after_break(x):
    v = x.view(3, 1)
    print("view made")
    x.add_(1)
    return x, v, v.squeeze(1) * 2
