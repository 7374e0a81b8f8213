"""Corpus: indexing with integer tensors and lists, gather/scatter style ops, and
index assignment on clones (no boolean-mask indexing: its shape depends on data)."""

import torch

from corpus._case import case, rand_bool, rand_int, randn


@case(inputs=lambda: (randn(5, 3), rand_int(0, 5, 4)))
def index_with_int_tensor(x, idx):
    return x[idx], x[idx].shape


@case(inputs=lambda: (randn(3, 6), rand_int(0, 6, 2)))
def index_columns_with_tensor(x, idx):
    return x[:, idx], x[..., idx].sum(-1)


@case(inputs=lambda: (randn(4, 5), rand_int(0, 4, 3), rand_int(0, 5, 3)))
def advanced_index_pairs(x, rows, cols):
    return x[rows, cols], x[rows[:, None], cols]


@case((5, 2))
def index_with_python_list(x):
    return x[[0, 2, 4]], x[[1, 1]], x[(0, 1)]


@case((3, 4))
def index_with_constant_tensor(x):
    idx = torch.tensor([2, 0])
    return x[idx], x[:, idx]


@case(inputs=lambda: (randn(4, 3), rand_int(0, 3, 4, 1)))
def gather_and_take_along_dim(x, idx):
    return torch.gather(x, 1, idx), torch.take_along_dim(x, idx, dim=1)


@case(inputs=lambda: (randn(5, 4), rand_int(0, 5, 3)))
def index_select(x, idx):
    return x.index_select(0, idx), torch.index_select(x, 1, idx.remainder(4))


@case(inputs=lambda: (randn(10, 4), rand_int(0, 10, 2, 3)))
def embedding_by_indexing(table, tokens):
    return table[tokens], table[tokens].mean(1)


@case((3, 4))
def index_assign_scalar_on_clone(x):
    y = x.clone()
    y[0] = 1
    y[1, 2] = -1.0
    y[-1, -1] = y[0, 0] * 3
    return y


@case(inputs=lambda: (randn(5, 3), rand_int(0, 5, 2)))
def index_assign_with_tensor_index(x, idx):
    y = x.clone()
    y[idx] = 0.0
    z = x.clone()
    z[:, 1] = x[:, 0]
    return y, z


@case(inputs=lambda: (randn(4, 3), rand_int(0, 4, 4), randn(4, 3)))
def index_add_and_put(x, idx, src):
    a = x.clone().index_add_(0, idx, src)
    b = x.clone().index_put_((idx,), src, accumulate=True)
    return a, b


def _distinct_columns():
    # Scatter with repeated indices in one row leaves the winner unspecified.
    idx = torch.stack([torch.randperm(5)[:2] for _ in range(3)])
    return randn(3, 5), idx, randn(3, 2)


@case(inputs=_distinct_columns)
def scatter_ops(x, idx, src):
    a = x.clone().scatter_(1, idx, src)
    b = torch.zeros(3, 5).scatter_add(1, idx, src)
    return torch.scatter(x, 1, idx, 7.0), a.shape, b


@case(inputs=lambda: (randn(3, 4), rand_bool(3, 4)))
def masked_fill_and_where(x, mask):
    return x.masked_fill(mask, 0.0), torch.where(mask, x, -x), x.masked_fill(~mask, -1e9)


@case((2, 6))
def sort_indices_then_gather(x):
    values, indices = x.sort(dim=1)
    return values, indices, x.gather(1, indices), x.argsort(dim=1, descending=True)


@case((4, 4))
def index_fill_and_diagonal(x):
    idx = torch.tensor([1, 3])
    return x.index_fill(1, idx, 2.0), x.diagonal(), x.diagonal(offset=1)
