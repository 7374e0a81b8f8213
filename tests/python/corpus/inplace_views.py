"""Corpus: in-place ops and views: mutation of clones, of views seen through their
base, of the inputs themselves (a side effect the compiled call must reproduce), and
in-place shape ops."""

import torch

from corpus._case import case, randn


@case((3, 4))
def clone_then_add_(x):
    y = x.clone()
    y.add_(1)
    return y


@case((3, 4))
def mutate_row_view_of_clone(x):
    y = x.clone()
    y[0].mul_(2)
    return y


@case((3, 4))
def transpose_contiguous(x):
    t = x.t().contiguous()
    return t, t.is_contiguous(), x.transpose(0, 1).contiguous().view(-1)


@case((3, 4))
def mutate_through_transposed_view(x):
    y = x.clone()
    z = y.t()
    z[0] = 0
    return y, z


@case((3, 4))
def inplace_shape_ops(x):
    y = x.clone()
    y.unsqueeze_(0)
    shape_a = y.shape
    y.squeeze_(0)
    y.t_()
    y.transpose_(0, 1)
    return y, shape_a


@case((3,))
def add_to_input_in_place(x):
    x.add_(1)
    return x * 2


@case((3,))
def return_input_mutated_in_place(x):
    return x.mul_(2)


@case((3, 4))
def zero_row_of_input(x):
    x[0].zero_()
    return x.sum()


@case((2, 3))
def write_through_flat_view_of_input(x):
    flat = x.view(-1)
    flat[0] = 5.0
    flat[1:3].fill_(-1.0)
    return flat.sum()


@case((2, 3), (2, 3))
def copy_into_input(x, y):
    x.copy_(y * 2)
    return x + 1


@case((4,))
def chained_inplace(x):
    y = x.clone()
    out = y.add_(1).mul_(2).clamp_(min=0).relu_()
    return out, y


@case((3, 4))
def inplace_on_slice_of_clone(x):
    y = x.clone()
    y[:, 1:].sub_(1)
    y[1:, :2].div_(2)
    return y


@case((3, 4))
def view_sees_later_mutation(x):
    a = x.clone()
    b = a[0]
    c = a.view(12)
    a.add_(1)
    return b, c[:4]


@case((3,))
def augmented_assign_mutates_input(x):
    x += 1
    x *= 3
    return x


@case((3,))
def rebinding_does_not_mutate_input(x):
    x = x + 1
    x = x * 3
    return x


@case(inputs=lambda: ([randn(2), randn(2)],))
def mutate_each_tensor_in_list(xs):
    for t in xs:
        t.mul_(2)
    return len(xs)


@case((3,))
def detach_shares_storage(x):
    d = x.detach()
    d.add_(1)
    return x * 1


@case((3, 4))
def fill_zero_masked_index_fill(x):
    a = x.clone().fill_(2.0)
    b = x.clone().zero_()
    c = x.clone().masked_fill_(x > 0, 0.0)
    d = x.clone().index_fill_(1, torch.tensor([0, 2]), -3.0)
    return a, b, c, d


@case((3,), (3,))
def out_argument(x, y):
    out = torch.zeros(3)
    torch.add(x, y, out=out)
    torch.mul(out, 2, out=out)
    return out


@case(inputs=lambda: (randn(3, requires_grad=True),))
def inplace_on_clone_of_grad_input(x):
    y = x.clone()
    y.mul_(2)
    y.add_(x)
    return y


@case((2, 1))
def expand_clone_mutate(x):
    y = x.expand(2, 3).clone()
    y[:, 0] = 1.0
    return y


@case((4, 4))
def diagonal_view_mutation(x):
    y = x.clone()
    y.diagonal().fill_(0.0)
    y.diagonal(offset=1).add_(10.0)
    return y


@case((2, 3))
def input_mutated_via_unsqueezed_view(x):
    v = x.unsqueeze(0)
    v.mul_(-1)
    return v.shape, x.clone()
