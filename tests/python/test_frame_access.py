"""The runtime's frame access (runtime/frame_access.cpp) on the running Python, through
the torch-free probe module: what the runtime does to a live frame at a graph break
works on each Python it supports, 3.13 included (scripts/test-python313.sh runs this file
there). Offsets come from the running Python's own `dis`, so the same tests read each
version's bytecode."""
import dis
import sys

import pytest

import _dynvm_probe as probe


def instructions(fn):
    return list(dis.get_instructions(fn))


def first_of_line(fn, line_in_body):
    """The first instruction of the function's `line_in_body`-th line (1: the `def`)."""
    line = fn.__code__.co_firstlineno + line_in_body - 1
    return next(i for i in instructions(fn) if i.positions.lineno == line)


def local_index(fn, name):
    return fn.__code__.co_varnames.index(name)


def sum_then_triple(a, b):
    total = a + b
    if a > 100:
        total = 0
    return total * 3


def test_a_frame_resumes_mid_way_with_rebuilt_locals():
    start = first_of_line(sum_then_triple, 5)  # return total * 3
    assert sum_then_triple(1, 2) == 9
    resumed = probe.run_resumed(sum_then_triple, (1, 2), start.offset,
                                {local_index(sum_then_triple, "total"): 7}, [])
    assert resumed == 21  # the prefix did not run: `total` is the rebuilt 7


def test_a_frame_resumes_mid_expression_with_a_rebuilt_stack():
    multiply = [i for i in instructions(sum_then_triple) if i.opname == "BINARY_OP"][-1]
    assert multiply.argrepr == "*"
    assert probe.run_resumed(sum_then_triple, (1, 2), multiply.offset, {}, [10, 2]) == 20


def guarded(x):
    try:
        y = len(x)
    except ValueError as e:
        return ("caught", str(e))
    z = len(x)
    return ("plain", y, z)


def call_on_line(fn, line_in_body):
    """The CALL of the function's `line_in_body`-th line. (An instruction of an `except`
    body would not do: its handler expects the exception state the body's entry pushed.)"""
    line = fn.__code__.co_firstlineno + line_in_body - 1
    return next(i for i in instructions(fn)
                if i.opname == "CALL" and i.positions.lineno == line)


def test_an_exception_raised_at_an_instruction_runs_its_handler():
    inside_try = call_on_line(guarded, 3)  # y = len(x)
    assert probe.run_raising(guarded, ([],), inside_try.offset, ValueError("boom")) == \
        ("caught", "boom")


def test_an_exception_raised_outside_a_handler_leaves_with_its_line():
    after_try = call_on_line(guarded, 6)  # z = len(x)
    with pytest.raises(KeyError) as info:
        probe.run_raising(guarded, ([],), after_try.offset, KeyError("out"))
    tb = info.value.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    assert tb.tb_frame.f_code is guarded.__code__
    assert tb.tb_lineno == guarded.__code__.co_firstlineno + 5  # z = len(x)


def add_one(x):
    marker = x + 1
    return marker


def test_a_callee_sees_the_linked_frame_at_its_instruction():
    at_return = first_of_line(add_one, 3)

    def look():
        caller = sys._getframe(1)
        return caller.f_code.co_name, caller.f_lineno, caller.f_back is not None

    seen, result = probe.call_linked(add_one, (1,), at_return.offset, look)
    assert seen == ("add_one", add_one.__code__.co_firstlineno + 2, True)
    assert result == 2


def calls_a_helper(x):
    return add_one(x) * 10


def test_other_frames_run_plainly_and_the_previous_hook_comes_back():
    start = first_of_line(calls_a_helper, 2)
    assert probe.run_resumed(calls_a_helper, (4,), start.offset, {}, []) == 50
    assert calls_a_helper(4) == 50


def test_bad_requests_raise_in_the_frame_and_unwind_it():
    with pytest.raises(ValueError, match="not an instruction offset"):
        probe.run_resumed(add_one, (1,), 3, {}, [])
    with pytest.raises(IndexError):
        probe.run_resumed(add_one, (1,), 0, {99: 1}, [])
    with pytest.raises(ValueError, match="stack"):
        probe.run_resumed(add_one, (1,), 0, {}, list(range(1000)))
    assert add_one(1) == 2  # the thread's frames are intact
