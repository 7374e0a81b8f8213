"""Corpus: slicing of tensors, lists, tuples and strings: basic slices, steps,
Ellipsis and None, slices computed from shapes, slice objects, and slice assignment
on clones."""

import torch

from corpus._case import case, randn


@case((4, 5))
def basic_tensor_slices(x):
    return x[1:], x[:-1], x[::2], x[1:3], x[-1], x[:, -2:]


@case((3, 6))
def column_step_slice(x):
    return x[:, 1::2], x[:, ::3], x[:, 1:-1:2]


@case((2, 3, 4))
def ellipsis_and_none(x):
    return x[..., None], x[None], x[..., -1], x[:, None, :, None].shape, x[..., 1:, None]


@case((2, 3, 4))
def mixed_int_and_slice(x):
    return x[1:2, :, 0], x[:, 1], x[0, 1:, ::2], x[-1, -1, -1]


@case(inputs=lambda: ([randn(2) for _ in range(6)],))
def list_slices_negative_steps(xs):
    rev = xs[::-1]
    odd_back = xs[-1:0:-2]
    return torch.stack(rev), torch.stack(odd_back), len(xs[::-3]), xs[-2:]


@case((6,))
def tuple_and_range_slices(x):
    t = (1, 2, 3, 4, 5)
    r = range(10)[2:8:2]
    return x[: t[-1]], t[1:-1], t[::-1], list(r), r[-1]


@case((4, 4))
def slices_from_shape(x):
    n = x.shape[0] // 2
    return x[:n], x[n:], x[:, : x.size(1) - 1]


@case((5, 3))
def slice_objects(x):
    s = slice(1, None, 2)
    rows = slice(0, 2)
    return x[s], x[rows, s], s.start, s.stop is None


@case((4, 4))
def interior_slice(x):
    return x[1:-1, 1:-1], x[1:-1, 1:-1].sum()


@case((6,))
def strings_sliced(x):
    word = "abcdef"
    return x[: len(word[1:4])], word[1:4], word[::-1], word[-2:]


@case((2, 5))
def shape_tuple_slicing(x):
    tail = x.shape[1:]
    head = x.shape[:1]
    return x.reshape(*head, *tail), tail, head + tail, type(tail).__name__


@case((4, 3))
def slice_assignment_on_clone(x):
    y = x.clone()
    y[:, 0] = 0
    y[1:3] = 5.0
    return y


@case((4, 3), (2, 3))
def slice_assignment_from_tensor(x, other):
    y = x.clone()
    y[::2] = other
    y[..., -1] = x[..., 0]
    return y


@case((3, 4))
def slice_augmented_assignment(x):
    y = x.clone()
    y[..., 1] += 1
    y[0, :] *= 2
    return y


@case((4, 4))
def chained_slices(x):
    return x[1:][1:][:, 1:], x[::2][::2], x[:, 1:].t()[1:]


@case((3, 4, 5))
def narrow_select_unbind(x):
    a = x.narrow(2, 1, 3)
    b = x.select(1, 0)
    c0, c1, c2 = x.unbind(0)
    return a, b, c2 - c0, c1


@case((6, 4))
def split_and_chunk(x):
    a, b = x.chunk(2, dim=0)
    parts = x.split(2, dim=0)
    left, right = torch.split(x, [1, 3], dim=1)
    return a + b, len(parts), parts[-1], left, right
