"""Break corpus: breaks inside with blocks — torch.no_grad, torch.enable_grad,
torch.set_grad_enabled, a user class with __enter__/__exit__, a
contextlib.contextmanager, nested with blocks, a manager that swallows an exception.
The grad mode must be the same during and after the block as in eager."""

import contextlib

import torch

from break_corpus._scenario import randn, scenario

EVENTS = []


@scenario(lambda: (randn(3, requires_grad=True),))
def print_inside_no_grad(x):
    y = x * 2
    with torch.no_grad():
        z = y + 1
        print("grad enabled inside:", torch.is_grad_enabled(), z.requires_grad)
        w = z * 3
    return y + w, w.requires_grad


@scenario(lambda: (randn(3, requires_grad=True),))
def item_inside_enable_grad_within_no_grad(x):
    with torch.no_grad():
        a = x * 2
        with torch.enable_grad():
            b = x * x
            s = b.sum().item()
            c = b * s
        d = a + 1
    return c, d, s


@scenario(lambda: (randn(2, requires_grad=True), False),
          other=lambda: (randn(2, requires_grad=True), True))
def print_inside_set_grad_enabled(x, enabled):
    with torch.set_grad_enabled(enabled):
        y = x.exp()
        print("in block", torch.is_grad_enabled())
        z = y * 2
    return z + x


class Recorder:
    def __init__(self, name):
        self.name = name

    def __enter__(self):
        EVENTS.append(f"enter {self.name}")
        return self

    def __exit__(self, exc_type, exc, tb):
        EVENTS.append(f"exit {self.name} {exc_type.__name__ if exc_type else None}")
        return False


@scenario(lambda: (randn(3),), globals=("EVENTS",))
def print_inside_user_context_manager(x):
    y = x.relu()
    with Recorder("outer") as r:
        print("inside", r.name)
        y = y * 2
    return y + 1


@contextlib.contextmanager
def traced_block(name):
    EVENTS.append(f"start {name}")
    try:
        yield name.upper()
    finally:
        EVENTS.append(f"end {name}")


@scenario(lambda: (randn(4),), globals=("EVENTS",))
def item_inside_contextmanager(x):
    y = x.abs()
    with traced_block("stats") as label:
        m = y.max().item()
        y = y / m
    return y, label


@scenario(lambda: (randn(3, requires_grad=True),), globals=("EVENTS",))
def nested_with_blocks_break_innermost(x):
    x2 = x * 1.5
    with Recorder("a"):
        with torch.no_grad():
            with traced_block("b"):
                y = x2 * 3
                print("innermost", y.requires_grad)
            z = y + 1
        w = x * z
    return w


class Swallow:
    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        EVENTS.append(f"swallowed {exc_type.__name__ if exc_type else None}")
        return exc_type is ValueError


@scenario(lambda: (randn(3),), globals=("EVENTS",))
def manager_swallows_exception_after_break(x):
    y = x * 2
    with Swallow():
        print("about to fail")
        y = y + 1
        raise ValueError("swallowed")
    return y.exp()


@scenario(lambda: (randn(3, requires_grad=True),), globals=("EVENTS",))
def exception_escapes_no_grad_block(x):
    y = x * 2
    with Recorder("guarded"):
        with torch.no_grad():
            z = y + 1
            if z.sum() > -1000:
                raise RuntimeError(f"stop with {z.shape[0]} values")
    return z


@scenario(lambda: (randn(2, requires_grad=True),))
def decorated_no_grad_helper_with_break(x):
    out = _no_grad_helper(x * 2)
    return x * out, out.requires_grad


@torch.no_grad()
def _no_grad_helper(t):
    print("helper grad mode", torch.is_grad_enabled())
    return t + 1
