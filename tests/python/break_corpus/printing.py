"""Break corpus: print() in the middle of tensor code — plain text, tensors, f-strings
with tensor values, sep/end/file arguments, prints in helpers and in branches."""

import sys

import torch

from break_corpus._scenario import randn, scenario


@scenario(lambda: (randn(3, 4),), other=lambda: (randn(5, 4),))
def print_text_between_tensor_ops(x):
    y = x.relu() * 2
    print("between the ops")
    z = y.sum(dim=0) + x.mean()
    return z


@scenario(lambda: (randn(2, 3),))
def print_tensor_itself(x):
    y = torch.round(x * 100) / 100
    print(y)
    return (y + 1).tanh()


@scenario(lambda: (randn(4),), other=lambda: (randn(6),))
def print_fstring_with_tensor_values(x):
    total = x.abs().sum()
    print(f"total={total:.4f} shape={tuple(x.shape)} first={x[0].item():.3f}")
    return x / total


@scenario(lambda: (randn(3), randn(3)))
def print_several_values_with_sep_and_end(a, b):
    c = a * b
    print("dot", round(float(c.sum()), 4), "len", c.numel(), sep=" | ", end=" <<\n")
    print("done", end="")
    print()
    return c.cumsum(0) - a


@scenario(lambda: (randn(3),))
def print_to_stderr_and_stdout(x):
    y = x.exp()
    print("to stdout", y.shape)
    print("to stderr", y.dtype, file=sys.stderr)
    return torch.log(y) - x


@scenario(lambda: (randn(2, 2),))
def print_twice_with_work_between(x):
    a = x @ x.t()
    print("first print")
    b = a.trace() * x
    print("second print", b.shape)
    return b.sigmoid()


def _report(name, t):
    print(f"[{name}] mean={t.mean().item():+.4f}")
    return t.std()


@scenario(lambda: (randn(5),))
def print_inside_helper(x):
    s = _report("input", x)
    y = (x - x.mean()) / s
    s2 = _report("normalized", y)
    return y * s2


@scenario(lambda: (randn(4), True), other=lambda: (randn(4), False))
def print_in_one_branch(x, verbose):
    y = x.clamp(-1, 1)
    if verbose:
        print("clamped", y.abs().max() <= 1)
    return y * 3


@scenario(lambda: (randn(3, 2),))
def print_format_method_and_percent(x):
    n = x.norm()
    print("norm: {:.3f}".format(n.item()))
    print("rows: %d cols: %d" % tuple(x.shape))
    return x / n
