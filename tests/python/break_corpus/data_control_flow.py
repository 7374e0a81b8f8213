"""Break corpus: control flow decided by tensor values — if on a reduction, while on
a tensor condition, elif chains, and/or, assert, data-dependent shapes."""

import torch

from break_corpus._scenario import positive, randn, scenario


@scenario(lambda: (randn(4),), other=lambda: (randn(7),))
def if_on_tensor_sum(x):
    y = x * 2
    if y.sum() > 0:
        z = y.relu()
    else:
        z = y.neg().relu()
    return z + 1


@scenario(lambda: (positive(3) * 8,))
def while_tensor_max_above_one(t):
    t = t + 1
    steps = 0
    while t.max() > 1:
        t = t / 2
        steps += 1
    return t * 3, steps


@scenario(lambda: (randn(5),))
def if_elif_else_on_tensor_mean(x):
    m = x.mean()
    if m > 0.3:
        y = x * 3
    elif m < -0.3:
        y = x * -3
    else:
        y = x.abs()
    return y.cumsum(0)


@scenario(lambda: (randn(3), randn(3)))
def and_or_on_tensor_conditions(a, b):
    c = a - b
    if (c > 0).all() or (c < 0).all():
        out = c * 2
    elif (a > 0).any() and (b > 0).any():
        out = a * b
    else:
        out = a + b
    return out.sin()


@scenario(lambda: (positive(4),))
def assert_on_tensor_value(x):
    y = x.log()
    assert (x > 0).all(), "inputs must be positive"
    return y.exp() * 2


@scenario(lambda: (randn(6),))
def boolean_mask_selection(x):
    y = x * 2
    kept = y[y > 0]
    return kept.sum() + y.mean(), kept.shape[0]


@scenario(lambda: (randn(3, 4),))
def nonzero_indices_then_gather(x):
    mask = x > 0.2
    idx = mask.nonzero()
    vals = x[idx[:, 0], idx[:, 1]]
    return vals * 2, idx


@scenario(lambda: (randn(4),))
def ternary_on_tensor_comparison(x):
    y = x.exp() if x[0] > x[1] else x.neg().exp()
    return y / y.sum()


@scenario(lambda: (positive(3) * 3,))
def while_with_break_on_tensor(x):
    total = torch.zeros(3)
    i = 0
    while True:
        total = total + x
        i += 1
        if total.sum() > 10 or i > 20:
            break
    return total, i


@scenario(lambda: (randn(3),), calls=5)
def value_after_break_changes_shape_per_call(x):
    y = x.abs()
    n = int(y.sum().item() * 3) % 4 + 1
    return torch.ones(n) * y.mean(), n


def branch_taken_alternates_between_calls():
    calls = [0]

    def alternate(x):
        calls[0] += 1
        y = x.abs() + 0.1
        if (y * (-1) ** calls[0]).sum() > 0:
            print("positive branch on call", calls[0])
            out = y.exp()
        else:
            print("negative branch on call", calls[0])
            out = y.log()
        return out * 2

    return alternate


scenario(lambda: (randn(3),), factory=True, calls=4)(branch_taken_alternates_between_calls)
