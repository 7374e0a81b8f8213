"""The tracer fuzzer's Python side (fuzz/trace_fuzzer.cpp): seed functions whose code objects
the fuzzer mutates, the argument values and globals it traces them with, the helpers that
build a code object and a function from an input, and the seed corpus.

    python3 fuzz/trace_fuzz_seeds.py CORPUS_DIR      # writes the seed corpus

An input of the fuzzer (each field cut short where the input ends):

    byte 0     mode, mod 3: 0 marshal data of a code object; 1 raw co_code on a seed
               function; 2 generated instructions on a seed function
    byte 1     modes 1 and 2: the seed function (mod len(SEEDS)); mode 0: which code object
               of the data is traced (0 the top one, k the k-th nested one, mod their number)
    byte 2     flags: 1 the constants and names of CONST_POOL and NAME_POOL are appended to
               the seed's; 2 a new exception table (modes 1, 2); 4 mode 1: a new location
               table, mode 2: no `return None` at the end; 8 every tensor dimension symbolic
               (dynamic shapes); 16 a budget of 100 executed instructions (else 1,000)
    bytes 3-6  the arguments: indices into ARGUMENTS, one per parameter (the last repeats)
    the rest   mode 0: marshal data (dynvm's marshal reader must accept it before CPython's
               reads it); mode 1: co_code's length (2 bytes, little-endian) and co_code, the
               exception table's length (1 byte) and table, the location table; mode 2: an
               instruction count (0: as many as the input holds, at most 128), instructions
               of two bytes each, then exception handlers of four bytes each
               (fuzz/bytecode_generator.h)

Nothing here runs the fuzzed code: the fuzzer only traces it, and aborts if CPython is ever
asked to evaluate one of its code objects.
"""
import builtins
import marshal
import math
import opcode
import operator
import os
import struct
import sys
import types

import torch
import torch.nn.functional as F
from torch import nn

# The builtins of traced code and of every function below (the VM breaks on a call to a
# function whose builtins are not the traced function's): none that reads input or runs
# source. (The VM only calls builtins it knows; this keeps it so if that changes.)
# __import__ stays: C code imports through the builtins of the running Python frame, and the
# fuzzer refuses the imports the VM makes for traced code of modules not loaded yet.
_HIDDEN_BUILTINS = ("exec", "eval", "compile", "open", "input", "breakpoint", "help", "exit",
                    "quit", "copyright", "credits", "license")
BUILTINS = {k: v for k, v in vars(builtins).items() if k not in _HIDDEN_BUILTINS}
__builtins__ = BUILTINS

# --- globals the seeds (and mutated code) read -----------------------------------------
G_INT = 3
G_FLOAT = 0.5
G_LIST = [1, 2, 3]
G_DICT = {"a": 1, "b": 2}
G_TENSOR = torch.arange(6.0).reshape(2, 3)
G_NAME = "dynvm"


class Box:
    def __init__(self, v, w=1):
        self.v = v
        self.w = w

    def get(self):
        return self.v

    @property
    def double(self):
        return self.v * 2

    def __len__(self):
        return 2


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.scale = 2.0

    def forward(self, x):
        return torch.relu(self.fc(x)) * self.scale


def helper(a, b=2, *rest, key=None, **options):
    return a * b + len(rest) + len(options)


def make_adder(n):
    def add(x):
        return x + n
    return add


ADD_ONE = make_adder(1)
NET = Net()


# --- seed functions --------------------------------------------------------------------
def s_arith(a, b):
    c = a + b * 2 - a // 3 if isinstance(a, int) else a - b
    d = -c
    return c, d, abs(d), c ** 2, c % 5, c << 1 if isinstance(c, int) else c


def s_compare(a, b):
    if a < b <= 10:
        r = "lt"
    elif a == b or a is None:
        r = "eq"
    else:
        r = "gt" if not a > 100 else "big"
    return r, a != b, a in G_LIST, b not in G_DICT


def s_loop(a, n):
    total = 0
    for i in range(3):
        total += i * G_INT
        if i == n:
            break
    else:
        total -= 1
    k = 0
    while k < 4:
        k += 1
        if k == 2:
            continue
        total += k
    return total, a


def s_containers(a, b):
    items = [a, b, 3]
    items.append(len(items))
    table = {"a": a, "b": b, **G_DICT}
    table["c"] = items[-1]
    s = {1, 2, 3} | {4}
    t = (*items, *G_LIST)
    x, *rest = t
    del table["a"]
    return items[1:3], table.get("b"), sorted(s), x, rest, tuple(table.keys())


def s_comprehension(xs, k):
    squares = [x * x for x in range(4) if x != k]
    pairs = {i: str(i) for i in range(3)}
    flags = {x % 2 for x in squares}
    total = sum(x for x in squares)
    return squares, pairs, flags, total, [y for y in G_LIST if y > 1]


def s_tensor(x, y):
    z = torch.relu(x) + 1.5
    w = z * z - z.mean()
    v = w.view(-1) if w.dim() > 0 else w
    return v.sum(), F.softmax(v.float(), dim=0) if v.dim() == 1 else v, z.shape, x.dtype


def s_tensor_ops(x, y):
    a = torch.cat([x, x]) if x.dim() > 0 else x
    b = a.transpose(0, -1) if a.dim() > 1 else a
    c = b.clamp(min=0.0).exp().log1p()
    c.add_(1)
    d = torch.where(c > 1, c, torch.zeros_like(c))
    return d, d.amax(), G_TENSOR * 2, torch.stack([G_TENSOR, G_TENSOR]).sum(0)


def s_module(x, net):
    h = NET(x) if isinstance(x, torch.Tensor) and x.shape[-1:] == (3,) else x
    with torch.no_grad():
        g = NET.fc.weight * 2
    return h, g, NET.scale, NET.training


def s_calls(a, b):
    r1 = helper(a)
    r2 = helper(a, b, 1, 2, key=3, extra=4)
    args = (a, b)
    r3 = helper(*args, **{"key": 1})
    r4 = ADD_ONE(a)
    r5 = max(a, b, key=None) if type(a) == type(b) else min(1, 2)
    return r1, r2, r3, r4, r5, operator.add(1, 2), math.floor(2.5)


def s_objects(box, v):
    b = Box(v)
    b.w = box
    n = b.get() + b.double
    setattr(b, "extra", n)
    return b, n, getattr(b, "extra", None), hasattr(b, "missing"), len(b)


def s_closure(a, b):
    counter = 0

    def bump(k):
        nonlocal counter
        counter += k
        return counter + a

    bump(1)
    bump(b if isinstance(b, int) else 2)
    f = lambda y: y * counter  # noqa: E731
    return counter, f(3)


def s_exceptions(a, b):
    try:
        r = a / b
    except ZeroDivisionError:
        r = 0
    except (TypeError, ValueError) as e:
        r = str(e)
    else:
        r = r + 1
    finally:
        a = None
    try:
        raise KeyError("k")
    except KeyError as e:
        m = e.args
    return r, m


def s_with(x, flag):
    with torch.no_grad():
        y = x * 2
    with torch.enable_grad():
        z = y + 1
    torch.set_grad_enabled(True)
    return y, z, torch.is_grad_enabled()


def s_strings(a, b):
    s = f"{a}-{b!r}:{G_INT:>4}"
    t = "x" + str(a) + "y"
    parts = t.split("x")
    return s, t.upper(), parts, "%s=%d" % ("k", 3), ",".join(["a", "b"]), s.startswith("1")


def s_globals(a, b):
    global G_INT
    G_INT = G_INT + 1
    G_LIST.append(a)
    G_DICT["k"] = b
    return G_INT, G_NAME, len(G_LIST)


def s_unpack(a, b):
    (p, q), r = (a, b), 3
    first, *middle, last = [1, 2, 3, 4]
    d = dict(zip(["x", "y"], [p, q]))
    return p, q, r, first, middle, last, d, [*d.items()]


def s_match(a, b):
    match a:
        case 0:
            return "zero"
        case [x, y, *_]:
            return x + y
        case {"a": v}:
            return v
        case Box(v=v):
            return v
        case int() | float() if a > b:
            return "bigger"
        case _:
            return None


def s_walrus(a, b):
    if (n := len(G_LIST)) > 2 and b:
        a = n
    vals = [y for x in range(3) if (y := x * 2) > 1]
    return a and b, a or b, not a, a if b else n, vals


def s_slicing(seq, i):
    s = [0, 1, 2, 3, 4, 5]
    s[1:3] = [9, 9]
    del s[0]
    t = s[::-1][i:] if isinstance(i, int) else s
    return t, s[-2:], seq[0] if seq else None, G_TENSOR[:, 1:], G_TENSOR[0, ::2]


def s_varargs(*args, **kwargs):
    return len(args), sorted(kwargs), args[0] if args else None


def s_kwonly(a, /, b, *, c=1):
    return a, b, c


def s_generator(a, b):
    def gen(n):
        for i in range(n):
            yield i * a
    g = (x * 2 for x in range(3))
    return list(gen(2)), next(g), list(g)


def s_imports(a, b):
    import math as m
    from operator import mul
    return m.sqrt(4.0), mul(a, 2) if isinstance(a, (int, float)) else a


def s_assert(a, b):
    assert a is not None, "a is None"
    if b is None:
        raise ValueError(f"bad {a}")
    return a


def s_nested_calls(x, y):
    def inner(t, depth):
        if depth == 0:
            return t
        return inner(t + 1, depth - 1)
    return inner(x, 3), inner(y, 1) if isinstance(y, (int, float, torch.Tensor)) else y


def s_dict_ops(a, b):
    d = {"x": a, "y": b}
    keys = list(d)
    vals = [v for k, v in d.items() if k != "y"]
    d.update(z=3)
    d.pop("x")
    d.setdefault("w", [])
    return keys, vals, d, "z" in d, len(d), d | {"q": 1}


def s_tensor_index(x, idx):
    t = G_TENSOR.clone()
    t[0] = 1.0
    t[:, 1] += 2
    m = t > 2
    return t[m] if isinstance(idx, bool) else t[0], t.argmax(), t.tolist() if idx is None else t.size(0)


def s_return(a, b):
    return a


SEEDS = [
    s_arith, s_compare, s_loop, s_containers, s_comprehension, s_tensor, s_tensor_ops, s_module,
    s_calls, s_objects, s_closure, s_exceptions, s_with, s_strings, s_globals, s_unpack, s_match,
    s_walrus, s_slicing, s_varargs, s_kwonly, s_generator, s_imports, s_assert, s_nested_calls,
    s_dict_ops, s_tensor_index, s_return,
]

# --- what mutated code may name ----------------------------------------------------------
CONST_POOL = (None, True, False, 0, 1, -1, 2, 7, 2**40, 0.5, -2.5, "x", "ab", "", b"b", (), (1, 2),
              ("a", "b"), frozenset({1, 2}), 1j, ..., (lambda v: v + 1).__code__,
              (lambda v: [w for w in v]).__code__, ("key",))
NAME_POOL = ("append", "shape", "sum", "relu", "view", "get", "items", "keys", "v", "w", "fc",
             "torch", "nn", "F", "math", "operator", "len", "range", "list", "tuple", "dict",
             "isinstance", "int", "str", "super", "print", "iter", "next", "helper", "Box",
             "NET", "G_INT", "G_LIST", "G_DICT", "G_TENSOR", "ADD_ONE", "missing_name",
             "__class__", "__dict__", "mean", "add_", "dim", "x", "y", "os", "open", "exec",
             "eval", "__import__")

# --- argument values ---------------------------------------------------------------------
_T23 = torch.randn(2, 3)
_INT_TENSOR = torch.arange(6)
_SCALAR = torch.tensor(3.0)
_EMPTY = torch.zeros(0, 3)
_GRAD = torch.ones(2, 3, requires_grad=True)

# Factories, so that mutable values are new on every input.
ARGUMENTS = (
    lambda: 0, lambda: 1, lambda: -7, lambda: 2**70, lambda: 2.5, lambda: float("nan"),
    lambda: True, lambda: None, lambda: "ab", lambda: b"xy", lambda: (1, 2.0, "c"),
    lambda: [1, 2, 3], lambda: {"a": 1, "b": [2]}, lambda: {1, 2}, lambda: range(3),
    lambda: _T23, lambda: _INT_TENSOR, lambda: _SCALAR, lambda: _EMPTY, lambda: _GRAD,
    lambda: Box(3), lambda: helper, lambda: NET, lambda: slice(1, None), lambda: 1 + 2j,
    lambda: torch.float32, lambda: torch.Size([2, 3]), lambda: math, lambda: [_T23, 1],
    lambda: (_T23, _INT_TENSOR), lambda: ADD_ONE, lambda: Box,
)


# The module's names traced code sees (not os, sys, struct, builtins or the helpers below).
_GLOBAL_NAMES = ("torch", "F", "nn", "math", "operator", "G_INT", "G_FLOAT", "G_TENSOR", "G_NAME",
                 "Box", "Net", "helper", "make_adder", "ADD_ONE", "NET")


def make_globals():
    """A new globals dict for a traced function: some of this module's names, the seeds
    (which traced code may call) and BUILTINS."""
    g = {k: globals()[k] for k in _GLOBAL_NAMES}
    g.update((fn.__name__, fn) for fn in SEEDS)
    g["__builtins__"] = BUILTINS
    g["__name__"] = "trace_fuzz_input"
    g["G_LIST"] = list(G_LIST)
    g["G_DICT"] = dict(G_DICT)
    return g


def seed_code(index, extend):
    """The code object of seed `index`, with the pools appended to its constants and names."""
    code = SEEDS[index % len(SEEDS)].__code__
    if extend:
        code = code.replace(co_consts=code.co_consts + CONST_POOL,
                            co_names=code.co_names + NAME_POOL)
    return code


def prologue(code):
    """co_code up to and including the first RESUME: what the generator keeps in front."""
    resume = _opcode_number("RESUME")
    raw = code.co_code
    for i in range(0, len(raw), 2):
        if raw[i] == resume:
            return raw[:i + 2]
    return b""


def _opcode_number(name):
    return opcode.opmap[name]


def shape(index, extend):
    """(consts, names, localsplus slots, prologue, firstlineno) of a seed, for the generator."""
    code = seed_code(index, extend)
    # A parameter that is also a cell has one slot.
    slots = len(dict.fromkeys(code.co_varnames + code.co_cellvars + code.co_freevars))
    return (len(code.co_consts), len(code.co_names), slots, prologue(code), code.co_firstlineno)


def replace(index, extend, co_code, exceptiontable, linetable):
    """A seed's code object with new bytecode (and tables, where not None)."""
    changes = {"co_code": co_code}
    if exceptiontable is not None:
        changes["co_exceptiontable"] = exceptiontable
    if linetable is not None:
        changes["co_linetable"] = linetable
    return seed_code(index, extend).replace(**changes)


def code_objects(code):
    """`code` and every code object among its constants, depth first."""
    out = [code]
    stack = list(reversed(code.co_consts))
    seen = set()
    while stack:
        c = stack.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        if isinstance(c, types.CodeType):
            out.append(c)
            stack.extend(reversed(c.co_consts))
        elif isinstance(c, (tuple, frozenset)):
            stack.extend(c)
    return out


def make_function(code, selectors):
    """A function of `code` and its arguments as CPython binds them (the first parameters'
    localsplus slots: positional, keyword-only, *args, **kwargs), from argument selectors."""
    cells = tuple(types.CellType(ARGUMENTS[i % len(ARGUMENTS)]()) for i in range(len(code.co_freevars)))
    fn = types.FunctionType(code, make_globals(), None, None, cells)

    def pick(i):
        s = selectors[min(i, len(selectors) - 1)] if selectors else 0
        return ARGUMENTS[s % len(ARGUMENTS)]()

    n = code.co_argcount + code.co_kwonlyargcount
    args = [pick(i) for i in range(n)]
    if code.co_flags & 0x04:  # CO_VARARGS
        args.append((pick(n), pick(n + 1)))
    if code.co_flags & 0x08:  # CO_VARKEYWORDS
        args.append({"k": pick(n + 2)})
    return fn, args


# --- the seed corpus ---------------------------------------------------------------------
def _input(mode, seed, flags, selectors, body):
    sel = bytes((list(selectors) + [0, 0, 0, 0])[:4])
    return bytes((mode, seed, flags)) + sel + body


def corpus():
    """(name, bytes) of every seed input: each seed's code as marshal data (mode 0), its
    co_code and tables as they are (mode 1), and short generated bodies (mode 2)."""
    out = []
    for i, fn in enumerate(SEEDS):
        code = fn.__code__
        sel = (15 + i % 3, 1 + i % 5, 11, 20)  # a tensor, a number, a list, a Box
        out.append(("marshal_%s" % fn.__name__, _input(0, 0, 0, sel, marshal_dumps(code))))
        co_code = code.co_code
        table = code.co_exceptiontable
        body = (struct.pack("<H", len(co_code)) + co_code + bytes((min(len(table), 255),)) +
                table[:255] + code.co_linetable)
        out.append(("raw_%s" % fn.__name__, _input(1, i, 2 | 4, sel, body)))
        out.append(("raw_pool_%s" % fn.__name__, _input(1, i, 1 | 2, sel, body)))
    # Generated bodies: a few instructions, then a handler.
    for i in range(0, len(SEEDS), 3):
        body = bytes((0,) + tuple((k * 37 + i) % 256 for k in range(24)))
        out.append(("gen_%d" % i, _input(2, i, 1 | (2 if i % 2 else 0), (i, 15, 1, 2), body)))
    return out


def marshal_dumps(code):
    return marshal.dumps(code)


def main(argv):
    if len(argv) != 2:
        print("usage: trace_fuzz_seeds.py CORPUS_DIR", file=sys.stderr)
        return 2
    os.makedirs(argv[1], exist_ok=True)
    entries = corpus()
    for name, data in entries:
        with builtins.open(os.path.join(argv[1], name), "wb") as f:
            f.write(data)
    print("trace fuzzer seed corpus: %d files in %s" % (len(entries), argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
