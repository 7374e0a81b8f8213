"""Corpus: user-defined classes: instances made inside the function or passed in,
attributes (read, written, as side effects on arguments), methods, properties,
static and class methods, dataclasses, inheritance with super(), dunder methods
and context managers."""

import dataclasses

import torch

from corpus._case import case, randn


class Accumulator:
    def __init__(self, start):
        self.total = start
        self.count = 0

    def add(self, t):
        self.total = self.total + t
        self.count += 1
        return self

    @property
    def mean(self):
        return self.total / max(self.count, 1)


class Scaler:
    factor = 3.0

    def __init__(self, shift):
        self.shift = shift

    def __call__(self, t):
        return t * self.factor + self.shift

    @staticmethod
    def double(t):
        return t * 2

    @classmethod
    def with_zero_shift(cls):
        return cls(0.0)


class Base:
    def transform(self, t):
        return t + 1

    def name(self):
        return "base"


class Derived(Base):
    def transform(self, t):
        return super().transform(t) * 10

    def name(self):
        return f"derived({super().name()})"


class Pair:
    def __init__(self, a, b):
        self.a = a
        self.b = b

    def __getitem__(self, i):
        return (self.a, self.b)[i]

    def __len__(self):
        return 2

    def __add__(self, other):
        return Pair(self.a + other.a, self.b + other.b)


@dataclasses.dataclass
class Batch:
    values: torch.Tensor
    scale: float = 1.0
    tags: list = dataclasses.field(default_factory=list)


class Recorder:
    def __init__(self):
        self.events = []

    def __enter__(self):
        self.events.append("enter")
        return self

    def __exit__(self, *exc):
        self.events.append("exit")
        return False


@case((3,), (3,))
def object_made_inside(x, y):
    acc = Accumulator(torch.zeros(3))
    acc.add(x).add(y)
    return acc.total, acc.count, acc.mean


@case(inputs=lambda: (Accumulator(randn(3)), randn(3)))
def object_argument_mutated(acc, x):
    acc.add(x * 2)
    acc.note = "seen"
    return acc.total.sum()


@case((3,))
def callable_object_static_and_class_methods(x):
    s = Scaler(1.0)
    z = Scaler.with_zero_shift()
    return s(x), z(x), Scaler.double(x), s.double(x), s.factor


@case((3,))
def inheritance_and_super(x):
    d = Derived()
    return d.transform(x), d.name(), isinstance(d, Base), type(d).__name__


@case((2,), (2,))
def dunder_methods(x, y):
    p = Pair(x, y) + Pair(y, x)
    return p[0], p[1], len(p), list(p)


@case((2, 3))
def dataclass_made_and_returned(x):
    b = Batch(x * 2, scale=0.5)
    b.tags.append("doubled")
    return b, b.values * b.scale


@case(inputs=lambda: (Batch(randn(2, 2), 2.0, ["in"]),))
def dataclass_argument(batch):
    batch.tags.append("seen")
    return batch.values * batch.scale, dataclasses.replace(batch, scale=3.0).scale


@case((3,))
def user_context_manager(x):
    rec = Recorder()
    with rec as r:
        y = x * 2
        r.events.append("body")
    return y, rec.events


@case((3,))
def class_attribute_read(x):
    return x * Scaler.factor, Scaler.__name__, getattr(Scaler, "factor")


@case((2,))
def bound_method_passed_around(x):
    acc = Accumulator(x)
    add = acc.add
    add(x)
    add(x)
    return acc.total, acc.count


@case((2,))
def object_attribute_set_and_deleted(x):
    acc = Accumulator(x)
    acc.extra = x + 1
    has_before = hasattr(acc, "extra")
    del acc.extra
    return acc.total, has_before, hasattr(acc, "extra")


@case((2,))
def isinstance_on_user_classes(x):
    things = [Derived(), Base(), Scaler(0.0)]
    count = sum(1 for t in things if isinstance(t, Base))
    return x * count, [type(t).__name__ for t in things]
