"""Break corpus: tensor values read into Python — .item(), .tolist(), .numpy(),
int(t), float(t), bool(t) — and used by the tensor code after them."""

import torch

from break_corpus._scenario import rand_int, randn, scenario


@scenario(lambda: (randn(3, 3),), other=lambda: (randn(4, 4),))
def item_used_as_python_scalar(x):
    m = x.abs().max().item()
    y = x / (m + 1.0)
    return y * 2, m


@scenario(lambda: (randn(4),))
def tolist_then_build_tensor(x):
    values = (x * 10).round().tolist()
    clipped = [min(max(v, -5.0), 5.0) for v in values]
    t = torch.tensor(clipped)
    return t + x


@scenario(lambda: (randn(2, 3),))
def numpy_roundtrip(x):
    y = x * 3
    arr = y.numpy()
    back = torch.from_numpy(arr.copy() * 2)
    return back - y


@scenario(lambda: (rand_int(1, 5, 1), randn(6)))
def int_of_tensor_as_slice_bound(n, x):
    k = int(n)
    y = x.cumsum(0)
    return y[:k] * 2, y[k:].sum()


@scenario(lambda: (randn(3),))
def float_of_tensor_in_arithmetic(x):
    s = float(x.sum())
    scale = 1.0 / (abs(s) + 1.0)
    return x * scale + s


@scenario(lambda: (randn(5),), other=lambda: (-randn(5).abs(),))
def bool_of_tensor_as_flag(x):
    any_positive = bool((x > 0).any())
    y = x.relu() if any_positive else x.neg()
    return y + 1, any_positive


@scenario(lambda: (rand_int(0, 4, 6),))
def item_as_index(idx):
    table = torch.arange(12.0).reshape(4, 3)
    i = idx[0].item()
    row = table[i]
    return row * idx.float().mean()


@scenario(lambda: (randn(2, 2),))
def item_in_range_loop_count(x):
    n = int((x.abs().sum() * 2).item()) % 4 + 1
    acc = torch.zeros(2)
    for i in range(n):
        acc = acc + x[0] * i
    return acc


@scenario(lambda: (randn(3, requires_grad=True),))
def item_of_grad_tensor_keeps_graph(x):
    y = (x * x).sum()
    v = y.item()
    z = y * 2 + v
    return z


@scenario(lambda: (randn(4, 2),))
def tolist_of_shape_rows(x):
    rows = x.argmax(dim=1).tolist()
    picked = torch.stack([x[i, r] for i, r in enumerate(rows)])
    return picked.exp(), rows
