"""Theme: statements whose opcodes nothing else in the suites reaches (docs/coverage.md,
"Never met"): the match statement's mapping, class and sequence patterns, a class
defined in a function, `del` of a closure variable and of a global, a `with` block left
by an exception, `except*`, and a `while x is not None` loop. Most are a graph break
with a reason today (the match statement is traced since 2026-12-04: breaks=False); each
must still behave exactly as eager."""

import torch

from break_corpus._scenario import randn, scenario


class Point:
    __match_args__ = ("x", "y")

    def __init__(self, x, y):
        self.x, self.y = x, y


@scenario(lambda: (randn(2, 3), {"scale": 2.0}), other=lambda: (randn(2, 3), {"shift": 1}),
          breaks=False)
def match_mapping_pattern(x, config):
    y = x.relu()
    match config:
        case {"scale": s}:
            y = y * s
        case {"shift": s}:
            y = y + s
    return y.sum(dim=0)


@scenario(lambda: (randn(2, 3), [1, 2]), other=lambda: (randn(2, 3), [4]),
          breaks=False)
def match_sequence_pattern(x, dims):
    y = x * 2
    match dims:
        case [a, b]:
            y = y + (a - b)
        case [a]:
            y = y * a
    return y.exp()


@scenario(lambda: (randn(3), Point(2.0, 1.0)), other=lambda: (randn(3), "no point"),
          breaks=False)
def match_class_pattern(x, p):
    y = x.tanh()
    match p:
        case Point(x=px, y=py):
            y = y * px + py
        case _:
            y = -y
    return y


@scenario(lambda: (randn(4),))
def class_defined_in_the_function(x):
    y = x.sigmoid()

    class Scale:
        factor = 3

    return y * Scale.factor


@scenario(lambda: (randn(4),))
def del_of_a_closure_variable(x):
    kept = x * 2

    def read():
        return kept + 1

    y = read()
    del kept
    return y.cos()


@scenario(lambda: (randn(4),), breaks=False)
def del_of_a_global(x):
    # Made and deleted by each call: no global is left for the two sides to share.
    global RARE_COUNTER
    RARE_COUNTER = 3
    y = x * RARE_COUNTER
    del RARE_COUNTER
    return y + 1


def _raises_under_no_grad(x):
    with torch.no_grad():
        x.add_(1)
        raise ValueError("left the with block")


@scenario(lambda: (randn(4),), breaks=False)  # traced since 2026-12-04 (WITH_EXCEPT_START)
def with_block_left_by_an_exception(x):
    y = x.clone()
    try:
        _raises_under_no_grad(y)
    except ValueError as error:
        y = y * len(str(error))
    return y, torch.is_grad_enabled()


# except* is traced (CHECK_EG_MATCH, PREP_RERAISE_STAR): no break since 2026-12-05.
@scenario(lambda: (randn(4),), breaks=False)
def except_star_handler(x):
    y = x.abs()
    try:
        raise ExceptionGroup("two", [ValueError("v"), KeyError("k")])
    except* ValueError:
        y = y + 1
    except* KeyError:
        y = y * 2
    return y


@scenario(lambda: (randn(3), (1.0, (2.0, None))), other=lambda: (randn(3), None), breaks=False)
def while_is_not_none_loop(x, chain):
    node = chain
    total = x
    while node is not None:
        total = total + node[0]
        node = node[1]
    return total
