"""Corpus: autograd state: torch.no_grad / enable_grad / set_grad_enabled blocks and
decorators, inputs that require grad, detach, and requires_grad of the results."""

import torch

from corpus._case import case, randn


def _grad_input(*shape):
    return lambda: (randn(*shape, requires_grad=True),)


@torch.no_grad()
def _no_grad_helper(t):
    return t * 3


@case(inputs=_grad_input(3))
def no_grad_block(x):
    with torch.no_grad():
        frozen = x * 2
    live = x * 2
    return frozen, live, frozen.requires_grad, live.requires_grad


@case(inputs=_grad_input(3))
def enable_grad_inside_no_grad(x):
    with torch.no_grad():
        a = x + 1
        with torch.enable_grad():
            b = x + 1
        c = x - 1
    return a, b, c


@case(inputs=_grad_input(2, 2))
def set_grad_enabled_block(x):
    with torch.set_grad_enabled(False):
        y = x.exp()
        inside = torch.is_grad_enabled()
    return y, x.exp(), inside, torch.is_grad_enabled()


@case(inputs=_grad_input(3))
def no_grad_decorated_helper(x):
    return _no_grad_helper(x), x * 3


@case(inputs=_grad_input(3))
def detach_stops_gradient(x):
    y = x * 2
    return y.detach() + x, y.detach().requires_grad


@case(inputs=lambda: (randn(3, requires_grad=True), randn(3)))
def mixed_requires_grad(x, y):
    z = x * y
    return z, y * 2, x.requires_grad, y.requires_grad, z.is_leaf


@case(inputs=_grad_input(2, 3))
def grad_flows_through_views_and_reductions(x):
    return x.t().relu().sum(0), x[:, 1:].mean(), x.view(-1).softmax(0)


@case((3,))
def requires_grad_set_inside(x):
    w = torch.ones(3, requires_grad=True)
    y = (x * w).sum()
    return y, y.requires_grad, w.requires_grad


@case(inputs=_grad_input(3))
def no_grad_with_inplace_on_clone(x):
    y = x.clone()
    with torch.no_grad():
        y.mul_(2)
    return y, y.requires_grad
