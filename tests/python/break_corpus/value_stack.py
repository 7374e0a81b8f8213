"""Break corpus: breaks while many values are live on the value stack — a print inside
a call's argument list, inside list/tuple/dict/set displays, f-strings, binary
operations, subscripts, comparisons, return tuples and method-call chains — so the
rebuilt frame must restore every pending operand in order."""

import torch

from break_corpus._scenario import randn, scenario


def _combine(a, b, marker, c, *, scale=1.0):
    return (a + b * c) * scale, marker


@scenario(lambda: (randn(3), randn(3), randn(3)))
def print_inside_call_arguments(a, b, c):
    x = a * 2
    out, marker = _combine(x, b + 1, print("in the argument list"), c.exp(), scale=0.5)
    return out.relu(), marker


@scenario(lambda: (randn(2), randn(2)))
def item_inside_list_display(a, b):
    items = [a * 2, b.sum().item(), b - a, (a * b).max().item(), b]
    return torch.stack([items[0], items[2], items[4]]) * items[1] + items[3]


@scenario(lambda: (randn(3),))
def item_inside_dict_display(x):
    y = x.sin()
    d = {"y": y, "max": y.max().item(), "z": y * 2, "min": y.min().item(), "n": 3}
    return d["z"] + d["max"] - d["min"], d


@scenario(lambda: (randn(2, 2),))
def item_inside_fstring(x):
    y = x @ x
    text = f"{y.shape[0]}x{y.shape[1]} sum={y.sum().item():.3f} trace={y.trace().item():.3f}!"
    print(text)
    return y.t() * len(text)


@scenario(lambda: (randn(3), randn(3)))
def item_inside_binary_operations(a, b):
    y = a * 2 + b.sum().item() * (a - b) - a.max().item() / (1 + b.abs().max().item())
    return y.tanh()


@scenario(lambda: (randn(4, 3),))
def item_inside_subscript(x):
    y = x.cumsum(0)
    z = y[int(x[0].abs().argmax()), :] * y[1:3, int(x[1].abs().argmax())].sum()
    return z


@scenario(lambda: (randn(3), randn(3)))
def tensor_bool_in_comparison_chain(a, b):
    s = a.sum()
    ok = -100 < s.item() < 100 != (b.max() > 10).item()
    return (a + b) * (2 if ok else 3), ok


@scenario(lambda: (randn(3),))
def print_inside_tuple_in_return(x):
    y = x * 3
    return y.exp(), print("returning"), y.log1p().abs(), x.shape


@scenario(lambda: (randn(2), randn(2), randn(2)))
def nested_calls_with_break_in_innermost_argument(a, b, c):
    out = torch.stack([a.add(b.mul(float(c.sum()))), torch.cat([a, b])[:2], c * 2]).sum(0)
    return out


@scenario(lambda: (randn(3),))
def set_and_tuple_displays_with_item(x):
    y = x.abs()
    keys = {round(y.max().item(), 2), round(y.min().item(), 2), 0.0}
    pair = (y * 2, round(y.sum().item(), 3), y + 1)
    return pair[0] + pair[2] * pair[1], sorted(keys)


@scenario(lambda: (randn(2, 3),))
def method_chain_with_item_in_argument(x):
    y = x.exp().mul(x.abs().max().item()).sum(dim=1).add(x.min().item()).softmax(0)
    return y


@scenario(lambda: (randn(3),))
def print_inside_comprehension_over_tensors(x):
    parts = [(x * i, print("element", i))[0] for i in range(3)]
    return torch.stack(parts).mean(0)


@scenario(lambda: (randn(3), randn(3)))
def print_inside_keyword_argument_value(a, b):
    y = a * 2
    out, marker = _combine(y, b, marker=print("keyword value") or "m", c=b.exp(), scale=2.0)
    return out - a, marker


@scenario(lambda: (randn(4),), other=lambda: (-randn(4).abs(),))
def walrus_on_item_in_condition(x):
    y = x.exp() - 1.5
    if (peak := y.max().item()) > 0:
        y = y / peak
    return y * 2, peak


@scenario(lambda: (randn(2),))
def unpacking_tolist_into_names(x):
    y = x * 10
    first, second = y.round().tolist()
    return x * first + second, (first, second)
