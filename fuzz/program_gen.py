"""Random Python programs over tensors and Python values, for fuzz/program_fuzz.py.

A program is a module: helper definitions (PRELUDE: a namedtuple, a user class, a user
context manager, an nn.Module, a generator function, globals), `make_inputs(seed,
variant)` and the function under test, `f`. Everything is an AST (the `ast` module): f is
grown one piece at a time by the FEATURES below (each a function giving a few statements
and the tags it covers), and each piece is kept only when f still runs eagerly, on the
inputs of variant 0, without raising; that run's locals are the values the next piece
works on. Program `index` of seed `S` depends on nothing else (random.Random seeded with
both; input values come from a torch.Generator seeded in make_inputs).
"""

import ast
import collections
import contextlib
import dataclasses
import io
import random
import signal
import warnings
from typing import Callable, Dict, List, Optional, Tuple

import torch

from program_ast import const, expr, name, source_of, stmts, tuple_of

PRELUDE = '''
import collections
import logging
import warnings

import torch


Pair = collections.namedtuple("Pair", ["a", "b"])


class Box:
    """A user object whose attributes f reads, writes and adds."""

    def __init__(self, t, n):
        self.t = t
        self.n = n
        self.log = []

    def scaled(self, k):
        return self.t * k


class Recorder:
    """A user context manager: records entering and leaving, swallows exceptions if told."""

    def __init__(self, log, swallow=False):
        self.log = log
        self.swallow = swallow

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, kind, value, tb):
        self.log.append("exit" if kind is None else "exit " + kind.__name__)
        return self.swallow


class Net(torch.nn.Module):
    def __init__(self, width, g):
        super().__init__()
        self.lin = torch.nn.Linear(width, width)
        with torch.no_grad():
            self.lin.weight.copy_(torch.randn((width, width), generator=g) * 0.5)
            self.lin.bias.copy_(torch.randn((width,), generator=g))
        self.scale = 0.5
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return torch.relu(self.lin(x)) * self.scale


def countdown(k, t):
    for j in range(k):
        yield t * (k - j)


class PrintedLog(logging.Handler):
    """Prints each record of LOG with its level and the place logging names, so that
    the comparison of printed output covers log calls."""

    def emit(self, record):
        print(f"[{record.levelname} {record.funcName}:{record.lineno}] {record.getMessage()}")


def warn_caller(message):
    """Warns about the line that called it (stacklevel=2), as a deprecated helper does.
    The harness shows warnings whose message starts with "fuzz:" once per place and makes
    those starting with "fuzz-error:" errors (program_fuzz.check_source)."""
    warnings.warn("fuzz: " + message, UserWarning, stacklevel=2)


LOG = logging.getLogger("program_fuzz.program")
if not LOG.handlers:
    LOG.addHandler(PrintedLog())
    LOG.setLevel(logging.INFO)
    LOG.propagate = False


G_SCALE = 1.5
G_TABLE = {"a": 1, "b": 2}
G_LOG = []
G_COUNT = 0
G_T = None
'''
# G_TMP is absent until a program sets it (and may delete it again).
GLOBAL_NAMES = ("G_SCALE", "G_TABLE", "G_LOG", "G_COUNT", "G_T", "G_TMP")
# Shapes of the main tensor inputs; the others broadcast to them.
BASE_SHAPES = ((3, 4), (2, 3, 4), (4,), (2, 1, 4), (5, 4), (4, 4), (1, 4), (2, 2, 2, 4))
# make_inputs(seed, variant): variant 0 is the one pieces are checked on; the harness also
# calls f with variants 1 and 2, which change the Python values below.
VARIANTS = 3
PROBE_LIMIT_S = 2.0


@dataclasses.dataclass
class Piece:
    """Statements a feature adds to f, and the tags they cover."""
    body: List[ast.stmt]
    tags: List[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Program:
    seed: int
    index: int
    source: str
    tags: collections.Counter  # features and finer tags: what the summary counts
    nodes: collections.Counter  # AST node kinds of f

    def tag_list(self):
        return sorted(self.tags)


# ---------------------------------------------------------------------------------------
# Inputs: name -> (source of its value in make_inputs, with S the base shape, B the
# broadcasting shape, W the last dim; weight).
INPUTS = {
    "a": ("torch.randn(S, generator=g)", 100),
    "b": ("torch.randn(B, generator=g)", 50),
    "c": ("torch.randint(-4, 5, S, generator=g)", 35),
    "m": ("torch.rand(S, generator=g) > 0.5", 25),
    "w": ("torch.randn((), generator=g, dtype=torch.float64)", 15),
    "n": ("(3, 2, 4)[variant]", 55),
    "x": ("(0.5, 1.5, -2.0)[variant]", 35),
    "flag": ("(True, False, True)[variant]", 20),
    "label": ("('alpha', 'beta', 'gamma')[variant]", 20),
    "xs": ("[torch.randn(S, generator=g) for _ in range(3)]", 40),
    "ks": ("[3, 1, 4, 1][:(4, 3, 2)[variant]]", 30),
    "d": ("{'w': torch.randn(S, generator=g), 'k': (2, 3, 1)[variant], 's': 'key'}", 35),
    "box": ("Box(torch.randn(S, generator=g), (3, 2, 4)[variant])", 40),
    "net": ("Net(W, g)", 45),
}
VARARG_INPUTS = {  # f(*rest, **opts): what the call passes beyond the named parameters
    "rest": "[torch.randn(S, generator=g), (7, 1, 2)[variant]]",
    "opts": "{'alpha': (0.5, 2.0, 1.0)[variant], 'mode': 'sum'}",
}


# ---------------------------------------------------------------------------------------
# Values: what the locals of f are, judged from their values after an eager run.

def is_tensor(v):
    return isinstance(v, torch.Tensor)


def is_num_tensor(v):
    """A tensor arithmetic takes: not bool, not recording autograd (in place is safe)."""
    return is_tensor(v) and v.dtype != torch.bool and not v.requires_grad


def is_float_tensor(v):
    return is_num_tensor(v) and v.is_floating_point()


def is_int(v):
    return type(v) is int


def is_float(v):
    return type(v) is float


def is_str(v):
    return type(v) is str


def is_tensor_list(v):
    return type(v) is list and len(v) > 0 and all(is_num_tensor(t) for t in v) and \
        len({tuple(t.shape) for t in v}) == 1


def is_int_list(v):
    return type(v) is list and all(is_int(k) for k in v)


def is_str_dict(v):
    return type(v) is dict and len(v) > 0 and all(is_str(k) for k in v)


def _broadcasts_to(shape, target):
    """A tensor of `shape` combined with one of `target` gives `target`."""
    if len(shape) > len(target):
        return False
    return all(s in (1, t) for s, t in zip(reversed(shape), reversed(target)))


class Builder:
    """The program so far: its inputs, the body of f, and the values of f's locals at the
    end of the body (from the last eager run)."""

    def __init__(self, rng: random.Random, seed: int, index: int):
        self.rng = rng
        self.seed = seed
        self.index = index
        self.generator_seed = rng.randrange(1 << 30)
        self.shape = rng.choice(BASE_SHAPES)
        self.bshape = self._broadcast_shape(self.shape)
        self.inputs: List[str] = []
        self.varargs: List[str] = []
        self.body: List[ast.stmt] = []
        self.declared_globals: set = set()
        self.scope: Dict[str, object] = {}
        self.globals: Dict[str, object] = {}
        self.tags: collections.Counter = collections.Counter()
        self.fresh = 0
        self.frozen: set = set()  # names a loop body must not change (its counter, its list)

    def _broadcast_shape(self, shape):
        r = self.rng.random()
        if r < 0.4:
            return shape[-1:]
        if r < 0.6:
            return ()
        return tuple(1 if self.rng.random() < 0.5 else s for s in shape)

    # -- names and choices --------------------------------------------------------------
    def new_name(self, prefix="v"):
        self.fresh += 1
        return f"{prefix}{self.fresh - 1}"

    def names(self, pred):
        return [n for n, v in self.scope.items() if pred(v)]

    def pick(self, pred):
        found = self.names(pred)
        return self.rng.choice(found) if found else None

    def chance(self, p):
        return self.rng.random() < p

    @contextlib.contextmanager
    def extended(self, extra):
        """The scope with `extra` (loop variables, parameters) added for a while."""
        saved = dict(self.scope)
        self.scope.update(extra)
        try:
            yield
        finally:
            self.scope = saved

    # -- Python values ----------------------------------------------------------------------
    def int_expr(self, depth=1):
        r = self.rng.random()
        ints = self.names(is_int)
        if depth <= 0 or r < 0.3:
            if ints and self.chance(0.6):
                return name(self.rng.choice(ints))
            return const(self.rng.choice([0, 1, 2, 3, -1, 5]))
        if r < 0.45:
            t = self.pick(is_tensor)
            if t is not None:
                v = self.scope[t]
                if v.dim() > 0 and self.chance(0.6):
                    k = self.rng.randrange(-v.dim(), v.dim())
                    form = self.rng.choice(["T.shape[K]", "T.size(K)"])
                    return expr(form, T=name(t), K=const(k))
                return expr(self.rng.choice(["T.dim()", "T.numel()", "len(T.shape)"]), T=name(t))
        if r < 0.55:
            seq = self.pick(lambda v: type(v) in (list, tuple, dict, str, set))
            if seq is not None:
                return expr("len(L)", L=name(seq))
        if r < 0.62:
            t = self.pick(lambda v: is_tensor(v) and not v.is_floating_point()
                          and not v.requires_grad)
            if t is not None:
                self.tags["item"] += 1
                return expr(self.rng.choice(["int(T.sum())", "T.sum().item()",
                                             "int(T.max())"]), T=name(t))
        op = self.rng.choice(["+", "-", "*", "//", "%", "max", "min", "abs", "if"])
        left = self.int_expr(depth - 1)
        if op == "if":
            return expr("L if C else R", L=left, C=self.bool_expr(0), R=self.int_expr(depth - 1))
        if op in ("//", "%"):
            return expr(f"L {op} K", L=left, K=const(self.rng.choice([2, 3, 4])))
        if op in ("max", "min"):
            return expr(f"{op}(L, R)", L=left, R=self.int_expr(depth - 1))
        if op == "abs":
            return expr("abs(L)", L=left)
        return expr(f"L {op} R", L=left, R=self.int_expr(depth - 1))

    def small_int_expr(self):
        """An int from 0 to about 4: loop counts, repetitions."""
        small = self.names(lambda v: is_int(v) and 0 <= v <= 4)
        r = self.rng.random()
        if small and r < 0.5:
            return name(self.rng.choice(small))
        if r < 0.65:
            seq = self.pick(lambda v: type(v) in (list, tuple) and len(v) <= 4)
            if seq is not None:
                return expr("len(L)", L=name(seq))
        if r < 0.75:
            return expr("min(N, 3)", N=self.int_expr(1))
        return const(self.rng.choice([1, 2, 3]))

    def float_expr(self, depth=1):
        r = self.rng.random()
        floats = self.names(is_float)
        if depth <= 0 or r < 0.3:
            if floats and self.chance(0.6):
                return name(self.rng.choice(floats))
            return const(self.rng.choice([0.5, 1.5, -0.25, 2.0, 0.1]))
        if r < 0.45:
            t = self.pick(is_float_tensor)
            if t is not None:
                self.tags["item"] += 1
                form = self.rng.choice(["T.sum().item()", "float(T.mean())", "T.max().item()",
                                        "T.abs().sum().item()"])
                return expr(form, T=name(t))
        if r < 0.52:
            if "opts" in self.scope:
                return expr("opts.get('alpha', 1.0)")
            if "net" in self.scope:
                return expr("net.scale")
            return expr("G_SCALE")
        if r < 0.6:
            return expr("float(N)", N=self.int_expr(0))
        op = self.rng.choice(["+", "-", "*", "/"])
        right = const(self.rng.choice([2.0, 0.5, 4.0])) if op == "/" else self.float_expr(depth - 1)
        return expr(f"L {op} R", L=self.float_expr(depth - 1), R=right)

    def scalar_expr(self):
        return self.int_expr(1) if self.chance(0.35) else self.float_expr(1)

    def bool_expr(self, depth=1):
        r = self.rng.random()
        if r < 0.15:
            flags = self.names(lambda v: type(v) is bool)
            if flags:
                return name(self.rng.choice(flags))
        if r < 0.4 or depth <= 0:
            op = self.rng.choice(["<", "<=", ">", ">=", "==", "!="])
            return expr(f"L {op} R", L=self.int_expr(1), R=self.int_expr(0))
        if r < 0.5:
            return expr(self.rng.choice(["L < R", "L > R"]), L=self.float_expr(1),
                        R=const(self.rng.choice([0.3, -0.7, 1.3])))
        if r < 0.6:
            self.tags["boolop"] += 1
            op = self.rng.choice(["and", "or"])
            return expr(f"L {op} R", L=self.bool_expr(depth - 1), R=self.bool_expr(depth - 1))
        if r < 0.65:
            self.tags["boolop"] += 1
            return expr("not L", L=self.bool_expr(depth - 1))
        if r < 0.75:
            dct = self.pick(is_str_dict)
            if dct is not None:
                key = self.rng.choice(list(self.scope[dct]) + ["zz"])
                return expr("K in D", K=const(key), D=name(dct))
        if r < 0.85:
            v = self.pick(lambda v: not callable(v))
            if v is not None:
                kind = self.rng.choice(["list", "dict", "int", "tuple", "torch.Tensor", "Pair"])
                return expr(f"isinstance(V, {kind})", V=name(v))
        return expr("0 <= L < R", L=self.int_expr(0), R=self.int_expr(1))

    def str_expr(self):
        r = self.rng.random()
        strs = self.names(is_str)
        if strs and r < 0.4:
            return name(self.rng.choice(strs))
        if r < 0.6:
            return self.fstring()
        if r < 0.7:
            return expr("str(N)", N=self.int_expr(1))
        if r < 0.8 and strs:
            self.tags["str_methods"] += 1
            form = self.rng.choice(["S.upper()", "S + '_x'", "S.replace('a', 'o')", "S[:2]",
                                    "'-'.join([S, S])", "S.split('a')[0]"])
            return expr(form, S=name(self.rng.choice(strs)))
        v = self.pick(lambda v: not callable(v))
        if v is not None and r < 0.9:
            return expr("type(V).__name__", V=name(v))
        return const(self.rng.choice(["a", "bc", "key"]))

    def fstring(self):
        """An f-string of a few Python values (an int, a float with a format, a tensor's
        shape or dtype, a string with !r)."""
        self.tags["fstring"] += 1
        parts = []
        for _ in range(self.rng.randint(1, 3)):
            r = self.rng.random()
            if r < 0.3:
                parts.append(("{N}", {"N": self.int_expr(1)}))
            elif r < 0.55:
                parts.append(("{X:.3f}", {"X": self.float_expr(1)}))
            elif r < 0.75:
                t = self.pick(is_tensor)
                if t is not None:
                    attr = self.rng.choice(["shape", "dtype", "dim()"])
                    parts.append((f"{{T.{attr}}}", {"T": name(t)}))
            elif r < 0.85:
                s = self.pick(is_str)
                if s is not None:
                    parts.append(("{S!r}", {"S": name(s)}))
            else:
                parts.append(("{X:>6.2f}", {"X": self.float_expr(0)}))
        if not parts:
            parts.append(("{N}", {"N": self.int_expr(0)}))
        text, subs = "", {}
        for i, (part, values) in enumerate(parts):
            for key, value in values.items():
                subs[f"{key}{i}"] = value
                part = part.replace("{" + key, "{" + f"{key}{i}")
            text += self.rng.choice(["", " ", "-", "x="]) + part
        return expr("f" + repr(text), **subs)

    # -- tensors ----------------------------------------------------------------------------
    def tensor_expr(self, shape, depth=2):
        """An expression of a tensor of exactly `shape`."""
        same = self.names(lambda v: is_num_tensor(v) and tuple(v.shape) == shape)
        if depth <= 0 or self.chance(0.3):
            if same:
                return name(self.rng.choice(same))
            return expr("torch.ones(S)", S=const(shape))
        r = self.rng.random()
        left = self.tensor_expr(shape, depth - 1)
        if r < 0.35:
            op = self.rng.choice(["+", "-", "*", "*", "/"])
            return expr(f"L {op} R", L=left, R=self.operand(shape, depth - 1))
        if r < 0.55:
            fn = self.rng.choice(["torch.relu", "torch.sigmoid", "torch.tanh", "torch.abs",
                                  "torch.neg", "torch.sin", "torch.cos", "torch.exp",
                                  "torch.square", "torch.sqrt"])
            # exp overflows, sqrt takes no negatives, and sin and cos of a large argument
            # are ill-conditioned: one rounding more or less moves them entirely.
            guard = {"torch.exp": "L.clamp(-5, 5)", "torch.sqrt": "L.abs()",
                     "torch.sin": "L.clamp(-10, 10)", "torch.cos": "L.clamp(-10, 10)"}
            if fn in guard:
                left = expr(guard[fn], L=left)
            self.tags["torch_pointwise"] += 1
            return expr(f"{fn}(L)", L=left)
        if r < 0.7:
            op = self.rng.choice(["+", "*", "-"])
            if self.chance(0.5):
                return expr(f"L {op} R", L=left, R=self.scalar_expr())
            return expr(f"R {op} L", L=left, R=self.scalar_expr())
        if r < 0.8:
            cond = expr(self.rng.choice(["L > 0", "L < 0.3", "L >= -0.7"]), L=left)
            return expr("torch.where(C, L, R)", C=cond, L=left, R=self.operand(shape, depth - 1))
        if r < 0.88:
            mask = self.pick(lambda v: is_tensor(v) and v.dtype == torch.bool
                             and _broadcasts_to(tuple(v.shape), shape))
            if mask is not None:
                return expr("torch.where(M, L, R)", M=name(mask), L=left,
                            R=self.operand(shape, depth - 1))
        if r < 0.94:
            return expr(self.rng.choice(["L.clamp(min=-1.0, max=1.0)", "L ** 2",
                                         "torch.maximum(L, R)", "L.clamp(min=0)"]),
                        L=left, R=self.tensor_expr(shape, depth - 1))
        if r < 0.97:
            return expr("L if C else R", L=left, C=self.bool_expr(0),
                        R=self.tensor_expr(shape, depth - 1))
        return expr(self.rng.choice(["L.clone()", "L.contiguous()", "L.detach()"]), L=left)

    def operand(self, shape, depth):
        """The second operand of a pointwise op on `shape`: a tensor broadcasting to it,
        one of that shape, or a Python scalar."""
        r = self.rng.random()
        if r < 0.3:
            fits = self.names(lambda v: is_num_tensor(v) and _broadcasts_to(tuple(v.shape), shape)
                              and tuple(v.shape) != shape)
            if fits:
                self.tags["torch_broadcast"] += 1
                return name(self.rng.choice(fits))
        if r < 0.75:
            return self.tensor_expr(shape, depth)
        return self.scalar_expr()

    def any_tensor(self, pred=is_num_tensor):
        t = self.pick(pred)
        return t, (tuple(self.scope[t].shape) if t is not None else None)

    def pick_mutable(self, pred):
        """A name an update may rebind or mutate: not one a loop around it depends on."""
        found = [n for n in self.names(pred) if n not in self.frozen]
        return self.rng.choice(found) if found else None

    def mutable_tensor(self, pred):
        t = self.pick_mutable(pred)
        return t, (tuple(self.scope[t].shape) if t is not None else None)

    # -- statements that keep types: the bodies of loops and branches -----------------------
    def update_stmt(self):
        """One statement that rebinds or mutates an existing local, keeping its kind (so
        that a loop may run it again, and both branches of an if leave the same names)."""
        options = []  # (weight, tag, make)
        t, shape = self.mutable_tensor(is_float_tensor)
        if t is not None:
            options.append((40, None, lambda: self._update_tensor(t, shape)))
        n = self.pick_mutable(is_int)
        if n is not None:
            options.append((15, None, lambda: stmts(self.rng.choice(
                ["N += E", "N = (N * 2 + E) % 7", "N -= 1"]), N=n, E=self.int_expr(0))))
        x = self.pick_mutable(is_float)
        if x is not None:
            options.append((10, None, lambda: stmts("X = X * 0.5 + E", X=x, E=self.float_expr(0))))
        lst = self.pick_mutable(lambda v: is_tensor_list(v) or (is_int_list(v) and v))
        if lst is not None:
            options.append((10, "list_methods", lambda: self._append_to(lst)))
        dct = self.pick_mutable(lambda v: is_str_dict(v) and all(is_int(k) for k in v.values()))
        if dct is not None:
            key = self.rng.choice(list(self.scope[dct]) + ["new"])
            options.append((7, "dict_methods", lambda: stmts(
                "D[K] = D.get(K, 0) + E", D=dct, K=const(key), E=self.int_expr(0))))
        options.append((4, "print", lambda: stmts("print(E)", E=self.rng.choice(
            [self.int_expr(1), self.str_expr()]))))
        options.append((3, "global_write", lambda: stmts("G_LOG.append(E)", E=self.int_expr(1))))
        _, tag, make = self.rng.choices(options, [w for w, _, _ in options])[0]
        if tag:
            self.tags[tag] += 1
        return make()

    def _update_tensor(self, t, shape):
        value = self.tensor_expr(shape, 1)
        if self.chance(0.25):
            self.tags["torch_inplace"] += 1
            return stmts(f"T.{self.rng.choice(['add_', 'mul_', 'sub_'])}(E)", T=t, E=value)
        return stmts(f"T = T {self.rng.choice(['+', '*', '-'])} E", T=t, E=value)

    def _append_to(self, lst):
        v = self.scope[lst]
        value = self.tensor_expr(tuple(v[0].shape), 1) if is_tensor(v[0]) else self.int_expr(1)
        return stmts("L.append(E)", L=lst, E=value)

    def block(self, extra=None, size=None, frozen=()):
        """A few update statements, with the names in `extra` (loop variables) in scope,
        changing none of `frozen` (names of ast nodes among them stand for the names they
        read)."""
        saved = set(self.frozen)
        for item in frozen:
            self.frozen |= names_in(item) if isinstance(item, ast.AST) else {item}
        try:
            with self.extended(extra or {}):
                body = []
                for _ in range(size or self.rng.randint(1, 2)):
                    body += self.update_stmt()
                return body
        finally:
            self.frozen = saved


def names_in(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


# ---------------------------------------------------------------------------------------
# Features: each adds a piece to f. FEATURES lists them once: name -> (weight, function).

FEATURES: Dict[str, Tuple[int, Callable[[Builder], Optional[Piece]]]] = {}


def feature(title, weight=10):
    def register(fn):
        FEATURES[title] = (weight, fn)
        return fn
    return register


def assign(target, value, *tags):
    return Piece([ast.Assign(targets=[ast.Name(id=target, ctx=ast.Store())], value=value,
                             lineno=0)], list(tags))


@feature("arith", 10)
def gen_arith(b: Builder):
    if b.chance(0.5):
        return assign(b.new_name(), b.int_expr(2))
    return assign(b.new_name(), b.float_expr(2))


@feature("compare", 6)
def gen_compare(b: Builder):
    if b.chance(0.3):
        return assign(b.new_name(), expr("L < M <= R", L=b.int_expr(0), M=b.int_expr(1),
                                         R=b.int_expr(0)), "compare:chained")
    return assign(b.new_name(), b.bool_expr(1))


@feature("boolop", 4)
def gen_boolop(b: Builder):
    op = b.rng.choice(["L and R", "L or R", "not L", "L or R and not L"])
    value = expr(op, L=b.bool_expr(0), R=b.bool_expr(0))
    if b.chance(0.3):  # and/or return an operand, not a bool
        value = expr("L or R", L=b.int_expr(0), R=b.int_expr(0))
    return assign(b.new_name(), value)


@feature("if", 10)
def gen_if(b: Builder):
    body = b.block()
    orelse = b.block() if b.chance(0.6) else []
    return Piece([ast.If(test=b.bool_expr(1), body=body, orelse=orelse)])


@feature("if_data", 10)
def gen_if_data(b: Builder):
    t, _ = b.any_tensor()
    if t is None:
        return None
    test = expr(b.rng.choice(["T.sum() > 0", "(T > 0.3).any()", "T.mean() < 0.3",
                              "T.max().item() > 0.5", "bool((T < 0).all())",
                              "T.abs().sum() > T.numel() * 0.5"]),
                T=name(t))
    if not b.scope[t].is_floating_point():
        test = expr("T.sum() > 0", T=name(t))
    return Piece([ast.If(test=test, body=b.block(), orelse=b.block() if b.chance(0.7) else [])])


@feature("item", 6)
def gen_item(b: Builder):
    t, shape = b.any_tensor()
    if t is None:
        return None
    r = b.rng.random()
    if r < 0.5:
        return assign(b.new_name(), expr(b.rng.choice(["T.sum().item()", "T.max().item()",
                                                       "float(T.sum())", "int(T.argmax())"]),
                                         T=name(t)))
    if r < 0.75 and len(shape) >= 1:
        return assign(b.new_name(), expr("T[0].tolist()" if len(shape) > 1 else "T.tolist()",
                                         T=name(t)), "item:tolist")
    k = b.new_name()
    return Piece(stmts("K = T.sum().item()\nV = T * K", K=k, V=b.new_name(), T=t))


@feature("for_range", 10)
def gen_for_range(b: Builder):
    i = b.new_name("i")
    head = b.rng.choice(["range(N)", "range(1, N + 1)", "range(N - 1, -1, -1)"])
    return Piece(stmts(f"for I in {head}:\n    BODY", I=i, N=b.small_int_expr(),
                       BODY=b.block({i: 1})))


@feature("for_iter", 10)
def gen_for_iter(b: Builder):
    r = b.rng.random()
    lst = b.pick(is_tensor_list)
    if r < 0.3 and lst is not None:
        t = b.new_name("t")
        body = b.block({t: b.scope[lst][0]}, frozen=(lst,))
        return Piece(stmts("for T in L:\n    BODY", T=t, L=lst, BODY=body), ["for:list"])
    if r < 0.5 and lst is not None:
        i, t = b.new_name("i"), b.new_name("t")
        body = b.block({i: 0, t: b.scope[lst][0]}, frozen=(lst,))
        return Piece(stmts("for I, T in enumerate(L):\n    BODY", I=i, T=t, L=lst, BODY=body),
                     ["for:enumerate"])
    dct = b.pick(is_str_dict)
    if r < 0.7 and dct is not None:
        k, v = b.new_name("k"), b.new_name("val")
        first = next(iter(b.scope[dct].items()))
        body = b.block({k: first[0], v: first[1]}, frozen=(dct,))
        return Piece(stmts("for K, V in D.items():\n    BODY", K=k, V=v, D=dct, BODY=body),
                     ["for:items"])
    t, shape = b.any_tensor(lambda v: is_num_tensor(v) and v.dim() >= 1 and 1 <= v.shape[0] <= 5)
    if t is not None and r < 0.85:
        row = b.new_name("row")
        body = b.block({row: b.scope[t][0]})
        return Piece(stmts("for R in T:\n    BODY", R=row, T=t, BODY=body), ["for:tensor"])
    i, j = b.new_name("i"), b.new_name("j")
    body = b.block({i: 0, j: 1})
    return Piece(stmts("for I, J in zip(range(3), range(1, N + 1)):\n    BODY", I=i, J=j,
                       N=b.small_int_expr(), BODY=body), ["for:zip"])


@feature("while", 6)
def gen_while(b: Builder):
    k, bound = b.new_name("k"), b.small_int_expr()
    return Piece(stmts("K = 0\nwhile K < N:\n    K += 1\n    BODY", K=k, N=bound,
                       BODY=b.block({k: 1}, frozen=(k, bound))))


@feature("break_continue", 5)
def gen_break_continue(b: Builder):
    i = b.new_name("i")
    jump = b.rng.choice(["break", "continue"])
    test = expr("I == K", I=name(i), K=const(b.rng.choice([0, 1, 2])))
    with b.extended({i: 1}):
        if b.chance(0.3):
            test = b.bool_expr(0)
        guard = ast.If(test=test, body=stmts(jump), orelse=[])
        body = [guard] + b.block() if b.chance(0.5) else b.block() + [guard]
    orelse = b.block() if b.chance(0.3) else []
    loop = stmts("for I in range(4):\n    BODY", I=i, BODY=body)[0]
    loop.orelse = orelse
    return Piece([loop], [jump] + (["for:else"] if orelse else []))


@feature("listcomp", 6)
def gen_listcomp(b: Builder):
    lst = b.pick(is_tensor_list)
    v = b.new_name()
    if lst is not None and b.chance(0.6):
        t = b.new_name("t")
        with b.extended({t: b.scope[lst][0]}):
            elt = b.tensor_expr(tuple(b.scope[lst][0].shape), 1)
        return Piece(stmts("V = [E for T in L]", V=v, E=elt, T=t, L=lst))
    i = b.new_name("i")
    with b.extended({i: 1}):
        elt = b.int_expr(1)
        cond = b.bool_expr(0)
    return Piece(stmts("V = [E for I in range(N) if C]", V=v, E=elt, I=i, N=b.small_int_expr(),
                       C=cond), ["comprehension:if"])


@feature("dictcomp", 4)
def gen_dictcomp(b: Builder):
    v, k = b.new_name(), b.new_name("k")
    dct = b.pick(is_str_dict)
    if dct is not None and b.chance(0.5):
        val = b.new_name("val")
        return Piece(stmts("V = {K: VAL for K, VAL in D.items() if K != 's'}", V=v, K=k,
                           VAL=val, D=dct))
    with b.extended({k: 1}):
        value = b.int_expr(1) if b.chance(0.5) else b.fstring()
    return Piece(stmts("V = {f'k{K}': E for K in range(N)}", V=v, K=k, E=value,
                       N=b.small_int_expr()))


@feature("setcomp", 3)
def gen_setcomp(b: Builder):
    k = b.new_name("k")
    return Piece(stmts("V = {K % 3 for K in range(N + 2)}", V=b.new_name(), K=k,
                       N=b.small_int_expr()))


@feature("genexp", 4)
def gen_genexp(b: Builder):
    lst = b.pick(is_tensor_list)
    t = b.new_name("t")
    if lst is not None and b.chance(0.5):
        return Piece(stmts(b.rng.choice(["V = sum(T.sum() for T in L)",
                                         "V = max(T.max().item() for T in L)",
                                         "V = any(bool((T > 1).any()) for T in L)"]),
                           V=b.new_name(), T=t, L=lst))
    return Piece(stmts("V = sum(T * T for T in range(N))", V=b.new_name(), T=t,
                       N=b.small_int_expr()))


@feature("closure", 8)
def gen_closure(b: Builder):
    arg, shape = b.any_tensor()
    if arg is None:
        return None
    fn, p = b.new_name("inner"), b.new_name("p")
    with b.extended({p: b.scope[arg]}):
        value = b.tensor_expr(shape, 2)
    return Piece(stmts("def FN(P):\n    return E\nV = FN(A)", FN=fn, P=p, E=value,
                       V=b.new_name(), A=arg))


@feature("nonlocal", 5)
def gen_nonlocal(b: Builder):
    fn, total, step = b.new_name("bump"), b.new_name("total"), b.new_name("step")
    r = b.rng.random()
    if r < 0.5:
        t, shape = b.any_tensor(is_float_tensor)
        if t is not None:
            return Piece(stmts("""
                TOTAL = T * 0
                def FN(STEP):
                    nonlocal TOTAL
                    TOTAL = TOTAL + STEP
                    return TOTAL
                FN(T)
                FN(E)
                """, TOTAL=total, FN=fn, STEP=step, T=t, E=b.tensor_expr(shape, 1)))
    return Piece(stmts("""
        TOTAL = 0
        def FN(STEP):
            nonlocal TOTAL
            TOTAL += STEP
            return TOTAL
        V = FN(E) + FN(2)
        """, TOTAL=total, FN=fn, STEP=step, E=b.int_expr(1), V=b.new_name()))


@feature("lambda", 5)
def gen_lambda(b: Builder):
    r = b.rng.random()
    if r < 0.4:
        t, shape = b.any_tensor()
        if t is not None:
            fn, p = b.new_name("fn"), b.new_name("p")
            with b.extended({p: b.scope[t]}):
                body = b.tensor_expr(shape, 1)
            return Piece(stmts("FN = lambda P: E\nV = FN(T)", FN=fn, P=p, E=body,
                               V=b.new_name(), T=t))
    lst = b.pick(lambda v: is_int_list(v) and v)
    k = b.new_name("k")
    if lst is not None and r < 0.7:
        return Piece(stmts(b.rng.choice(["V = list(map(lambda K: K * 2 + 1, L))",
                                         "V = list(filter(lambda K: K > 1, L))",
                                         "V = sorted(L, key=lambda K: -K)"]),
                           V=b.new_name(), K=k, L=lst), ["builtins"])
    return Piece(stmts("V = (lambda K, J=2: K * J)(E)", V=b.new_name(), K=k, J=b.new_name("j"),
                       E=b.scalar_expr()))


@feature("varargs_call", 6)
def gen_varargs_call(b: Builder):
    fn = b.new_name("helper")
    r = b.rng.random()
    t, shape = b.any_tensor()
    if r < 0.5 and t is not None:
        return Piece(stmts("""
            def FN(first, *more, scale=1.0, **extra):
                out = first * scale
                for item in more:
                    out = out + item
                return out, len(more), sorted(extra)
            V = FN(T, *ARGS, scale=S, **{'tag': 1, 'z': E})
            """, FN=fn, T=t,
            ARGS=tuple_of([b.tensor_expr(shape, 0) for _ in range(b.rng.randint(0, 2))]),
            S=b.scalar_expr(), E=b.int_expr(0), V=b.new_name()))
    return Piece(stmts("""
        def FN(*args, **kwargs):
            return sum(args) + kwargs.get('z', 0), tuple(kwargs)
        V = FN(*L, z=E)
        """, FN=fn, L=tuple_of([b.int_expr(0) for _ in range(b.rng.randint(0, 3))]),
        E=b.int_expr(1), V=b.new_name()))


@feature("f_varargs", 6)
def gen_f_varargs(b: Builder):
    if "rest" not in b.scope:
        return None
    r = b.rng.random()
    if r < 0.3:
        return assign(b.new_name(), expr("len(rest) + len(opts)"))
    if r < 0.6:
        return assign(b.new_name(), expr("rest[0] * opts.get('alpha', 1.0) + rest[1]"))
    if r < 0.8:
        return assign(b.new_name(), expr("[k for k in opts if k != 'mode']"))
    return assign(b.new_name(), expr("opts['mode'] == 'sum' and rest[-1] > 1"))


@feature("unpack", 6)
def gen_unpack(b: Builder):
    r = b.rng.random()
    lst = b.pick(lambda v: type(v) in (list, tuple) and len(v) >= 2)
    if r < 0.4 and lst is not None:
        return Piece(stmts("FIRST, *REST = L", FIRST=b.new_name(), REST=b.new_name(), L=lst),
                     ["unpack:starred"])
    if r < 0.6 and lst is not None:
        return Piece(stmts("*INIT, LAST = L", INIT=b.new_name(), LAST=b.new_name(), L=lst),
                     ["unpack:starred"])
    p, q = b.new_name(), b.new_name()
    if r < 0.8:
        return Piece(stmts("P, Q = E1, E2\nP, Q = Q, P", P=p, Q=q, E1=b.scalar_expr(),
                           E2=b.int_expr(1)))
    return Piece(stmts("(P, Q), R = (E1, E2), [E3, *L]", P=p, Q=q, R=b.new_name(),
                       E1=b.int_expr(0), E2=b.str_expr(), E3=b.int_expr(0),
                       L=tuple_of([b.int_expr(0)])), ["unpack:nested"])


@feature("slice", 6)
def gen_slice(b: Builder):
    seq = b.pick(lambda v: type(v) in (list, tuple, str) and len(v) >= 1)
    if seq is None:
        return None
    form = b.rng.choice(["L[1:]", "L[::-1]", "L[:-1]", "L[::2]", "L[-2:]", "L[0:N]",
                         "L[N:]"])
    return assign(b.new_name(), expr(form, L=name(seq), N=b.small_int_expr()))


@feature("list_methods", 8)
def gen_list_methods(b: Builder):
    v = b.new_name("lst")
    items = tuple_of([b.int_expr(0) for _ in range(b.rng.randint(1, 4))])
    calls = b.rng.sample(["V.append(E)", "V.extend([E, 2])", "V.insert(0, E)", "V.reverse()",
                          "V.sort()", "V.pop()", "V.remove(V[0])", "V += [E]",
                          "V2 = V.index(V[-1])", "V2 = V.count(E)", "V2 = V.copy()",
                          "V2 = V * 2", "V2 = sorted(V, reverse=True)", "del V[0]",
                          "V[0] = E"], b.rng.randint(1, 4))
    body = stmts("V = list(L)", V=v, L=items)
    for call in calls:
        body += stmts(call, V=v, V2=b.new_name(), E=b.int_expr(0))
        if call.startswith(("V.pop", "V.remove", "del")):
            body += stmts("V.append(7)", V=v)
    return Piece(body)


@feature("dict_methods", 8)
def gen_dict_methods(b: Builder):
    v = b.new_name("dct")
    t, shape = b.any_tensor()
    value = b.tensor_expr(shape, 1) if t is not None and b.chance(0.5) else b.int_expr(1)
    body = stmts("V = {'p': E, 'q': 2}", V=v, E=value)
    calls = b.rng.sample(["V['r'] = E", "V.update({'s': 3}, t=E)", "V2 = V.get('zz', 5)",
                          "V2 = V.setdefault('p', E)", "V2 = V.pop('q')",
                          "V2 = V.pop('missing', None)", "V2 = list(V.items())",
                          "V2 = V.copy()", "V2 = {**V, 'u': E}", "V2 = V | {'v': 1}",
                          "del V['p']", "V2 = 'p' in V", "V2 = dict(V, w=1)",
                          "V2 = V.popitem()"], b.rng.randint(1, 4))
    for call in calls:
        body += stmts(call, V=v, V2=b.new_name(), E=b.int_expr(0))
    return Piece(body)


@feature("dict_views", 8)
def gen_dict_views(b: Builder):
    dct = b.pick(is_str_dict)
    if dct is None or b.chance(0.3):
        dct = b.new_name("dct")
        prefix = stmts("D = {'x': E, 'y': 2}", D=dct, E=b.int_expr(0))
    else:
        prefix = []
    view = b.new_name("view")
    kind = b.rng.choice(["keys", "values", "items"])
    mutation = b.rng.choice(["D['late'] = E", "D.pop(next(iter(D)))", "D.update(extra=E)",
                             "D.clear()", "D.setdefault('late', E)"])
    use = b.rng.choice(["V2 = list(VIEW)", "V2 = len(VIEW)", "V2 = 'late' in VIEW",
                        "V2 = [repr(type(e).__name__) for e in VIEW]", "V2 = VIEW"])
    if kind == "keys" and b.chance(0.4):
        use = b.rng.choice(["V2 = VIEW & {'late', 'x'}", "V2 = sorted(VIEW | {'zz'})"])
    return Piece(prefix + stmts(f"VIEW = D.{kind}()\n{mutation}\n{use}", D=dct, VIEW=view,
                                V2=b.new_name(), E=b.int_expr(0)),
                 [f"dict_views:{kind}", "dict_views:live"])


@feature("ordereddict", 5)
def gen_ordereddict(b: Builder):
    v = b.new_name("od")
    body = stmts("V = collections.OrderedDict([('a', E), ('b', 2), ('c', 3)])", V=v,
                 E=b.int_expr(0))
    for call in b.rng.sample(["V.move_to_end('a')", "V.move_to_end('c', last=False)",
                              "V2 = V.popitem(last=False)", "V2 = V.popitem()",
                              "V['d'] = E", "V2 = list(V.keys())", "V2 = V == {'a': 1}"],
                             b.rng.randint(1, 3)):
        body += stmts(call, V=v, V2=b.new_name(), E=b.int_expr(0))
    return Piece(body)


@feature("defaultdict", 5)
def gen_defaultdict(b: Builder):
    v = b.new_name("dd")
    if b.chance(0.5):
        i = b.new_name("i")
        return Piece(stmts("V = collections.defaultdict(list)\nfor I in range(N):\n"
                           "    V[I % 2].append(I)\nV2 = V[5]", V=v, I=i,
                           N=b.small_int_expr(), V2=b.new_name()))
    return Piece(stmts("V = collections.defaultdict(int)\nV['a'] += E\nV['b'] -= 1\n"
                       "V2 = dict(V)", V=v, E=b.int_expr(1), V2=b.new_name()))


@feature("namedtuple", 6)
def gen_namedtuple(b: Builder):
    p = b.new_name("pair")
    t, shape = b.any_tensor()
    first = name(t) if t is not None and b.chance(0.6) else b.int_expr(0)
    body = stmts("P = Pair(E1, b=E2)", P=p, E1=first, E2=b.int_expr(0))
    for use in b.rng.sample(["V = P.a", "V = P[1] + 1", "V = P._replace(b=E)", "V = P._asdict()",
                             "V, V2 = P", "V = Pair._make([E, E])", "V = P.b * 2"],
                            b.rng.randint(1, 3)):
        body += stmts(use, P=p, V=b.new_name(), V2=b.new_name(), E=b.int_expr(0))
    return Piece(body)


@feature("deque", 5)
def gen_deque(b: Builder):
    q = b.new_name("dq")
    maxlen = b.rng.choice(["", ", maxlen=3"])
    body = stmts(f"Q = collections.deque([E, 1, 2]{maxlen})", Q=q, E=b.int_expr(0))
    for call in b.rng.sample(["Q.append(E)", "Q.appendleft(E)", "V = Q.popleft()",
                              "V = Q.pop()", "Q.rotate(1)", "Q.extend([4, 5])",
                              "V = list(Q)", "V = Q[0]", "V = len(Q)"], b.rng.randint(1, 4)):
        body += stmts(call, Q=q, V=b.new_name(), E=b.int_expr(0))
    return Piece(body, ["deque:maxlen"] if maxlen else [])


@feature("set", 5)
def gen_set(b: Builder):
    s = b.new_name("st")
    body = stmts("S = {E, 1, 2}", S=s, E=b.int_expr(0))
    for call in b.rng.sample(["S.add(E)", "S.discard(1)", "S |= {7, E}", "V = S & {1, 2, 3}",
                              "V = sorted(S)", "V = E in S", "V = S - {2}",
                              "V = frozenset(S)", "V = len(S)", "S.update(range(3))"],
                             b.rng.randint(1, 4)):
        body += stmts(call, S=s, V=b.new_name(), E=b.int_expr(0))
    return Piece(body)


@feature("user_object", 8)
def gen_user_object(b: Builder):
    if "box" not in b.scope or not isinstance(b.scope["box"], object):
        obj = b.new_name("obj")
        t, _ = b.any_tensor()
        if t is None:
            return None
        prefix = stmts("OBJ = Box(T, E)", OBJ=obj, T=t, E=b.int_expr(0))
    else:
        obj, prefix = "box", []
    uses = b.rng.sample(["V = OBJ.t * OBJ.n", "V = OBJ.scaled(E)", "OBJ.n += 1",
                         "OBJ.log.append(E)", "OBJ.extra = E", "V = getattr(OBJ, 'missing', E)",
                         "V = hasattr(OBJ, 'extra')", "OBJ.t = OBJ.t + E",
                         "V = vars(OBJ).get('n')"], b.rng.randint(1, 3))
    body = list(prefix)
    for use in uses:
        body += stmts(use, OBJ=obj, V=b.new_name(), E=b.int_expr(0))
    return Piece(body, ["mutate_input"] if obj == "box" and any("OBJ." in u.split("=")[0]
                                                                   for u in uses) else [])


@feature("module", 8)
def gen_module(b: Builder):
    if "net" not in b.scope:
        return None
    width = b.scope["net"].lin.in_features
    t, shape = b.any_tensor(lambda v: is_float_tensor(v) and v.dim() >= 1 and v.shape[-1] == width)
    r = b.rng.random()
    if t is not None and r < 0.5:
        form = b.rng.choice(["net(T)", "net.lin(T)", "net(T).sum(-1)", "net(net(T))"])
        return assign(b.new_name(), expr(form, T=name(t)))
    if r < 0.65:
        return Piece(stmts("net.scale = E", E=b.float_expr(0)), ["mutate_input"])
    return assign(b.new_name(), expr(b.rng.choice([
        "net.calls", "net.training", "net.lin.weight.shape[0]", "net.lin.out_features",
        "sum(p.numel() for p in net.parameters())", "[k for k, _ in net.named_parameters()]",
        "type(net.lin).__name__"])))


@feature("try", 8)
def gen_try(b: Builder):
    r = b.rng.random()
    e = b.new_name("err")
    handler = b.block()
    if r < 0.35:
        dct = b.pick(is_str_dict)
        if dct is not None:
            key = b.rng.choice(list(b.scope[dct]) + ["absent"])
            return Piece(stmts("try:\n    V = D[K]\nexcept KeyError as E:\n    V = str(E)\n"
                               "    HANDLER", V=b.new_name(), D=dct, K=const(key), E=e,
                               HANDLER=handler), ["try:keyerror"])
    if r < 0.7:
        cond = b.bool_expr(1)
        text = b.fstring()
        finally_body = b.block()
        return Piece(stmts("""
            try:
                if C:
                    raise ValueError(MSG)
                BODY
            except (ValueError, TypeError) as E:
                V = E.args[0]
                HANDLER
            finally:
                FINALLY
            """, C=cond, MSG=text, BODY=b.block(), E=e, V=b.new_name(), HANDLER=handler,
            FINALLY=finally_body), ["try:finally", "raise:caught"])
    lst = b.pick(lambda v: type(v) in (list, tuple))
    if lst is None:
        return None
    return Piece(stmts("try:\n    V = L[N]\nexcept IndexError:\n    V = None\n    HANDLER\n"
                       "else:\n    ELSE", V=b.new_name(), L=lst, N=b.int_expr(1),
                       HANDLER=handler, ELSE=b.block()), ["try:else"])


@feature("with", 8)
def gen_with(b: Builder):
    log = b.new_name("log")
    r = b.rng.random()
    if r < 0.5:
        return Piece(stmts("LOG = []\nwith Recorder(LOG) as R:\n    BODY\nV = R.log", LOG=log,
                           R=b.new_name("rec"), BODY=b.block(), V=b.new_name()))
    if r < 0.75:
        return Piece(stmts("""
            LOG = []
            with Recorder(LOG, swallow=True):
                BODY
                raise KeyError(E)
            """, LOG=log, BODY=b.block(), E=b.str_expr()), ["with:swallow"])
    return Piece(stmts("with torch.no_grad():\n    BODY", BODY=b.block()), ["with:no_grad"])


@feature("generator", 7)
def gen_generator(b: Builder):
    t, shape = b.any_tensor()
    r = b.rng.random()
    if r < 0.4 and t is not None:
        form = b.rng.choice(["V = list(countdown(N, T))", "V = sum(countdown(N, T))",
                             "V = next(countdown(N + 1, T))"])
        return Piece(stmts(form, V=b.new_name(), N=b.small_int_expr(), T=t), ["generator:prelude"])
    gen, k, j = b.new_name("gen"), b.new_name("k"), b.new_name("j")
    with b.extended({j: 1}):
        value = b.int_expr(1)
    body = stmts("""
        def GEN(K):
            for J in range(K):
                if J % 2 == 0:
                    yield E
            yield -1
        """, GEN=gen, K=k, J=j, E=value)
    use = b.rng.choice(["V = list(GEN(N))", "V = [x + 1 for x in GEN(N)]",
                        "V = dict(enumerate(GEN(N)))", "V = tuple(GEN(N))"])
    return Piece(body + stmts(use, V=b.new_name(), GEN=gen, N=b.small_int_expr()))


@feature("match", 6)
def gen_match(b: Builder):
    """A match statement over a list, tuple, dict, int or tensor: sequence patterns with a
    star, mapping alternatives, a class pattern with a guard, a tensor's shape."""
    subject = b.pick(lambda v: type(v) in (list, tuple) or is_str_dict(v) or is_int(v) or
                     is_tensor(v))
    if subject is None:
        return None
    return Piece(stmts("""
        match S:
            case [M]:
                V = M
            case [M, *_]:
                V = len(S)
            case {"p": M} | {"q": M}:
                V = M
            case int(M) if M > 1:
                V = M * 2
            case torch.Tensor(shape=(M, *_)):
                V = M
            case _:
                V = E
        """, S=subject, M=b.new_name("m"), V=b.new_name(), E=b.int_expr(0)), ["match"])


@feature("yield_from", 5)
def gen_yield_from(b: Builder):
    """Generators delegating with `yield from` to a range, a list and another generator,
    whose return value `yield from` gives."""
    inner, outer, k, total = (b.new_name("gen"), b.new_name("gen"), b.new_name("k"),
                              b.new_name("total"))
    t, _ = b.any_tensor()
    item = "T * 2" if t is not None else "E"
    return Piece(stmts(f"""
        def INNER(K):
            yield from range(K)
            yield from [{item}, E]
            return K + 1
        def OUTER(K):
            TOTAL = yield from INNER(K)
            yield TOTAL
        V = list(OUTER(N))
        """, INNER=inner, OUTER=outer, K=k, TOTAL=total, T=t or "0", E=b.int_expr(0),
                       V=b.new_name(), N=b.small_int_expr()), ["yield_from"])


@feature("generator_interleaved", 6)
def gen_generator_interleaved(b: Builder):
    """A generator and the loop consuming it both read and write one state between steps
    (eager runs the generator's body between the loop's iterations), consumed directly or
    through enumerate, zip, map, filter, any or next, sometimes left by a break."""
    gen, k, j, q = b.new_name("gen"), b.new_name("k"), b.new_name("j"), b.new_name("q")
    state, acc, v = b.new_name("state"), b.new_name("acc"), b.new_name("v")
    t, _ = b.any_tensor()
    item = b.rng.choice(["STATE[0] + J", "J * 2 - STATE[0]"] +
                        (["T * STATE[0] + J"] if t is not None else []))
    step = b.rng.choice(["", "STATE[0] += 1", "STATE.append(J)"])
    tensor_items = "T *" in item
    consume = b.rng.choice(
        ["GEN(N)", "enumerate(GEN(N))", "zip(range(M), GEN(N))", "map(lambda Q: Q, GEN(N))"] +
        ([] if tensor_items else ["map(lambda Q: Q + STATE[0], GEN(N))",
                                  "filter(lambda Q: Q % 2 == STATE[0] % 2, GEN(N))"]))
    mutate = b.rng.choice(["STATE[0] = STATE[0] * 2 + 1", "STATE[0] -= 3", "STATE.append(-1)",
                           "STATE[0] += len(STATE)"])
    leave = b.rng.random() < 0.3
    source = "\n".join([
        "STATE = [E]",
        "def GEN(K):",
        "    for J in range(K):",
        f"        {step or 'pass'}",
        f"        yield {item}",
        "ACC = []",
        f"for V in {consume}:",
        f"    {mutate}",
        "    ACC.append(V)",
    ] + (["    if len(ACC) == 2:", "        break"] if leave else []))
    body = stmts(source, STATE=state, GEN=gen, K=k, J=j, T=t or "None", E=b.int_expr(0),
                 N=b.small_int_expr(), M=b.small_int_expr(), Q=q, ACC=acc, V=v)
    tail = b.rng.choice(["", "V2 = next(GEN(N), -7)", "V2 = any(Q > 2 for Q in GEN(N))",
                         "V2 = list(GEN(N))"])
    if tail:
        body += stmts(tail.replace("Q > 2", "Q > 2" if not tensor_items else "True"),
                      V2=b.new_name(), GEN=gen, N=b.small_int_expr(), Q=q)
    return Piece(body, ["generator:interleaved"])


@feature("fstring", 6)
def gen_fstring(b: Builder):
    return assign(b.new_name("s"), b.fstring())


@feature("print", 6)
def gen_print(b: Builder):
    r = b.rng.random()
    if r < 0.3:
        return Piece(stmts("print(E)", E=b.fstring()))
    if r < 0.55:
        return Piece(stmts("print(E1, E2, sep=', ')", E1=b.int_expr(1), E2=b.str_expr()))
    if r < 0.75:
        v = b.pick(lambda v: type(v) in (list, dict, tuple, set, collections.OrderedDict,
                                         collections.deque, collections.defaultdict)
                   and not any(is_tensor(e) for e in v))
        if v is not None:
            return Piece(stmts("print(V)", V=v), ["print:container"])
    t, _ = b.any_tensor()
    if t is None:
        return None
    return Piece(stmts(b.rng.choice(["print(T)", "print(T.shape, T.dtype)"]), T=t),
                 ["print:tensor"])


@feature("logging", 4)
def gen_logging(b: Builder):
    """Log calls: constant arguments (made after the graph, vm/logging_calls.cpp), a level
    LOG does not emit, and arguments the trace computes or reads from a tensor."""
    r = b.rng.random()
    if r < 0.3:
        return Piece(stmts("LOG.info(S, E)", S=const("value %s"), E=b.int_expr(1)),
                     ["logging:constant"])
    if r < 0.5:
        return Piece(stmts("LOG.warning(E)", E=b.fstring()), ["logging:fstring"])
    if r < 0.6:
        return Piece(stmts("LOG.debug(S)", S=const("not emitted")), ["logging:disabled"])
    if r < 0.75:
        return Piece(stmts("LOG.log(L, S, E)", L=const(b.rng.choice([20, 30, 40])),
                           S=const("level %d"), E=b.int_expr(1)), ["logging:log"])
    t, _ = b.any_tensor()
    if t is None:
        return None
    return Piece(stmts("LOG.info(S, T.shape, T.dtype)", S=const("tensor %s %s"), T=t),
                 ["logging:tensor"])


@feature("warnings", 3)
def gen_warnings(b: Builder):
    """warnings.warn: constant and f-string messages (made after the graph,
    vm/warning_calls.cpp), a helper that warns about its caller's line, a warning the
    harness makes an error (raised where eager raises it) and one it ignores."""
    r = b.rng.random()
    if r < 0.3:
        return Piece(stmts("warnings.warn(S)", S=const("fuzz: constant")), ["warnings:constant"])
    if r < 0.55:
        return Piece(stmts("warnings.warn('fuzz: ' + F, RuntimeWarning)", F=b.fstring()),
                     ["warnings:fstring"])
    if r < 0.8:
        return Piece(stmts("warn_caller(S)", S=b.str_expr()), ["warnings:stacklevel"])
    if r < 0.88:
        return Piece(stmts("warnings.warn(S, UserWarning)", S=const("fuzz-error: stop")),
                     ["warnings:error"])
    return Piece(stmts("warnings.warn(S, FutureWarning)", S=const("not shown")),
                 ["warnings:ignored"])


@feature("global_read", 5)
def gen_global_read(b: Builder):
    t = b.globals.get("G_T")
    if is_num_tensor(t) and b.chance(0.4):
        return assign(b.new_name(), expr(b.rng.choice(["G_T * 2", "G_T.sum()", "G_T + G_SCALE"])),
                      "global:tensor_read")
    if "G_TMP" in b.globals and b.chance(0.5):
        return assign(b.new_name(), expr("G_TMP + 1"), "global:tmp_read")
    return assign(b.new_name(), expr(b.rng.choice([
        "G_SCALE * 2", "G_TABLE['a'] + G_TABLE.get('z', 0)", "len(G_LOG)", "G_COUNT + 1",
        "list(G_TABLE)"])))


@feature("global_write", 5)
def gen_global_write(b: Builder):
    r = b.rng.random()
    if r < 0.3:
        b.declared_globals.add("G_COUNT")
        return Piece(stmts("G_COUNT += E", E=b.int_expr(1)))
    if r < 0.45:
        return Piece(stmts("G_LOG.append(E)", E=b.int_expr(1)))
    if r < 0.55:
        return Piece(stmts("G_TABLE[K] = E", K=const(b.rng.choice(["a", "c"])), E=b.int_expr(1)),
                     ["global:dict"])
    if r < 0.7:
        # A global rebound to a tensor the graph computes (STORE_GLOBAL of a graph output).
        t, shape = b.any_tensor()
        if t is None:
            return None
        b.declared_globals.add("G_T")
        return Piece(stmts("G_T = E", E=b.tensor_expr(shape, 2)), ["global:tensor"])
    if r < 0.8:
        # A float that changes on every call (opaque after its first change).
        b.declared_globals.add("G_SCALE")
        return Piece(stmts("G_SCALE = G_SCALE * F", F=const(b.rng.choice([1.5, 0.5, -1.0]))),
                     ["global:float"])
    if r < 0.9:
        b.declared_globals.add("G_LOG")
        return Piece(stmts("G_LOG = G_LOG + [E]", E=b.int_expr(1)), ["global:rebind_list"])
    # A global made, read and perhaps deleted again in one call.
    b.declared_globals.add("G_TMP")
    body = stmts("G_TMP = E", E=b.int_expr(1))
    if b.chance(0.5):
        body += stmts("V = G_TMP * 2", V=b.new_name())
    if b.chance(0.6):
        body += stmts("del G_TMP")
    return Piece(body, ["global:tmp"])


@feature("builtins", 6)
def gen_builtins(b: Builder):
    seq = b.pick(lambda v: is_int_list(v) and v)
    forms = ["abs(E)", "round(X, 2)", "divmod(E, 3)", "int(X)", "bool(E)", "pow(E, 2)",
             "list(range(E % 4))", "list(reversed(range(3)))"]
    if seq is not None:
        forms += ["min(L)", "max(L)", "sum(L)", "sorted(L)", "list(enumerate(L))",
                  "list(zip(L, L[1:]))", "any(L)", "all(L)", "tuple(L)", "L.__len__()"]
    form = b.rng.choice(forms)
    return assign(b.new_name(), expr(form, E=b.int_expr(1), X=b.float_expr(1),
                                     L=name(seq) if seq else const(0)))


@feature("str_methods", 4)
def gen_str_methods(b: Builder):
    s = b.str_expr()
    return assign(b.new_name("s"), expr(b.rng.choice([
        "S.upper()", "S.title()", "','.join([S, 'b'])", "S.startswith('a')", "S.find('e')",
        "len(S.split('a'))", "S.strip('a')", "'{}-{}'.format(S, 1)", "S * 2", "S[::-1]"]), S=s))


@feature("mutate_input", 7)
def gen_mutate_input(b: Builder):
    options = [n for n in ("xs", "ks", "d", "a", "c", "box") if n in b.scope]
    if not options:
        return None
    target = b.rng.choice(options)
    v = b.scope[target]
    if target == "xs":
        return Piece(stmts(b.rng.choice(["xs.append(E)", "xs[0] = E", "xs.pop()"]),
                           E=b.tensor_expr(tuple(v[0].shape), 1) if v else const(0)))
    if target == "ks":
        return Piece(stmts(b.rng.choice(["ks.append(E)", "ks.sort()", "ks.insert(0, E)"]),
                           E=b.int_expr(1)))
    if target == "d":
        return Piece(stmts(b.rng.choice(["d['k'] = E", "d['new'] = E", "del d['s']"]),
                           E=b.int_expr(1)))
    if target == "box":
        return Piece(stmts(b.rng.choice(["box.n = E", "box.log.append(E)", "box.fresh = E"]),
                           E=b.int_expr(1)))
    if not is_num_tensor(v):
        return None
    return Piece(stmts(b.rng.choice(["T.add_(1)", "T.mul_(2)", "T[0] = E", "T.neg_()"]), T=target,
                       E=b.int_expr(0)), ["torch_inplace", "inplace:input"])


# -- torch ----------------------------------------------------------------------------------

@feature("torch_pointwise", 14)
def gen_torch_pointwise(b: Builder):
    t, shape = b.any_tensor()
    if t is None:
        return None
    return assign(b.new_name(), b.tensor_expr(shape, 3))


REDUCTIONS = ("sum", "mean", "amax", "amin", "prod", "std", "var", "argmax", "max", "logsumexp",
              "norm", "all", "any")


@feature("torch_reduction", 12)
def gen_torch_reduction(b: Builder):
    t, shape = b.any_tensor(lambda v: is_tensor(v) and not v.requires_grad)
    if t is None:
        return None
    value = name(t)
    is_bool = b.scope[t].dtype == torch.bool
    op = b.rng.choice(("all", "any", "sum") if is_bool else REDUCTIONS[:-2])
    if op in ("mean", "std", "var", "logsumexp", "norm") and not b.scope[t].is_floating_point():
        value = expr("T.float()", T=value)
    ndim = len(shape)
    tags = [f"reduce:{op}"]
    keepdim = b.chance(0.5)
    r = b.rng.random()
    if ndim == 0 or r < 0.2:
        dims = None
    elif r < 0.8 or op in ("prod", "argmax", "max", "all", "any", "logsumexp") or ndim == 1:
        dims = b.rng.randrange(-ndim, ndim)
    else:
        dims = tuple(b.rng.sample(range(ndim), b.rng.randint(2, ndim)))
    if dims is None:
        tags.append("reduce:all")
        if op in ("logsumexp",):
            return None
        call = expr(f"T.{op}()", T=value)
    else:
        if isinstance(dims, int):
            tags.append(f"reduce:dim{dims % ndim}of{ndim}" + (":keepdim" if keepdim else ""))
        else:
            tags.append("reduce:dims")
        tags.append("keepdim" if keepdim else "no-keepdim")
        dim_arg = const(dims) if isinstance(dims, int) else tuple_of([const(d) for d in dims])
        call = expr(f"T.{op}(D, keepdim=K)", T=value, D=dim_arg, K=const(keepdim))
        if op == "max":
            if b.chance(0.5):
                return Piece(stmts("V, I = torch.max(T, D, keepdim=K)", V=b.new_name(),
                                   I=b.new_name(), T=value, D=dim_arg, K=const(keepdim)),
                             tags + ["reduce:max-unpacked"])
            call = expr(b.rng.choice(["C.values", "C", "C.indices"]), C=call)
    return assign(b.new_name(), call, *tags)


@feature("torch_view", 10)
def gen_torch_view(b: Builder):
    t, shape = b.any_tensor(is_tensor)
    if t is None:
        return None
    ndim = len(shape)
    numel = 1
    for s in shape:
        numel *= s
    forms = ["T.reshape(-1)", "T.view(-1)", "T.unsqueeze(0)", "T.unsqueeze(-1)", "T.flatten()",
             "T[None]", "T.reshape(1, -1)"]
    if ndim >= 2:
        forms += ["T.transpose(0, 1)", "T.transpose(-1, -2)", "T.permute(P)", "T.t()" if ndim == 2
                  else "T.mT", "T.flatten(0, 1)", "T.movedim(0, -1)", "T.unbind(0)[0]",
                  "T.contiguous().view(S)"]
    if 1 in shape:
        forms += ["T.squeeze()", f"T.squeeze({shape.index(1)})", "T.expand(E)"]
    if ndim >= 1:
        forms += ["T.expand(2, *T.shape)", "T.narrow(-1, 0, 1)", "T.unflatten(-1, (1, -1))"]
    form = b.rng.choice(forms)
    perm = list(range(ndim))
    b.rng.shuffle(perm)
    split = [s for s in shape if s > 1]
    view_shape = (numel,) if not split else (split[0], numel // split[0])
    expanded = tuple(s if s != 1 else 3 for s in shape)
    return assign(b.new_name(), expr(form, T=name(t), P=tuple_of([const(p) for p in perm]),
                                     S=const(view_shape), E=const(expanded)),
                  "view:" + form.split("(")[0].split(".")[-1].strip("[]"))


@feature("torch_inplace", 8)
def gen_torch_inplace(b: Builder):
    t, shape = b.any_tensor(is_float_tensor)
    if t is None:
        return None
    r = b.rng.random()
    value = b.tensor_expr(shape, 1)
    if r < 0.3:
        op = b.rng.choice(["add_", "mul_", "sub_", "div_"])
        return Piece(stmts(f"T.{op}(E)", T=t, E=value))
    if r < 0.5:
        return Piece(stmts(b.rng.choice(["T.clamp_(min=-0.5)", "T.zero_()", "T.relu_()",
                                         "T.fill_(E)", "T.abs_()"]), T=t, E=b.float_expr(0)))
    if r < 0.65:
        return Piece(stmts("T += E", T=t, E=value), ["inplace:augassign"])
    if r < 0.85 and len(shape) >= 1:
        idx = b.rng.choice(["T[0] = E", "T[..., -1] = E", "T[T > 0.5] = E", "T[:, 0] = E"
                            if len(shape) >= 2 else "T[1:] = E"])
        return Piece(stmts(idx, T=t, E=b.float_expr(0)), ["inplace:setitem"])
    view = b.new_name()
    return Piece(stmts("V = T.view(-1)\nV[0] = E", V=view, T=t, E=b.float_expr(0)) if
                 b.chance(0.5) else stmts("V = T[0]\nV.mul_(E)", V=view, T=t, E=b.float_expr(0)),
                 ["inplace:through-view"])


@feature("torch_index", 8)
def gen_torch_index(b: Builder):
    t, shape = b.any_tensor(lambda v: is_tensor(v) and v.dim() >= 1)
    if t is None:
        return None
    forms = ["T[0]", "T[-1]", "T[1:]", "T[..., ::2]", "T[None, ...]", "T[T > 0]",
             "T[[0, 0]]", "T[torch.tensor([0, -1])]", "T[N % T.shape[0]]", "T[:, None]"]
    if len(shape) >= 2:
        forms += ["T[:, 1:]", "T[0, -1]", "T[..., 0]",
                  "T[:, [0, 1]]" if shape[1] >= 2 else "T[:, 0]"]
    mask = b.pick(lambda v: is_tensor(v) and v.dtype == torch.bool and tuple(v.shape) == shape)
    if mask is not None:
        forms.append("T[M]")
    form = b.rng.choice(forms)
    tags = ["index:mask"] if "T >" in form or "[M]" in form else []
    return assign(b.new_name(), expr(form, T=name(t), N=b.int_expr(1),
                                     M=name(mask) if mask else const(0)), *tags)


@feature("torch_broadcast", 6)
def gen_torch_broadcast(b: Builder):
    pairs = [(x, y) for x in b.names(is_num_tensor) for y in b.names(is_num_tensor)
             if tuple(b.scope[x].shape) != tuple(b.scope[y].shape)]
    pairs = [(x, y) for x, y in pairs if _can_broadcast(b.scope[x].shape, b.scope[y].shape)]
    if not pairs:
        t, shape = b.any_tensor()
        if t is None or not shape:
            return None
        return assign(b.new_name(), expr("T.unsqueeze(-1) * T.unsqueeze(0)", T=name(t)),
                      "broadcast:outer")
    x, y = b.rng.choice(pairs)
    op = b.rng.choice(["+", "*", "-", "/"])
    return assign(b.new_name(), expr(f"X {op} Y", X=name(x), Y=name(y)))


def _can_broadcast(x, y):
    try:
        torch.broadcast_shapes(x, y)
        return True
    except RuntimeError:
        return False


@feature("torch_dtype", 7)
def gen_torch_dtype(b: Builder):
    t, shape = b.any_tensor(is_tensor)
    if t is None:
        return None
    form = b.rng.choice(["T.double()", "T.long()", "T.to(torch.int32)", "T.bool()", "T.float()",
                         "T.to(torch.float64) * 2", "T.long() + 1.5", "T.int() * T.double()",
                         "T.to(dtype=torch.float32) + w" if "w" in b.scope else "T.float() + 2",
                         "T.type(torch.float64)", "T.dtype == torch.float32",
                         "torch.result_type(T, 2.5)", "T.float().sum(dtype=torch.float64)"])
    return assign(b.new_name(), expr(form, T=name(t)), "dtype:" + form.split("(")[0])


@feature("torch_join", 7)
def gen_torch_join(b: Builder):
    t, shape = b.any_tensor()
    if t is None:
        return None
    ndim = len(shape)
    r = b.rng.random()
    other = b.tensor_expr(shape, 1)
    if r < 0.35 and ndim >= 1:
        d = b.rng.randrange(-ndim, ndim)
        return assign(b.new_name(), expr("torch.cat([T, E], dim=D)", T=name(t), E=other,
                                         D=const(d)), "join:cat")
    if r < 0.6:
        d = b.rng.randrange(-ndim - 1, ndim + 1)
        return assign(b.new_name(), expr("torch.stack((T, E), D)", T=name(t), E=other,
                                         D=const(d)), "join:stack")
    if ndim == 0:
        return None
    d = b.rng.randrange(ndim)
    size = shape[d]
    if r < 0.8 and size >= 2:
        return Piece(stmts("P, Q = torch.split(T, [1, S], dim=D)", P=b.new_name(), Q=b.new_name(),
                           T=t, S=const(size - 1), D=const(d)), ["join:split"])
    return assign(b.new_name(), expr(b.rng.choice(["T.split(1, D)", "T.chunk(2, D)",
                                                   "list(T.unbind(D))"]),
                                     T=name(t), D=const(d)), "join:split")


@feature("torch_factory", 5)
def gen_torch_factory(b: Builder):
    t, shape = b.any_tensor()
    forms = ["torch.arange(N)", "torch.zeros(S)", "torch.full(S, X)", "torch.tensor([N, 2])",
             "torch.tensor(X)", "torch.linspace(0, 1, N + 1)", "torch.eye(N + 1)",
             "torch.ones(S, dtype=torch.int64)"]
    if t is not None:
        forms += ["torch.zeros_like(T)", "torch.ones_like(T) * X", "torch.full_like(T, N)",
                  "T.new_zeros(S)", "torch.empty_like(T).fill_(X)"]
    return assign(b.new_name(), expr(b.rng.choice(forms), N=b.small_int_expr(), S=const(b.shape),
                                     X=b.float_expr(0), T=name(t) if t else const(0)))


# ---------------------------------------------------------------------------------------
# The program.

def _raising_piece(b: Builder) -> Piece:
    """A last statement that raises (some programs test that compiled raises as eager)."""
    r = b.rng.random()
    if r < 0.3:
        return Piece(stmts("if C:\n    raise ValueError(M)", C=b.bool_expr(1), M=b.fstring()),
                     ["raise:uncaught"])
    if r < 0.5:
        return Piece(stmts("V = {'a': 1}[K]", V=b.new_name(), K=b.str_expr()), ["raise:uncaught"])
    if r < 0.7:
        t, _ = b.any_tensor()
        if t is not None:
            return Piece(stmts("V = T.view(7, -1, 3)", V=b.new_name(), T=t), ["raise:torch"])
    return Piece(stmts("V = [1, 2][N]", V=b.new_name(), N=b.int_expr(1)), ["raise:uncaught"])


def _make_inputs_def(b: Builder) -> ast.stmt:
    shape, width = const(b.shape), const(b.shape[-1])
    body = stmts("g = torch.Generator().manual_seed(seed)")
    for input_name in b.inputs:
        body += stmts(f"{input_name} = {INPUTS[input_name][0]}", S=shape, B=const(b.bshape),
                      W=width)
    args = [name(n) for n in b.inputs]
    for vararg in b.varargs:
        body += stmts(f"{vararg} = {VARARG_INPUTS[vararg]}", S=shape)
    positional = ast.List(elts=args, ctx=ast.Load())
    if "rest" in b.varargs:
        positional = expr("P + rest", P=positional)
    kwargs = name("opts") if "opts" in b.varargs else ast.Dict(keys=[], values=[])
    body += stmts("return P, K", P=positional, K=kwargs)
    fn = stmts("def make_inputs(seed=SEED, variant=0):\n    pass",
               SEED=const(b.generator_seed))[0]
    fn.body = body
    return fn


def _f_def(b: Builder, tail: List[ast.stmt]) -> ast.FunctionDef:
    fn = stmts("def f():\n    pass")[0]
    fn.args.args = [ast.arg(arg=n) for n in b.inputs]
    if "rest" in b.varargs:
        fn.args.vararg = ast.arg(arg="rest")
    if "opts" in b.varargs:
        fn.args.kwarg = ast.arg(arg="opts")
    head = [ast.Global(names=sorted(b.declared_globals))] if b.declared_globals else []
    fn.body = head + b.body + tail
    return fn


def module_of(b: Builder, tail: List[ast.stmt]) -> ast.Module:
    prelude = ast.parse(PRELUDE).body
    return ast.Module(body=prelude + [_make_inputs_def(b), _f_def(b, tail)], type_ignores=[])


class _TooSlow(Exception):
    pass


def _too_slow(signum, frame):
    raise _TooSlow()


def run_locals(module: ast.Module):
    """Runs f of `module` (whose body ends with `return locals()`) eagerly on variant 0's
    inputs: f's locals and the module's globals, or None when something raised or ran for
    more than PROBE_LIMIT_S (a loop that never ends is a generator bug, but must not
    stall the search)."""
    namespace = {"__name__": "program_fuzz_probe"}
    previous = signal.signal(signal.SIGALRM, _too_slow)
    signal.setitimer(signal.ITIMER_REAL, PROBE_LIMIT_S)
    try:
        code = compile(source_of(module), "<program>", "exec")
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(code, namespace)
            args, kwargs = namespace["make_inputs"]()
            values = namespace["f"](*args, **kwargs)
    except Exception:  # noqa: BLE001 - the candidate piece is dropped
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return values, {k: namespace[k] for k in GLOBAL_NAMES if k in namespace}


def _try_piece(b: Builder, piece: Piece, declared_before) -> bool:
    saved = list(b.body)
    b.body += piece.body
    result = run_locals(module_of(b, stmts("return locals()")))
    if result is None:
        b.body = saved
        b.declared_globals = declared_before
        return False
    b.scope, b.globals = result
    return True


def _return_stmt(b: Builder) -> List[ast.stmt]:
    skip = (torch.nn.Module, type(iter([])), type(x for x in ()))
    candidates = [n for n, v in b.scope.items()
                  if not callable(v) and not isinstance(v, skip) and n not in ("g",)]
    fresh = [n for n in candidates if n not in b.inputs]
    picked = fresh[-b.rng.randint(1, 3):] if fresh else []
    if candidates and b.chance(0.3):
        picked.append(b.rng.choice(candidates))
    if not picked:
        return stmts("return None")
    if len(picked) == 1:
        return stmts("return V", V=name(picked[0]))
    return [ast.Return(value=tuple_of([name(p) for p in dict.fromkeys(picked)]))]


def generate(seed: int, index: int) -> Program:
    rng = random.Random(f"program-fuzz:{seed}:{index}")
    b = Builder(rng, seed, index)
    b.inputs = ["a"] + [n for n, (_, weight) in INPUTS.items()
                        if n != "a" and rng.random() < weight / 200]
    b.varargs = ["rest", "opts"] if rng.random() < 0.2 else []
    result = run_locals(module_of(b, stmts("return locals()")))
    assert result is not None, "the inputs alone raise"
    b.scope, b.globals = result
    tags = collections.Counter()
    pieces = rng.randint(4, 10)
    titles = list(FEATURES)
    weights = [FEATURES[t][0] for t in titles]
    attempts = 0
    while pieces and attempts < 40:
        attempts += 1
        title = rng.choices(titles, weights)[0]
        declared_before = set(b.declared_globals)
        b.tags = collections.Counter()
        try:
            piece = FEATURES[title][1](b)
        except Exception:  # noqa: BLE001 - a generator bug: counted, the piece dropped
            tags[f"generator-error:{title}"] += 1
            piece = None
        if piece is None or not _try_piece(b, piece, declared_before):
            b.declared_globals = declared_before
            continue
        pieces -= 1
        tags[title] += 1
        tags.update(piece.tags)
        tags.update(b.tags)
    if rng.random() < 0.05:
        piece = _raising_piece(b)
        b.body += piece.body
        tags.update(piece.tags)
    module = module_of(b, _return_stmt(b))
    f_def = module.body[-1]
    nodes = collections.Counter(type(node).__name__ for node in ast.walk(f_def))
    if b.inputs and "rest" in b.varargs:
        tags["f_varargs:signature"] += 1
    return Program(seed, index, source_of(module), tags, nodes)
