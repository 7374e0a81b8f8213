"""Corpus: tensor method calls and chains of them: reductions, shape methods,
structseq results (max, topk, sort), matrix products and conversions."""

import torch

from corpus._case import case, rand_bool, randn


@case((3, 4))
def relu_sum_unsqueeze_chain(x):
    return x.relu().sum(dim=1).unsqueeze(0)


@case((4, 3))
def transpose_matmul_chain(x):
    return x.t().mm(x), x.matmul(x.T).diag(), x.T @ x


@case((2, 6))
def view_mean_keepdim(x):
    return x.view(2, 3, 2).mean(-1, keepdim=True), x.mean(), x.sum(dim=(0, 1))


@case((2, 3, 4))
def permute_reshape_flatten(x):
    return x.permute(2, 0, 1).reshape(4, -1), x.flatten(1), x.flatten().shape


@case((3, 5))
def structseq_max_min(x):
    values, indices = x.softmax(-1).max(dim=-1)
    result = x.min(dim=0)
    return values, indices, result, result.values - 1, x.max()


@case((3, 5))
def topk_and_sort(x):
    top = x.topk(2, dim=1)
    s = x.sort(dim=-1, descending=True)
    return top.values, top.indices, s, x.kthvalue(2, dim=1).values


@case((4, 3))
def cumulative_and_arg_reductions(x):
    return x.cumsum(0), x.cumprod(1), x.argmax(dim=1), x.argmin(), x.amax(dim=0), x.logsumexp(1)


@case((4, 3))
def norms_and_statistics(x):
    return x.norm(dim=-1), x.std(dim=0), x.var(dim=1, unbiased=False), x.abs().prod(0)


@case((3, 1))
def expand_repeat_tile(x):
    return x.expand(3, 4), x.repeat(2, 3), x.expand(-1, 2).contiguous(), x.tile((1, 2))


@case((1, 3, 1))
def squeeze_unsqueeze(x):
    return x.squeeze(), x.squeeze(0), x.squeeze(-1).unsqueeze(1), x.unsqueeze(-1).shape


@case((3, 4))
def clamp_pow_sqrt_chain(x):
    return x.clamp_min(0).pow(2).add(1).sqrt().neg().exp()


@case((2, 3))
def new_tensor_factories(x):
    return x.new_zeros(2, 2), x.new_ones((3,)), x.new_full((2,), 7.0), x.new_tensor([1.0, 2.0])


@case(inputs=lambda: (randn(2, 3), torch.randint(0, 9, (2, 3))))
def type_conversions(x, i):
    return x.type_as(i), i.float(), x.int(), x.long().double(), x.bool(), i.to(x)


@case((2, 3, 4), (2, 4, 5))
def batched_products(a, b):
    return a.bmm(b), torch.einsum("bij,bjk->bik", a, b), torch.matmul(a, b).sum(-1)


@case((3,), (3,))
def vector_products(u, v):
    return u.dot(v), u.outer(v), torch.cross(u, v, dim=0), u @ v


@case((4, 4))
def flip_roll_triangles(x):
    return x.flip(0), x.roll(1, 0), x.tril(), x.triu(1), x.trace()


@case((6,), (6,))
def lerp_addcmul_addcdiv(x, y):
    return x.lerp(y, 0.3), x.addcmul(y, y, value=0.5), x.addcdiv(y, y.abs() + 1, value=2.0)


@case(inputs=lambda: (randn(3, 4), rand_bool(3, 4)))
def masked_and_logical_methods(x, mask):
    return x.masked_fill(mask, 1.0).sum(1), mask.any(dim=1), mask.all(dim=0), mask.sum()


@case((3, 4))
def split_then_contiguous(x):
    a, b = x.split([1, 3], dim=1)
    return b.contiguous().view(-1), a.t().contiguous().view(-1)


@case((2, 5))
def sum_add_mul_method_chain_on_scalar(x):
    return x.sum().add(1).mul(2), x.mean(1).sub(0.5).div(3).abs()
