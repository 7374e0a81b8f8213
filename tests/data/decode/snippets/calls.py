"""Calls of every shape: positional, keyword, star-args, methods, globals, builtins."""
import os.path as osp
from collections import OrderedDict


def helper(a, b=2, *args, c, d=4, **kwargs):
    return a + b + c + d + len(args) + len(kwargs)


def calls(obj, items):
    print("x", sep="", end="\n")
    helper(1, c=3)
    helper(*items, **{"c": 1})
    obj.method(1, 2)
    obj.attr.method(key=1)
    osp.join("a", "b")
    OrderedDict().move_to_end("k", last=False)
    f = lambda x, /, y=1: x + y
    return f(2), sorted(items, key=len, reverse=True)


class Base:
    def __init__(self, value):
        self.value = value


class Child(Base):
    def __init__(self, value):
        super().__init__(value)
        super(Child, self).__init__(value)

    @property
    def doubled(self):
        return self.value * 2
