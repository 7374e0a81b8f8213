"""The match statement traced (MATCH_SEQUENCE, MATCH_MAPPING, MATCH_KEYS, MATCH_CLASS,
GET_LEN): each program is compared with eager over inputs that take different cases, and
traced with no graph break. Before, the first match instruction was refused."""
import dataclasses

import pytest
import torch

import dynvm

pytestmark = pytest.mark.skipif(not dynvm.vm_available(), reason="the VM is not built")


@dataclasses.dataclass
class Point:
    x: torch.Tensor
    y: torch.Tensor


class Scaled:
    __match_args__ = ("factor",)

    def __init__(self, factor):
        self.factor = factor


def sequences(value, t):
    match value:
        case []:
            return t
        case [a]:
            return t * a
        case [a, b, *rest]:
            return t * a + b + len(rest)
        case _:
            return -t


def mappings(config, t):
    match config:
        case {"scale": s, "shift": b, **rest}:
            return t * s + b + len(rest)
        case {"scale": s}:
            return t * s
        case _:
            return t


def classes(subject, t):
    match subject:
        case Point(x=px, y=py):
            return t + px * py
        case Scaled(f) if f > 1:
            return t * f
        case Scaled(factor=f):
            return t - f
        case int(n):
            return t + n
        case torch.Tensor():
            return t + subject
        case str() | bytes():
            return t * 0
        case _:
            return t


def strings_are_not_sequences(value, t):
    match value:
        case [first, *_]:
            return t + 1
        case str(text):
            return t + len(text)
    return t


PROGRAMS = {
    "sequences": (sequences, [[], [2.0], [2.0, 3.0], (1.0, 2.0, 3.0, 4.0), 5, "ab"]),
    "mappings": (mappings, [{"scale": 2.0, "shift": 1.0}, {"scale": 3.0, "shift": 1.0, "k": 0},
                            {"scale": 4.0}, {"shift": 1.0}, [1]]),
    "classes": (classes, [Point(torch.ones(3), torch.full((3,), 2.0)), Scaled(3.0),
                          Scaled(0.5), 7, torch.arange(3.0), "s", 2.5]),
    "strings_are_not_sequences": (strings_are_not_sequences, ["abc", ["x"], 3]),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_match_statement_is_traced_as_eager_runs_it(name):
    fn, subjects = PROGRAMS[name]
    t = torch.arange(3.0)
    compiled = dynvm.compile(fn)
    for subject in subjects:
        report = dynvm.explain(fn)(subject, t)
        assert report.graph_break_count == 0, (subject, report.break_reasons)
        torch.testing.assert_close(compiled(subject, t), fn(subject, t))


def test_a_class_pattern_eager_rejects_raises_as_in_eager():
    class NoMatchArgs:
        pass

    def fn(subject, t):
        match subject:
            case NoMatchArgs(a):  # positional without __match_args__: TypeError
                return t + a
        return t

    with pytest.raises(TypeError):
        fn(NoMatchArgs(), torch.ones(1))
    with pytest.raises(TypeError):
        dynvm.compile(fn)(NoMatchArgs(), torch.ones(1))
