"""Break corpus: breaks inside try/except/finally/else, and exceptions raised by code
that runs eagerly — int("x"), a ValueError from a helper, ZeroDivisionError, KeyError,
a tensor shape error — caught by the function's own handlers or escaping it (type,
message, traceback lines and whether finally ran are compared)."""

import torch

from break_corpus._scenario import randn, scenario

FINALLY_RAN = []


@scenario(lambda: (randn(3), "x"), other=lambda: (randn(3), "4"))
def int_of_bad_string_caught(x, text):
    y = x * 2
    try:
        k = int(text)
    except ValueError as error:
        print("caught:", error)
        k = -1
    return y * k


def _validate(t):
    if t.shape[0] != 4:
        raise ValueError(f"expected 4 rows, got {t.shape[0]}")
    return t


@scenario(lambda: (randn(3, 2),), other=lambda: (randn(4, 2),))
def value_error_from_helper_caught(x):
    y = x.exp()
    try:
        z = _validate(y) * 2
    except ValueError as error:
        print(f"fallback: {error}")
        z = y.sum(0, keepdim=True)
    return z + 1


@scenario(lambda: (randn(3), 0), other=lambda: (randn(3), 2))
def zero_division_caught_with_finally(x, d):
    y = x + 1
    try:
        r = 10 / d
    except ZeroDivisionError:
        r = 0.0
    finally:
        print("finally with", y.numel())
    return y * r


@scenario(lambda: (randn(2), {"a": 1.0}))
def key_error_caught_then_tensor_work(x, table):
    y = x.relu()
    try:
        s = table["b"]
    except KeyError as error:
        print("missing key", error)
        s = table["a"] * 3
    return y * s


@scenario(lambda: (randn(2, 3), randn(4, 5)))
def tensor_shape_error_caught(a, b):
    c = a * 2
    try:
        d = c @ b
    except RuntimeError:
        print("shapes do not match:", tuple(c.shape), tuple(b.shape))
        d = c.sum() * b
    return d.tanh()


@scenario(lambda: (randn(3),), globals=("FINALLY_RAN",))
def escaping_exception_runs_finally(x):
    y = x * 2
    try:
        print("in try")
        if y.sum() > -100:
            raise KeyError("escape")
    finally:
        FINALLY_RAN.append(y.shape[0])
        print("finally ran")
    return y


def _fails(t):
    u = t + 1
    print("helper about to divide")
    return u / 0 if u.numel() == 0 else 1 // 0


@scenario(lambda: (randn(3),))
def escaping_zero_division_from_helper(x):
    y = x.sin()
    z = _fails(y)
    return z


@scenario(lambda: (randn(3),))
def reraise_with_cause(x):
    y = x.cos()
    try:
        int("not a number")
    except ValueError as error:
        print("wrapping")
        raise RuntimeError(f"bad input of {y.numel()}") from error
    return y


@scenario(lambda: (randn(3), True), other=lambda: (randn(3), False))
def try_else_branch_with_break(x, fail):
    y = x * 3
    try:
        if fail:
            raise IndexError("failed")
        print("no exception")
    except IndexError as error:
        print("handled", error)
        y = y - 1
    else:
        print("else runs", y.shape)
        y = y + 1
    finally:
        y = y * 2
    return y


@scenario(lambda: (randn(2),))
def exception_in_handler_has_context(x):
    y = x * 4
    try:
        {}["k"]
    except KeyError:
        print("handling")
        y = y + 1
        [][1]
    return y


@scenario(lambda: (randn(3),))
def break_inside_except_block(x):
    y = x * 2
    try:
        raise ValueError("first")
    except ValueError:
        s = y.sum().item()
        y = y + s
    return y * 0.5


@scenario(lambda: (randn(3),))
def nested_try_inner_finally_outer_except(x):
    y = x.abs()
    try:
        try:
            print("inner try")
            float("oops")
        finally:
            print("inner finally", y.max().item() >= 0)
            y = y + 1
    except ValueError as error:
        print("outer caught", type(error).__name__)
        y = y * 2
    return y


@scenario(lambda: (randn(3),))
def return_in_try_then_finally_mutates(x):
    y = x + 1
    try:
        print("try returns")
        return y * 2
    finally:
        print("finally runs", y.shape)
        y.mul_(0)


@scenario(lambda: (randn(2, 2),))
def assertion_error_escapes(x):
    y = x @ x
    print("checking")
    assert y.shape == (3, 3), f"unexpected shape {tuple(y.shape)}"
    return y


def _level_two(t):
    try:
        print("level two about to fail")
        return t / (1 / torch.zeros(1).sum().item())
    finally:
        print("level two finally")


def _level_one(t):
    try:
        return _level_two(t * 2) + 1
    finally:
        print("level one finally", t.shape)


@scenario(lambda: (randn(3),))
def exception_escapes_through_helpers_with_finally(x):
    y = x.exp()
    try:
        return _level_one(y)
    finally:
        print("outer finally")


@scenario(lambda: (randn(3),))
def sys_exc_info_read_after_break_in_handler(x):
    import sys

    y = x + 2
    try:
        raise LookupError("lost")
    except LookupError:
        print("handling", y.numel())
        kind, value, _ = sys.exc_info()
        y = y * len(str(value))
    after = sys.exc_info()[0]
    return y, kind.__name__, after is None


@scenario(lambda: (randn(3), 2), other=lambda: (randn(3), 5))
def match_statement_on_item_value(x, k):
    y = x * k
    match int(y.abs().argmax()):
        case 0:
            y = y + 1
        case 1 | 2:
            print("matched 1 or 2")
            y = y - 1
    return y.tanh()


@scenario(lambda: (randn(2, 3), randn(2, 3)))
def escaping_tensor_shape_error_after_print(a, b):
    c = a + b
    print("about to multiply", tuple(c.shape), tuple(b.shape))
    return c @ b


# except* (exception groups): the groups are split where the trace runs (CHECK_EG_MATCH,
# PREP_RERAISE_STAR), so a group handled whole leaves one graph.
@scenario(lambda: (randn(3),), breaks=False)
def exception_group_handled_by_except_star(x):
    y = x * 2
    try:
        raise ExceptionGroup("two", [ValueError("v"), KeyError("k")])
    except* ValueError as group:
        y = y + len(group.exceptions)
        print("values:", [str(e) for e in group.exceptions])
    except* KeyError:
        y = y - 1
    return y


def _split_and_reraise(y, extra):
    try:
        raise ExceptionGroup("outer", [ValueError("v"), ExceptionGroup("inner", [KeyError("k"),
                                                                               TypeError("t")])])
    except* KeyError:
        y = y * 2
    except* TypeError as group:
        if extra:
            raise RuntimeError("raised in except*") from None
        raise
    return y


@scenario(lambda: (randn(3), False), other=lambda: (randn(3), True))
def exception_group_partly_handled_escapes(x, extra):
    # What no clause matched (the ValueError) and what a clause re-raised or raised leave
    # the statement as one group, with eager's structure and messages.
    y = x.cos()
    return _split_and_reraise(y, extra) + 1


@scenario(lambda: (randn(3),))
def bare_exception_caught_by_except_star(x):
    # A bare exception is wrapped in a group whose traceback is the frame's: a break.
    y = x.sin()
    try:
        raise ValueError("bare")
    except* ValueError as group:
        y = y + len(group.exceptions)
    return y
