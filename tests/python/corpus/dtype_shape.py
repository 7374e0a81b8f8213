"""Corpus: logic over dtypes, shapes and devices: shape and size reads, dim/numel,
branches on dtype, conversions, view/reshape computed from shapes, torch.Size
arithmetic, finfo/iinfo, strides and contiguity."""

import math

import torch

from corpus._case import case, rand_int, randn


@case((3, 4))
def shape_last_dim(x):
    return x * x.shape[-1], x.shape[-1], x.shape


@case((3, 4))
def size_calls(x):
    return x.size(0) * x, x.size(), x.size(-1), x.size()[0]


@case((2, 3, 4))
def dim_ndim_numel_len(x):
    return x.sum() * x.dim(), x.ndim, x.numel(), len(x), x.shape.numel()


@case((3,))
def branch_on_dtype_float32(x):
    if x.dtype == torch.float32:
        return x * 2
    return x * 3


@case(inputs=lambda: (rand_int(0, 4, 3),))
def branch_on_dtype_integer(x):
    if x.dtype.is_floating_point:
        return x / 2
    if x.dtype in (torch.int32, torch.int64):
        return x * 10
    return x


@case((3,))
def convert_to_float64(x):
    y = x.to(torch.float64)
    z = x.double()
    w = x.to(dtype=torch.float16, copy=True)
    return y, z + 1, w, y.dtype, w.dtype is torch.float16


@case((2, 3, 4))
def view_with_last_dim(x):
    return x.view(-1, x.shape[-1]), x.reshape(x.shape[0], -1)


@case((2, 3, 4))
def torch_size_arithmetic(x):
    new_shape = x.shape[:-1] + (2, x.shape[-1] // 2)
    doubled = torch.Size([2]) + x.shape
    return x.view(new_shape), new_shape, doubled, isinstance(new_shape, torch.Size)


@case((2, 3, 4, 5))
def unpack_shape(x):
    b, c, h, w = x.shape
    return x.reshape(b, c * h * w), b * c, h + w, math.prod(x.shape)


@case((2, 3))
def floating_point_predicates(x):
    i = x.long()
    return x + 1, x.is_floating_point(), i.is_floating_point(), x.element_size(), i.dtype


@case((2, 3))
def finfo_and_iinfo(x):
    eps = torch.finfo(x.dtype).eps
    big = torch.iinfo(torch.int32).max
    return x + eps, eps, big, torch.finfo(torch.float16).max


@case((3, 4))
def contiguity_and_strides(x):
    t = x.t()
    return t.contiguous(), x.is_contiguous(), t.is_contiguous(), x.stride(), t.stride()


@case(inputs=lambda: (randn(4, 3).t(),))
def non_contiguous_input(x):
    return x.contiguous().view(-1), x.is_contiguous(), x.stride(), x.reshape(-1)


@case((2, 2))
def device_checks(x):
    on_cpu = x.device.type == "cpu"
    return x + int(on_cpu), on_cpu, x.is_cuda, x.device


@case((2, 2), (2, 1))
def shape_comparisons(x, y):
    same = x.shape == (2, 2)
    fits = x.size(-1) == y.size(0)
    return x * y if fits else x, same, fits, x.shape != y.shape


@case((3, 1), (1, 4))
def broadcast_shapes_and_expand_as(a, b):
    shape = torch.broadcast_shapes(a.shape, b.shape)
    return a.expand(shape) + b, shape, a.expand_as(a + b)


@case((2, 3))
def result_type_and_promote_types(x):
    t = torch.result_type(x, 2.0)
    p = torch.promote_types(torch.int32, torch.float16)
    return x.to(p), t, p


@case((2, 4))
def dtype_bitcast_view(x):
    return x.view(torch.int32), x.view(torch.int32).dtype


@case((2, 6))
def unflatten_and_movedim(x):
    return x.unflatten(1, (2, 3)), x.view(2, 2, 3).movedim(0, -1).shape


@case(inputs=lambda: (randn(2, 3, dtype=torch.float64), randn(3)))
def to_other_tensor_dtype(x, y):
    return y.to(x), y.to(x.dtype) + x, (y.to(x) + x).dtype


@case((4, 6))
def math_on_sizes(x):
    heads = 2
    head_dim = x.shape[-1] // heads
    scale = 1.0 / math.sqrt(head_dim)
    return x.view(x.shape[0], heads, head_dim) * scale, scale
