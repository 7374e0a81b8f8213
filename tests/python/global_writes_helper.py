"""A module whose functions write their own globals, for tests/python/test_global_writes.py:
called from a compiled function of another module, they are inlined and their writes go to
this module's globals, not the caller's."""

count = 0
last = None


def bump(x):
    global count, last
    count += 1
    last = x * count
    return last + 1


def read_last():
    return last


def forget():
    global last
    del last
