"""Break corpus: the break happens inside functions the compiled function calls —
helpers one to three deep, methods of nn.Modules, static and class methods,
functools.partial, lambdas, recursion."""

import functools

import torch

from break_corpus._scenario import randn, scenario, seeded


def _leaf(t):
    print("leaf sees", t.shape)
    return t * 2


def _middle(t):
    u = t + 1
    return _leaf(u) - 1


def _outer(t):
    v = t.sin()
    return _middle(v) * v


@scenario(lambda: (randn(3),), other=lambda: (randn(2, 2),))
def break_three_calls_deep(x):
    y = x.exp()
    z = _outer(y)
    return z.sum() + y


def _checked_div(a, b):
    if (b.abs() < 1e-3).any():
        return a
    return a / b


@scenario(lambda: (randn(4), randn(4)))
def break_in_helper_on_tensor_condition(a, b):
    c = a * 2
    d = _checked_div(c, b)
    return d.tanh()


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        if h.mean() > 0:
            h = h.relu()
        return self.post(h)

    def post(self, h):
        print(f"post: {h.shape[0]} rows")
        return h * 0.5


@scenario(lambda: (seeded(Block), randn(2, 4)))
def break_in_module_forward_and_method(block, x):
    y = block(x)
    return block(y + x)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first = Block()
        self.second = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.second(self.first(x)).sum(dim=1)


@scenario(lambda: (seeded(Net), randn(3, 4, requires_grad=True)))
def break_in_nested_submodule(net, x):
    out = net(x * 2)
    return out.softmax(0)


class Stats:
    @staticmethod
    def center(t):
        return t - t.mean()

    @classmethod
    def describe(cls, t):
        print(cls.__name__, "max", round(t.max().item(), 3))
        return t

    def __init__(self, scale):
        self.scale = scale

    def apply(self, t):
        t = self.describe(self.center(t))
        return t * self.scale


@scenario(lambda: (Stats(3.0), randn(4)))
def break_in_classmethod_via_method(stats, x):
    return stats.apply(x.exp()) + 1


def _scaled(t, factor, *, shift):
    print("scaling by", factor, "shift", shift)
    return t * factor + shift


@scenario(lambda: (randn(3),))
def break_in_functools_partial(x):
    f = functools.partial(_scaled, factor=2.0, shift=0.5)
    y = f(x.relu())
    return y.cumsum(0)


@scenario(lambda: (randn(3),))
def break_in_lambda_argument(x):
    report = lambda t: print("lambda got", t.numel()) or t * 2  # noqa: E731
    y = report(x + 1)
    return y.sum() * x


def _depth_sum(t, depth):
    if depth == 0:
        print("bottom reached with", t.shape)
        return t
    return _depth_sum(t * 0.5, depth - 1) + t


@scenario(lambda: (randn(3), 3), other=lambda: (randn(3), 2))
def recursion_with_break_at_the_bottom(x, depth):
    y = x + 1
    return _depth_sum(y, depth) * 2


def _fact_tensor(n, t):
    if n.item() <= 1:
        return t
    return _fact_tensor(n - 1, t * n)


@scenario(lambda: (torch.tensor(4), randn(2)))
def recursion_on_tensor_value(n, x):
    y = x.abs() + 1
    return _fact_tensor(n, y) / 24


def recursive_self_call(x, n):
    y = x * 2
    if n > 0:
        print("recurse", n)
        y = recursive_self_call(y, n - 1) + y
    return y - 1


scenario(lambda: (randn(2), 2))(recursive_self_call)


def compiled_module_with_break_in_forward():
    return seeded(Block)


scenario(lambda: (randn(3, 4),), other=lambda: (randn(5, 4),), factory=True)(
    compiled_module_with_break_in_forward)


def compiled_bound_method_with_break():
    return Stats(2.0).apply


scenario(lambda: (randn(4),), factory=True)(compiled_bound_method_with_break)
