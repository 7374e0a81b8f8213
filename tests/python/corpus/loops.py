"""Corpus: loops over iterables the VM knows: range, enumerate, zip, reversed,
dict views, lists of tensors, a tensor's first dimension, while loops on Python
counters, break/continue/else."""

import itertools

import torch

from corpus._case import Args, case, randn


def _tensor_list(n, *shape):
    return lambda: ([randn(*shape) for _ in range(n)],)


@case((3,))
def for_range(x):
    out = x
    for i in range(3):
        out = out * 2 + i
    return out


@case((3,))
def for_range_start_stop_step(x):
    acc = torch.zeros(3)
    for i in range(10, 0, -3):
        acc = acc + x * i
    return acc


@case(inputs=_tensor_list(4, 3))
def for_over_list_of_tensors(xs):
    total = xs[0] * 0
    for t in xs:
        total = total + t.relu()
    return total


@case(inputs=_tensor_list(3, 2))
def for_enumerate(xs):
    out = []
    for i, t in enumerate(xs):
        out.append(t * i)
    for i, t in enumerate(xs, start=10):
        out.append(t + i)
    return out


@case(inputs=lambda: ([randn(2) for _ in range(3)], [randn(2) for _ in range(4)]))
def for_zip(xs, ys):
    acc = []
    for a, b in zip(xs, ys):
        acc.append(a * b)
    for a, b, c in zip(xs, ys, range(100)):
        acc.append(a + c)
    return torch.stack(acc)


@case(inputs=_tensor_list(3, 2))
def for_reversed(xs):
    out = xs[-1]
    for t in reversed(xs):
        out = out * 0.5 + t
    for i in reversed(range(2)):
        out = out + i
    return out


@case(inputs=lambda: ({"a": randn(2), "b": randn(2), "c": randn(2)},))
def for_dict_items_keys_values(d):
    scaled = {}
    for k, v in d.items():
        scaled[k] = v * len(k)
    names = []
    for k in d:
        names.append(k.upper())
    total = 0
    for v in d.values():
        total = total + v
    return scaled, names, total


@case((3, 4))
def for_over_tensor_rows(x):
    rows = []
    for row in x:
        rows.append(row.sum())
    return torch.stack(rows)


@case((2,))
def while_on_python_counter(x):
    i = 0
    out = x
    while i < 4:
        out = out + i
        i += 1
    return out, i


@case((2,))
def break_continue_else(x):
    out = x
    for i in range(10):
        if i % 2 == 0:
            continue
        if i > 6:
            break
        out = out * i
    else:
        out = out * 1000
    for j in range(2):
        out = out + j
    else:
        out = out - 1
    return out


@case((2, 2))
def nested_loops(x):
    grid = []
    for i in range(2):
        row = []
        for j in range(3):
            row.append(x * i + j)
        grid.append(torch.stack(row))
    return torch.stack(grid)


@case((2,))
def loop_over_functions(x):
    out = []
    for fn in (torch.sin, torch.cos, torch.relu, abs):
        out.append(fn(x))
    return out


@case((2,))
def loop_with_nested_unpacking(x):
    pairs = [(1, (2.0, "a")), (3, (4.0, "b"))]
    out = x
    names = ""
    for n, (f, name) in pairs:
        out = out * n + f
        names += name
    return out, names


@case((2, 3, 4))
def loop_over_shape(x):
    total = 1
    for size in x.shape:
        total *= size
    return x.reshape(total), total


@case((2,))
def itertools_product_and_chain(x):
    out = []
    for a, b in itertools.product(range(2), (10, 20)):
        out.append(x * a + b)
    return torch.stack(out), list(itertools.chain([1], (2, 3)))


@case(inputs=lambda: Args.of([randn(2) for _ in range(4)], 2))
def loop_bound_from_argument(xs, n):
    out = xs[0]
    for t in xs[:n]:
        out = out + t
    return out


@case((3,))
def while_true_with_break(x):
    steps = 0
    out = x
    while True:
        steps += 1
        out = out.exp() * 0.5
        if steps == 3:
            break
    return out, steps


@case((2,))
def loop_over_string(x):
    out = x
    for ch in "ab c":
        if ch == " ":
            continue
        out = out + ord(ch) - 96
    return out
