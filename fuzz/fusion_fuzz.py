#!/usr/bin/env python3
"""Differential fuzzer of dynvm's fusion pipeline: seeded random programs of one to five
tensor operations, compiled with dynvm (backend "dynvm" and/or "eager") and compared
with eager PyTorch; a failing program is minimised and printed as runnable Python.

    python3 fuzz/fusion_fuzz.py --seconds 60 --seed 1 --backend both
    python3 fuzz/fusion_fuzz.py --seed 1 --index 123 --print   # one program's source

Program `index` of seed `S` depends on nothing but (S, index): a failure is reproduced
by `--seed S --index I`, and the printed source runs on its own. See docs/fuzzing.md for
what is covered, the tolerances and how to run the long run.
"""

import argparse
import collections
import dataclasses
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from typing import Callable, Dict, List, Optional, Tuple

# ATen's C++ warnings (deprecated in-place writes into expanded tensors, ...) reach glog
# when dynvm runs an op: kept out of the log when the fuzzer is the program that loads it.
os.environ.setdefault("GLOG_minloglevel", "2")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten  # noqa: E402

# ---------------------------------------------------------------------------------------
# Tolerances (docs/fuzzing.md says more).
#
# An element of a compiled result c is wrong when it differs from eager's e by more than
# atol * scale + rtol * |e|, is NaN where e is not (or the reverse), or is an infinity of
# another sign; rtol and atol are those of the least precise float dtype the program
# computes in (a float64 result of float32 work is float32-accurate), `scale` the largest
# finite magnitude among the output and the float inputs, at least 1. Integers and bool
# compare exactly; dtypes and shapes must be equal. A wrong element is still accepted
# where the program is sensitive: when c is about as close to the float64 result r of
# the same program as e is (|c - r| <= 2 |e - r| + tolerance: eager float16 rounds
# between ops, fused kernels do not), or when perturbing the inputs of the float64 run by
# about two roundings moves r by at least a third of |c - e| (cancellation, cos of a
# large argument).
TOLERANCES = {  # dtype: (rtol, atol)
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (4e-2, 4e-2),
}

DTYPE_WEIGHTS = {"float32": 40, "float64": 10, "float16": 10, "bfloat16": 10, "int64": 18,
                 "bool": 8}
FLOAT_NAMES = ("float32", "float64", "float16", "bfloat16")
# Sizes of dims: 1 broadcasts, 2 and 3 are shorter than a vector and than four
# accumulators, 17 and 33 leave vector remainders, 0 is empty.
SIZES = (1, 1, 2, 2, 3, 3, 4, 5, 7, 8, 10, 16, 17, 33)
# One dim of some programs: several unrolled vector iterations and a remainder.
WIDE_SIZES = (64, 100, 129, 256, 1000)
MAX_NUMEL = 6000
# Where the programs' input tensors live (--device): "cpu", or "cuda" to test the CUDA
# target against eager CUDA.
DEVICE = "cpu"
LAYOUTS = ("contiguous", "permuted", "stepped", "offset", "expanded")
VALUE_KINDS = ("normal", "positive", "special", "large")
SPECIAL_VALUES = ("float('nan')", "float('inf')", "float('-inf')", "0.0", "-0.0", "1.0",
                  "-1.0", "0.5", "-2.5", "3.0")


# ---------------------------------------------------------------------------------------
# Programs.

@dataclasses.dataclass
class InputSpec:
    """One argument of the program: a tensor made from the program's generator, or a
    Python scalar."""
    name: str
    dtype: str = "float32"  # a DTYPE_WEIGHTS key; for scalars "float", "int" or "bool"
    shape: Tuple[int, ...] = ()
    layout: str = "contiguous"
    layout_arg: Tuple = ()  # permutation; (dim, step, start); (dim,); dims made size 1
    values: str = "normal"
    scalar: Optional[str] = None  # Python literal for a scalar argument

    def is_tensor(self):
        return self.scalar is None

    def expression(self):
        """Python source building this argument from the generator `g`."""
        if not self.is_tensor():
            return self.scalar
        shape = list(self.shape)
        alloc = list(shape)
        suffix = ""
        if self.layout == "permuted":
            perm = self.layout_arg
            alloc = [0] * len(shape)
            for i, p in enumerate(perm):
                alloc[p] = shape[i]
            suffix = ".t()" if perm == (1, 0) else f".permute{tuple(perm)}"
        elif self.layout == "stepped":
            dim, step, start = self.layout_arg
            alloc[dim] = shape[dim] * step + start if shape[dim] else start
            suffix = "[" + ":, " * dim + (f"{start}::{step}" if start else f"::{step}") + "]"
        elif self.layout == "offset":
            (dim,) = self.layout_arg
            alloc[dim] = shape[dim] + 1
            suffix = "[" + ":, " * dim + "1:]"
        elif self.layout == "expanded":
            for d in self.layout_arg:
                alloc[d] = 1
            suffix = f".expand{_tuple_text(shape)}"
        size = _tuple_text(alloc)
        if self.dtype == "bool":
            base = f"torch.randint(0, 2, {size}, generator=g).bool()"
        elif self.dtype == "int64":
            base = f"torch.randint(-5, 6, {size}, generator=g)"
        else:
            if self.values == "positive":
                base = f"torch.rand({size}, generator=g).add(0.05)"
            elif self.values == "special":
                pool = ", ".join(SPECIAL_VALUES)
                base = (f"torch.tensor([{pool}])"
                        f"[torch.randint(0, {len(SPECIAL_VALUES)}, {size}, generator=g)]")
            elif self.values == "large":
                base = f"torch.randn({size}, generator=g).mul(40)"
            else:
                base = f"torch.randn({size}, generator=g).mul(2)"
            if self.dtype != "float32":
                base += f".to(torch.{self.dtype})"
        if DEVICE != "cpu":
            base += f".to({DEVICE!r})"  # made on the CPU (the same values), then moved
        return base + suffix


def _tuple_text(values):
    values = tuple(values)
    return "(" + ", ".join(str(v) for v in values) + ("," if len(values) == 1 else "") + ")"


@dataclasses.dataclass
class Stmt:
    """`target = expr` (or `expr` alone when target is None), expr a format string whose
    {0}, {1}, ... are the variables in `args`."""
    target: Optional[str]
    expr: str
    args: List[str]
    op: str
    tags: List[str] = dataclasses.field(default_factory=list)
    assign: bool = False  # `{0}[...] = ...`: a statement, not an expression

    def render(self):
        text = self.expr.format(*self.args)
        return text if self.target is None else f"{self.target} = {text}"


@dataclasses.dataclass
class Program:
    seed: int
    index: int
    inputs: List[InputSpec]
    stmts: List[Stmt]
    outputs: List[str]
    generator_seed: int = 0

    def body_source(self):
        names = ", ".join(i.name for i in self.inputs)
        lines = [f"def f({names}):"]
        lines += ["    " + s.render() for s in self.stmts]
        if len(self.outputs) == 1:
            lines.append(f"    return {self.outputs[0]}")
        else:
            lines.append(f"    return {', '.join(self.outputs)}")
        return "\n".join(lines) + "\n"

    def inputs_source(self):
        lines = [f"def make_inputs(seed={self.generator_seed}):",
                 "    g = torch.Generator().manual_seed(seed)"]
        lines += [f"    {i.name} = {i.expression()}" for i in self.inputs]
        lines.append(f"    return [{', '.join(i.name for i in self.inputs)}]")
        return "\n".join(lines) + "\n"

    def source(self):
        return self.inputs_source() + "\n\n" + self.body_source()

    def ops(self):
        return [s.op for s in self.stmts]

    def copy(self):
        return Program(self.seed, self.index, [dataclasses.replace(i) for i in self.inputs],
                       [dataclasses.replace(s, args=list(s.args), tags=list(s.tags))
                        for s in self.stmts], list(self.outputs), self.generator_seed)


def float64_body(body):
    """The program's text with every floating dtype replaced by float64."""
    for old in ("torch.float32", "torch.float16", "torch.bfloat16"):
        body = body.replace(old, "torch.float64")
    for old in (".float()", ".half()", ".bfloat16()"):
        body = body.replace(old, ".double()")
    return body


def load(source):
    """Executes program text in a fresh namespace: every call gives new code objects, so
    compiled variants of earlier programs are never reused."""
    namespace = {"torch": torch, "F": F, "__name__": "fusion_fuzz_program"}
    exec(compile(source, "<fuzz program>", "exec"), namespace)
    return namespace


# ---------------------------------------------------------------------------------------
# Generation: inputs first, then one operation at a time, each evaluated eagerly on the
# real inputs so that the next one knows the shapes and dtypes it works with.

# Exactness. Rounding may differ between correct implementations (fused kernels do not
# round float16 between ops, may contract a multiply and an add, reorder sums, use other
# math functions), so ops that are discontinuous in a float operand (floor, sign,
# remainder, conversion to an integer or bool, logical ops, comparisons) only take float
# operands that are *exact*: inputs, and results of ops that compute them without
# rounding from exact operands. A float operand that is not exact is compared only with a
# threshold no value of these programs lands on by rounding.
EXACT_OPS = frozenset("""
    neg neg_op abs relu hardtanh relu6 clamp clamp_min clamp_max clamp_min_fn clamp_tensor
    maximum minimum amax amin max_all min_all max_dim where where_scalar_other
    where_scalar_self where_mask masked_fill masked_fill_mask threshold sign floor
    to_float32 to_float64 to_float16 to_bfloat16 to_int64 to_bool float double half bfloat16
    long bool type_as zeros_like ones_like full_like reshape view flatten permute transpose t
    expand expand_as slice select unsqueeze squeeze narrow movedim unbind contiguous clone
    cat stack split chunk copy_ fill_ zero_ setitem setitem_scalar relu_ clamp_ neg_ abs_
    masked_fill_ gt lt ge le eq ne logical_and logical_or logical_xor logical_not
    bitwise_and bitwise_or bitwise_not
""".split())
GENERIC_THRESHOLDS = ("0.3", "-0.7", "1.3", "-2.1", "0.77")


class Generator:
    """The values a program has so far (evaluated eagerly) and the choices made on them."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.env: "collections.OrderedDict[str, object]" = collections.OrderedDict()
        self.recent: Optional[str] = None
        self.inexact: set = set()  # float values that went through rounding
        self.finite_inputs: set = set()  # float inputs whose values are never infinite
        self.inputs: set = set()

    def exact(self, name):
        v = self.env.get(name)
        return not (_is_float(v) and name in self.inexact)

    def threshold(self, *names):
        """A literal to compare the values of `names` with."""
        if all(self.exact(n) for n in names):
            return self.literal()
        return self.rng.choice(GENERIC_THRESHOLDS)

    def near_zero(self, name):
        """A computed float with values at or near zero, where a singular op (division,
        log, rsqrt, negative powers) would turn rounding noise into large differences: an
        inexact one near zero, or an exact one with zeros, whose sign may depend on the
        implementation (eager's clamp gives -0.0 or +0.0 by vector lane)."""
        v = self.env.get(name)
        if not _is_float(v) or v.device.type == "meta":
            return False
        if self.exact(name):
            return name not in self.inputs and bool((v == 0).any())
        m = v.detach().double().abs()
        m = m[m.isfinite()]
        return m.numel() > 0 and m.min().item() <= 1e-4 * max(1.0, m.max().item())

    def large(self, name):
        """An inexact float with values so large that one rounding moves sin or cos of it
        by much (sin(exp(40)))."""
        v = self.env.get(name)
        if not _is_float(v) or self.exact(name) or v.device.type == "meta":
            return False
        m = v.detach().double().abs()
        m = m[m.isfinite()]
        return m.numel() > 0 and m.max().item() > 100

    def note(self, stmt, name, result):
        """Records whether `name` (now `result` of `stmt`) is exact."""
        exact = stmt.op in EXACT_OPS and all(self.exact(a) for a in stmt.args
                                              if a in self.env)
        if _is_float(result) and not exact:
            self.inexact.add(name)
        else:
            self.inexact.discard(name)

    # -- choices ------------------------------------------------------------------------
    def weighted(self, table):
        keys = list(table)
        return self.rng.choices(keys, weights=[table[k] for k in keys])[0]

    def tensors(self, pred=None):
        return [n for n, v in self.env.items()
                if isinstance(v, torch.Tensor) and (pred is None or pred(v))]

    def tensor(self, pred=None, prefer_recent=0.6):
        names = self.tensors(pred)
        if not names:
            return None
        if self.recent in names and self.rng.random() < prefer_recent:
            return self.recent
        return self.rng.choice(names)

    def scalar_vars(self):
        return [n for n, v in self.env.items() if not isinstance(v, torch.Tensor)]

    def literal(self, kind="any"):
        r = self.rng
        if kind == "int" or (kind == "any" and r.random() < 0.3):
            return str(r.choice([0, 1, 2, 3, -1, -2, 5]))
        if kind == "bool" or (kind == "any" and r.random() < 0.03):
            return r.choice(["True", "False"])
        if r.random() < 0.02:
            return r.choice(["float('inf')", "float('-inf')", "float('nan')"])
        return repr(r.choice([0.5, 1.5, -0.25, 2.0, -3.0, 0.1, 1e-3, 10.0, 0.0]))

    def second_operand(self, a):
        """A tensor broadcasting with `a`, `a` itself, a literal or a scalar argument."""
        r = self.rng.random()
        av = self.env[a]
        if r < 0.45:
            fits = self.tensors(lambda v: v is not av and _broadcasts(v.shape, av.shape))
            if fits:
                return "var", self.rng.choice(fits)
        if r < 0.55:
            return "var", a
        if r < 0.62 and self.scalar_vars():
            return "var", self.rng.choice(self.scalar_vars())
        if r < 0.66:
            return "var", self.rng.choice(self.tensors())
        return "lit", self.literal()

    def dims(self, ndim, tags):
        """Reduction dims: one, several or all, some negative; text for `dim=`."""
        if ndim == 0:
            tags.append("reduce:0-d")
            return self.rng.choice(["0", "-1", "()"]) if self.rng.random() < 0.5 else None
        r = self.rng.random()
        if r < 0.5:
            d = self.rng.randrange(ndim)
            tags.append("reduce:one-dim")
            tags.append(f"reduce:dim{d}-of-{ndim}")
            return str(d - ndim if self.rng.random() < 0.3 else d)
        if r < 0.8 and ndim >= 2:
            k = self.rng.randint(2, ndim)
            ds = sorted(self.rng.sample(range(ndim), k))
            tags.append("reduce:all-dims" if k == ndim else "reduce:several-dims")
            return _tuple_text([d - ndim if self.rng.random() < 0.2 else d for d in ds])
        tags.append("reduce:all-dims")
        return None

    # -- inputs -------------------------------------------------------------------------
    def make_inputs(self):
        r = self.rng
        rank = r.choices([0, 1, 2, 3, 4], weights=[4, 16, 36, 30, 14])[0]
        while True:
            base = [r.choice(SIZES) for _ in range(rank)]
            if rank and r.random() < 0.12:
                base[r.randrange(rank)] = r.choice(WIDE_SIZES)
            if rank and r.random() < 0.04:
                base[r.randrange(rank)] = 0
            if math.prod(base) <= MAX_NUMEL // 2:
                break
        specs = []
        for k in range(r.choices([1, 2, 3], weights=[35, 45, 20])[0]):
            name = "abc"[k]
            if k and r.random() < 0.1:
                shape = []
            elif k and r.random() < 0.35:
                # Broadcasts against the base shape: fewer dims, some of size 1.
                shape = base[r.randint(0, rank):]
                shape = [1 if r.random() < 0.3 else s for s in shape]
            else:
                shape = list(base)
            dtype = self.weighted(DTYPE_WEIGHTS)
            if k and r.random() < 0.5:
                dtype = specs[0].dtype
            spec = InputSpec(name, dtype, tuple(shape))
            if dtype in FLOAT_NAMES:
                spec.values = r.choices(VALUE_KINDS, weights=[68, 12, 12, 8])[0]
            self.choose_layout(spec)
            specs.append(spec)
        if r.random() < 0.25:
            kind = r.choice(["float", "float", "int", "bool"])
            specs.append(InputSpec("s", kind, (), scalar=self.literal(kind if kind != "float"
                                                                      else "float")))
        return specs

    def choose_layout(self, spec):
        r = self.rng
        n = len(spec.shape)
        layout = r.choices(LAYOUTS, weights=[55, 15, 12, 6, 12])[0] if n else "contiguous"
        if layout == "permuted" and n >= 2:
            perm = list(range(n))
            while perm == list(range(n)):
                r.shuffle(perm)
            spec.layout, spec.layout_arg = layout, tuple(perm)
        elif layout == "stepped":
            spec.layout = layout
            spec.layout_arg = (r.randrange(n), r.choice([2, 3]), r.choice([0, 0, 1]))
        elif layout == "offset":
            spec.layout, spec.layout_arg = layout, (r.randrange(n),)
        elif layout == "expanded":
            dims = [d for d in range(n) if spec.shape[d] != 1]
            if dims:
                spec.layout = layout
                spec.layout_arg = tuple(sorted(r.sample(dims, r.randint(1, len(dims)))))

    # -- operations ---------------------------------------------------------------------
    def propose(self) -> Optional[Stmt]:
        category = self.weighted(CATEGORY_WEIGHTS)
        return CATEGORIES[category](self)


def _broadcasts(a, b):
    try:
        torch.broadcast_shapes(a, b)
        return True
    except RuntimeError:
        return False


def _is_float(v):
    return isinstance(v, torch.Tensor) and v.is_floating_point()


UNARY = {
    # name: expression; torch.<f>({0}) is written {0}.<f>() in some programs
    "neg": "torch.neg({0})", "exp": "torch.exp({0})", "log": "torch.log({0})",
    "tanh": "torch.tanh({0})", "erf": "torch.erf({0})", "sigmoid": "torch.sigmoid({0})",
    "sqrt": "torch.sqrt({0})", "rsqrt": "torch.rsqrt({0})", "abs": "torch.abs({0})",
    "reciprocal": "torch.reciprocal({0})", "sin": "torch.sin({0})", "cos": "torch.cos({0})",
    "log1p": "torch.log1p({0})", "expm1": "torch.expm1({0})", "relu": "torch.relu({0})",
    "square": "torch.square({0})", "logical_not": "torch.logical_not({0})",
    "neg_op": "-{0}", "gelu": "F.gelu({0})", "gelu_tanh": "F.gelu({0}, approximate='tanh')",
    "silu": "F.silu({0})", "hardsigmoid": "F.hardsigmoid({0})",
    "hardswish": "F.hardswish({0})", "hardtanh": "F.hardtanh({0}, -0.5, 1.5)",
    "relu6": "F.relu6({0})", "leaky_relu": "F.leaky_relu({0}, 0.2)",
    "softplus": "F.softplus({0})", "mish": "F.mish({0})", "elu": "F.elu({0})",
    "logsigmoid": "F.logsigmoid({0})", "threshold": "F.threshold({0}, 0.3, -1.0)",
    # not fused: they run through ATen between kernels
    "sign": "torch.sign({0})", "floor": "torch.floor({0})", "bitwise_not": "~{0}",
}


DISCONTINUOUS_UNARY = ("sign", "floor", "logical_not", "bitwise_not")
SINGULAR_UNARY = ("log", "rsqrt", "reciprocal", "sqrt")
PERIODIC_UNARY = ("sin", "cos")


def gen_unary(g: Generator):
    name = g.rng.choice(list(UNARY))
    a = g.tensor()
    if a is None or (name in DISCONTINUOUS_UNARY and not g.exact(a)):
        return None
    if name in SINGULAR_UNARY and g.near_zero(a):
        return None
    if name in PERIODIC_UNARY and g.large(a):
        return None
    expr = UNARY[name]
    if expr.startswith("torch.") and expr.endswith("({0})") and g.rng.random() < 0.3:
        expr = "{0}." + expr[len("torch."):-len("({0})")] + "()"
    return Stmt(None, expr, [a], name)


BINARY = {
    "add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "div": "{0} / {1}",
    "add_alpha": "torch.add({0}, {1}, alpha=ALPHA)",
    "sub_alpha": "torch.sub({0}, {1}, alpha=ALPHA)",
    "rsub": "torch.rsub({0}, {1})", "maximum": "torch.maximum({0}, {1})",
    "minimum": "torch.minimum({0}, {1})", "radd": "{1} + {0}", "rmul": "{1} * {0}",
    "rdiv": "{1} / {0}",
    # not fused
    "floor_divide": "{0} // {1}", "remainder": "{0} % {1}",
}
POW_EXPONENTS = ("2", "3", "0.5", "-1", "-0.5", "1.7", "0", "1", "-2", "2.0")


def gen_binary(g: Generator):
    name = g.rng.choice(list(BINARY) + ["pow", "pow", "rpow_scalar"])
    a = g.tensor()
    if a is None:
        return None
    if name == "pow":
        e = g.rng.choice(POW_EXPONENTS)
        if float(e) < 1 and g.near_zero(a):
            return None
        expr = g.rng.choice(["torch.pow({0}, E)", "{0} ** E", "{0}.pow(E)"]).replace("E", e)
        return Stmt(None, expr, [a], "pow_scalar")
    if name == "rpow_scalar":  # scalar ** tensor: pow.Scalar, not a primitive
        return Stmt(None, "2.0 ** {0}", [a], name)
    kind, b = g.second_operand(a)
    expr = BINARY[name].replace("ALPHA", g.rng.choice(["2", "-1", "0.5", "3"]))
    if name in ("maximum", "minimum") and kind == "lit":
        return None
    if name in ("floor_divide", "remainder") and not (g.exact(a) and (kind == "lit" or
                                                                      g.exact(b))):
        return None
    if (name == "rdiv" and g.near_zero(a)) or (name == "div" and kind == "var" and
                                               g.near_zero(b)):
        return None
    if kind == "lit":
        return Stmt(None, expr.replace("{1}", b), [a], name)
    return Stmt(None, expr, [a, b], name)


COMPARE = {"gt": ">", "lt": "<", "ge": ">=", "le": "<=", "eq": "==", "ne": "!="}


def gen_compare(g: Generator):
    r = g.rng.random()
    a = g.tensor()
    if a is None:
        return None
    if r < 0.6:
        name = g.rng.choice(list(COMPARE))
        kind, b = g.second_operand(a)
        if not (g.exact(a) and (kind == "lit" or g.exact(b))):
            kind, b = "lit", g.threshold(a)
        elif kind == "var" and not isinstance(g.env[b], torch.Tensor) and not g.exact(a):
            kind, b = "lit", g.threshold(a)
        if g.rng.random() < 0.3:
            expr = f"torch.{name}({{0}}, {{1}})"
        else:
            expr = f"{{0}} {COMPARE[name]} {{1}}"
        if kind == "lit":
            return Stmt(None, expr.replace("{1}", b), [a], name)
        return Stmt(None, expr, [a, b], name)
    name = g.rng.choice(["logical_and", "logical_or", "logical_xor", "bitwise_and",
                         "bitwise_or"])
    kind, b = g.second_operand(a)
    if kind == "lit":
        b = a
    if not (g.exact(a) and g.exact(b)):
        return None
    expr = {"bitwise_and": "{0} & {1}", "bitwise_or": "{0} | {1}"}.get(
        name, f"torch.{name}({{0}}, {{1}})")
    return Stmt(None, expr, [a, b], name)


def gen_select(g: Generator):
    """where, masked_fill and clamp in their tensor and scalar forms."""
    a = g.tensor()
    if a is None:
        return None
    r = g.rng
    name = r.choice(["where", "where_scalar_other", "where_scalar_self", "where_mask",
                     "masked_fill", "masked_fill_mask", "clamp", "clamp_min", "clamp_max",
                     "clamp_tensor", "clamp_min_fn"])
    lo, hi = sorted([r.choice([-1.0, -0.5, 0.0, 0.25, 1.0, 2.0]) for _ in range(2)])
    if r.random() < 0.15:
        lo, hi = hi, lo  # min > max: eager's rule (max wins)
    t = g.threshold(a)
    if name == "where":
        kind, b = g.second_operand(a)
        if kind == "lit":
            return Stmt(None, f"torch.where({{0}} > {t}, {{0}}, {b})", [a], "where_scalar_other")
        return Stmt(None, f"torch.where({{0}} > {t}, {{0}}, {{1}})", [a, b], name)
    if name == "where_scalar_other":
        return Stmt(None, f"torch.where({{0}} < {t}, {{0}}, {g.literal()})", [a], name)
    if name == "where_scalar_self":
        return Stmt(None, f"torch.where({{0}} >= {t}, {g.literal()}, {{0}})", [a], name)
    masks = g.tensors(lambda v: v.dtype == torch.bool)
    if name == "where_mask":
        if not masks:
            return None
        kind, b = g.second_operand(a)
        if kind == "lit":
            return Stmt(None, f"torch.where({{0}}, {{1}}, {b})", [r.choice(masks), a], name)
        return Stmt(None, "torch.where({0}, {1}, {2})", [r.choice(masks), a, b], name)
    if name == "masked_fill":
        return Stmt(None, f"{{0}}.masked_fill({{0}} < {t}, {g.literal()})", [a], name)
    if name == "masked_fill_mask":
        if not masks:
            return None
        return Stmt(None, f"{{0}}.masked_fill({{1}}, {g.literal()})", [a, r.choice(masks)],
                    name)
    if name == "clamp":
        return Stmt(None, f"torch.clamp({{0}}, {lo}, {hi})", [a], name)
    if name == "clamp_min":
        return Stmt(None, f"{{0}}.clamp(min={lo})", [a], name)
    if name == "clamp_max":
        return Stmt(None, f"{{0}}.clamp(max={hi})", [a], name)
    if name == "clamp_min_fn":
        return Stmt(None, f"torch.clamp_min({{0}}, {lo})", [a], name)
    kind, b = g.second_operand(a)
    if kind == "lit":
        return None
    return Stmt(None, r.choice(["torch.clamp({0}, min={1})", "torch.clamp({0}, max={1})",
                                "torch.clamp({0}, {1}, {1})"]), [a, b], name)


def gen_ternary(g: Generator):
    a = g.tensor()
    if a is None:
        return None
    r = g.rng
    name = r.choice(["addcmul", "addcdiv", "lerp", "lerp_tensor"])
    _, b = g.second_operand(a)
    if b not in g.env or not isinstance(g.env[b], torch.Tensor):
        b = a
    if name == "addcmul":
        return Stmt(None, f"torch.addcmul({{0}}, {{1}}, {{1}}, value={r.choice([0.5, -2, 1])})",
                    [a, b], name)
    if name == "addcdiv":
        if g.near_zero(a):
            return None
        return Stmt(None, f"torch.addcdiv({{0}}, {{1}}, {{0}}, value={r.choice([0.5, 2])})",
                    [a, b], name)
    if name == "lerp":
        # Not w <= -0.5: torch 1.13 picks the formula by w < 0.5, 2.x by |w| < 0.5, and the
        # two differ there for infinite inputs.
        return Stmt(None, f"torch.lerp({{0}}, {{1}}, {r.choice([0.25, 0.75, -0.25, 1.5])})",
                    [a, b], name)
    return Stmt(None, "torch.lerp({0}, {1}, torch.sigmoid({1}))", [a, b], name)


CONVERSIONS = {
    "to_float32": "{0}.to(torch.float32)", "to_float64": "{0}.to(torch.float64)",
    "to_float16": "{0}.to(torch.float16)", "to_bfloat16": "{0}.to(torch.bfloat16)",
    "to_int64": "{0}.to(torch.int64)", "to_bool": "{0}.to(torch.bool)",
    "float": "{0}.float()", "double": "{0}.double()", "half": "{0}.half()",
    "bfloat16": "{0}.bfloat16()", "long": "{0}.long()", "bool": "{0}.bool()",
    "type_as": "{0}.type_as({1})",
}


def gen_convert(g: Generator):
    a = g.tensor()
    if a is None:
        return None
    name = g.rng.choice(list(CONVERSIONS))
    if name == "type_as":
        b = g.tensor(prefer_recent=0)
        if not g.exact(a) and not g.env[b].is_floating_point():
            return None
        return Stmt(None, CONVERSIONS[name], [a, b], name)
    if name in ("to_int64", "to_bool", "long", "bool") and not g.exact(a):
        return None
    return Stmt(None, CONVERSIONS[name], [a], name)


def gen_reduction(g: Generator):
    a = g.tensor()
    if a is None:
        return None
    r = g.rng
    ndim = g.env[a].dim()
    name = r.choice(["sum", "sum", "mean", "mean", "amax", "amin", "sum_dtype", "max_all",
                     "min_all", "max_dim", "prod", "std", "var", "var_mean", "logsumexp",
                     "torch_sum"])
    if name in ("max_all", "min_all"):  # aten::max / aten::min: not fused
        return Stmt(None, "{0}.max()" if name == "max_all" else "{0}.min()", [a], name,
                    ["reduce:all-dims"])
    if name in ("max_dim", "prod"):  # not fused either
        d = r.randrange(-ndim, ndim) if ndim else 0
        keep = r.random() < 0.4
        expr = (f"{{0}}.max({d}, keepdim={keep}).values" if name == "max_dim"
                else f"torch.prod({{0}}, {d})")
        return Stmt(None, expr, [a], name, ["reduce:one-dim"])
    tags = []
    dims = g.dims(ndim, tags)
    keep = r.random() < 0.4
    if keep:
        tags.append("keepdim")
    kw = f", keepdim={keep}" if keep or r.random() < 0.3 else ""
    if dims is None:  # all dims: without a dim argument, or every dim listed
        if not kw and name in ("sum", "mean", "amax", "amin", "var", "std", "sum_dtype",
                               "var_mean", "torch_sum") and r.random() < 0.5:
            tags.append("reduce:no-dim-argument")
            return Stmt(None, {
                "sum_dtype": "{0}.sum(dtype=torch.float64)",
                "var": f"{{0}}.var(unbiased={r.random() < 0.5})",
                "std": f"{{0}}.std(unbiased={r.random() < 0.5})",
                "var_mean": "torch.var_mean({0})[0]",  # [1]: see below
                "torch_sum": "torch.sum({0})",
            }.get(name, f"{{0}}.{name}()"), [a], name.replace("torch_", ""), tags)
        dims = _tuple_text(range(ndim)) if ndim else "()"
    if name == "sum_dtype":
        return Stmt(None, f"{{0}}.sum({dims}{kw}, dtype=torch.float64)", [a], name, tags)
    if name == "torch_sum":
        return Stmt(None, f"torch.sum({{0}}, {dims}{kw})", [a], "sum", tags)
    if name == "logsumexp":
        return Stmt(None, f"torch.logsumexp({{0}}, {dims}{kw})", [a], name, tags)
    if name == "var_mean":
        # Eager's mean of var_mean is NaN over infinities (Welford), the fused mean inf; a
        # division by zero makes them, so the mean is only taken of finite inputs.
        which = r.randint(0, 1) if a in g.finite_inputs else 0
        return Stmt(None, f"torch.var_mean({{0}}, {dims}{kw})[{which}]", [a], name, tags)
    if name in ("var", "std"):
        corr = r.choice(["", ", unbiased=False", ", correction=0", ", unbiased=True"])
        return Stmt(None, f"{{0}}.{name}({dims}{corr}{kw})", [a], name, tags)
    return Stmt(None, f"{{0}}.{name}({dims}{kw})", [a], name, tags)


def gen_composite(g: Generator):
    """Normalisations that decompose into reductions with pointwise prologues/epilogues."""
    a = g.tensor()
    if a is None:
        return None
    r = g.rng
    v = g.env[a]
    ndim = v.dim()
    d = r.randrange(-ndim, ndim) if ndim else 0
    name = r.choice(["softmax", "log_softmax", "softmax_F", "log_softmax_F", "layer_norm",
                     "layer_norm_affine", "softmax_dtype", "glu", "normalize"])
    tag = [f"reduce:dim{d % ndim if ndim else 0}-of-{ndim}"]
    if name == "softmax":
        return Stmt(None, f"torch.softmax({{0}}, {d})", [a], name, tag)
    if name == "softmax_F":
        return Stmt(None, f"F.softmax({{0}}, dim={d})", [a], "softmax", tag)
    if name == "softmax_dtype":
        return Stmt(None, f"torch.softmax({{0}}, {d}, dtype=torch.float32)", [a], name, tag)
    if name == "log_softmax":
        return Stmt(None, f"{{0}}.log_softmax({d})", [a], name, tag)
    if name == "log_softmax_F":
        return Stmt(None, f"F.log_softmax({{0}}, dim={d})", [a], "log_softmax", tag)
    if name == "glu":
        return Stmt(None, f"F.glu({{0}}, {d})", [a], name, tag)
    if name == "normalize":
        return Stmt(None, f"F.normalize({{0}}, dim={d})", [a], name, tag)
    k = r.randint(1, max(1, min(ndim, 3)))
    shape = tuple(v.shape[ndim - k:]) if ndim else ()
    if _degenerate_rows(v, k):
        return None
    if name == "layer_norm_affine":
        # Weights of another dtype raise in eager; float32 ones of a half-precision input
        # too in torch 1.13, not in 2.x (nor in the decomposition): left out.
        half = v.dtype in HALF_DTYPES
        weights = g.tensors(lambda t: tuple(t.shape) == shape and
                            not (half and t.dtype == torch.float32))
        if weights:
            w = r.choice(weights)
            return Stmt(None, f"F.layer_norm({{0}}, {_tuple_text(shape)}, {{1}}, {{1}})",
                        [a, w], "layer_norm", ["layer_norm:affine"])
    eps = r.choice(["", ", eps=1e-3"])
    return Stmt(None, f"F.layer_norm({{0}}, {_tuple_text(shape)}{eps})", [a], "layer_norm",
                [f"layer_norm:last-{k}"])


def _degenerate_rows(v, k):
    """Rows (the last k dims) of (almost) constant values, where layer_norm's result is
    rounding noise amplified by 1/sqrt(eps), different for every implementation; for half
    precision, whose rounding is coarser, rows spread by less than 10% count too."""
    if v.device.type == "meta" or not v.is_floating_point() or v.dim() < k or v.numel() == 0:
        return False
    rows = v.detach().double().reshape(-1, math.prod(v.shape[v.dim() - k:]) or 1)
    if rows.shape[1] < 2:
        return True
    var = rows.var(dim=1, unbiased=False)
    mean = rows.mean(dim=1)
    relative = 1e-2 if v.dtype in HALF_DTYPES else 1e-4
    return bool((var < relative * (1 + mean * mean)).any())


def _factors(n):
    return [f for f in range(2, n) if n % f == 0]


def gen_view(g: Generator):
    a = g.tensor()
    if a is None:
        return None
    r = g.rng
    v = g.env[a]
    shape = list(v.shape)
    n = len(shape)
    name = r.choice(["reshape", "view", "flatten", "permute", "transpose", "t", "expand",
                     "slice", "select", "unsqueeze", "squeeze", "narrow", "movedim",
                     "unbind", "contiguous", "clone", "expand_as", "index_none"])
    method = "view" if name == "view" else "reshape"
    if name in ("reshape", "view"):
        choice = r.random()
        if choice < 0.25 or n == 0:
            target = "-1" if r.random() < 0.5 else str(v.numel())
            return Stmt(None, f"{{0}}.{method}({target})", [a], name, ["view:flatten"])
        if choice < 0.5 and n >= 2:
            i = r.randrange(n - 1)
            new = shape[:i] + [shape[i] * shape[i + 1]] + shape[i + 2:]
            return Stmt(None, f"{{0}}.{method}{_tuple_text(new)}", [a], name, ["view:merge"])
        if choice < 0.75:
            dims = [i for i in range(n) if _factors(shape[i])]
            if dims:
                i = r.choice(dims)
                f = r.choice(_factors(shape[i]))
                new = shape[:i] + [f, shape[i] // f] + shape[i + 1:]
                if r.random() < 0.3:
                    new[r.randrange(len(new))] = -1
                return Stmt(None, f"{{0}}.{method}{_tuple_text(new)}", [a], name,
                            ["view:split"])
        new = list(shape)
        new.insert(r.randint(0, n), 1)
        return Stmt(None, f"{{0}}.{method}{_tuple_text(new)}", [a], name, ["view:unit"])
    if name == "flatten":
        if n >= 2 and r.random() < 0.5:
            s = r.randrange(n - 1)
            return Stmt(None, f"{{0}}.flatten({s}, {r.randint(s + 1, n - 1)})", [a], name)
        return Stmt(None, "{0}.flatten()", [a], name)
    if name == "permute" and n >= 2:
        perm = list(range(n))
        r.shuffle(perm)
        return Stmt(None, f"{{0}}.permute{_tuple_text(perm)}", [a], name)
    if name == "transpose" and n >= 2:
        d0, d1 = r.sample(range(n), 2)
        return Stmt(None, f"{{0}}.transpose({d0}, {d1 - n if r.random() < 0.3 else d1})", [a],
                    name)
    if name == "t" and n <= 2:
        return Stmt(None, "{0}.t()", [a], name)
    if name == "expand":
        new = [r.choice([2, 3, 4]) if s == 1 and r.random() < 0.7 else s for s in shape]
        if r.random() < 0.3 or not n:
            new = [r.choice([2, 3])] + new
        if math.prod(new) > MAX_NUMEL:
            return None
        lead = len(new) - n
        for i in range(lead, len(new)):
            if new[i] == shape[i - lead] and r.random() < 0.3:
                new[i] = -1
        return Stmt(None, f"{{0}}.expand{_tuple_text(new)}", [a], name)
    if name == "expand_as":
        targets = g.tensors(lambda t: _broadcasts(v.shape, t.shape) and
                            torch.broadcast_shapes(v.shape, t.shape) == t.shape)
        if targets:
            return Stmt(None, "{0}.expand_as({1})", [a, r.choice(targets)], name)
        return None
    if name in ("slice", "index_none") and n >= 1:
        parts = []
        for s in shape:
            c = r.random()
            if c < 0.4:
                parts.append(":")
            elif c < 0.6:
                parts.append(f"::{r.choice([2, 3])}")
            elif c < 0.75:
                parts.append(f"{r.choice([1, -2])}:")
            elif c < 0.85:
                parts.append(f"{r.choice([0, 1])}:{r.choice([-1, 3])}:{r.choice([1, 2])}")
            elif c < 0.93 and s > 0:
                parts.append(str(r.randrange(-s, s)))
            else:
                parts.append(":")
        if name == "index_none":
            parts.insert(r.randint(0, n), "None")
        tag = "view:step" if any("::" in p or p.count(":") == 2 for p in parts) else "view:slice"
        while parts and parts[-1] == ":" and r.random() < 0.7:
            parts.pop()
        if not parts:
            parts = ["..."]
        return Stmt(None, "{0}[" + ", ".join(parts) + "]", [a], "slice", [tag])
    if name == "select" and n >= 1:
        d = r.randrange(n)
        if shape[d] == 0:
            return None
        return Stmt(None, f"{{0}}.select({d}, {r.randrange(-shape[d], shape[d])})", [a], name)
    if name == "unsqueeze":
        return Stmt(None, f"{{0}}.unsqueeze({r.randint(-n - 1, n)})", [a], name)
    if name == "squeeze":
        ones = [i for i, s in enumerate(shape) if s == 1]
        if ones and r.random() < 0.6:
            return Stmt(None, f"{{0}}.squeeze({r.choice(ones)})", [a], name)
        return Stmt(None, "{0}.squeeze()", [a], name)
    if name == "narrow" and n >= 1:
        d = r.randrange(n)
        if shape[d] < 2:
            return None
        start = r.randrange(shape[d] - 1)
        return Stmt(None, f"{{0}}.narrow({d}, {start}, {r.randint(1, shape[d] - start)})", [a],
                    name)
    if name == "movedim" and n >= 2:
        return Stmt(None, f"{{0}}.movedim({r.randrange(n)}, {r.randrange(n)})", [a], name)
    if name == "unbind" and n >= 1:
        d = r.randrange(n)
        if shape[d] == 0:
            return None
        return Stmt(None, f"{{0}}.unbind({d})[{r.randrange(shape[d])}]", [a], name)
    if name == "contiguous":
        return Stmt(None, "{0}.contiguous()", [a], name)
    if name == "clone":
        return Stmt(None, "{0}.clone()", [a], name)
    return None


def gen_join(g: Generator):
    """cat, stack, split and chunk."""
    a = g.tensor()
    if a is None:
        return None
    r = g.rng
    v = g.env[a]
    n = v.dim()
    name = r.choice(["cat", "stack", "stack", "split", "chunk"])
    if name == "cat":
        if n == 0:
            return None
        d = r.randrange(n)
        fits = g.tensors(lambda t: t.dim() == n and all(
            t.shape[i] == v.shape[i] for i in range(n) if i != d))
        b = r.choice(fits) if fits else a
        return Stmt(None, f"torch.cat([{{0}}, {{1}}], {d - n if r.random() < 0.3 else d})",
                    [a, b], name, [f"cat:dim{d}-of-{n}"])
    if name == "stack":
        d = r.randint(-n - 1, n)
        fits = g.tensors(lambda t: t.shape == v.shape)
        b = r.choice(fits)
        if r.random() < 0.2:
            return Stmt(None, f"torch.stack([{{0}}, {{1}}, {{0}}], {d})", [a, b], name)
        return Stmt(None, f"torch.stack(({{0}}, {{1}}), dim={d})", [a, b], name,
                    [f"stack:dim{d % (n + 1)}-of-{n + 1}"])
    if n == 0:
        return None
    d = r.randrange(n)
    size = v.shape[d]
    if size < 2:
        return None
    if name == "split":
        k = r.randint(1, size - 1)
        return Stmt(None, f"torch.split({{0}}, {k}, dim={d})[{r.randrange(-1, 1)}]", [a], name)
    k = r.randint(2, min(size, 4))
    return Stmt(None, f"{{0}}.chunk({k}, {d})[{r.randrange(0, 2)}]", [a], name)


INPLACE = {
    "add_": "{0}.add_({1})", "mul_": "{0}.mul_({1})", "sub_": "{0}.sub_({1}, alpha=2)",
    "div_": "{0}.div_({1})", "copy_": "{0}.copy_({1})", "clamp_": "{0}.clamp_(-0.5, 0.5)",
    "relu_": "{0}.relu_()", "exp_": "{0}.exp_()", "neg_": "{0}.neg_()",
    "sigmoid_": "{0}.sigmoid_()", "fill_": "{0}.fill_(1.5)", "zero_": "{0}.zero_()",
    "masked_fill_": "{0}.masked_fill_({0} > 0.3, -1)", "abs_": "{0}.abs_()",
    "pow_": "{0}.pow_(2)", "setitem": "{0}[IDX] = {1}", "setitem_scalar": "{0}[IDX] = 2.5",
}


def gen_inplace(g: Generator):
    """In-place updates of inputs, of views of them and of intermediates."""
    a = g.tensor(prefer_recent=0.3)
    if a is None:
        return None
    r = g.rng
    name = r.choice(list(INPLACE))
    expr = INPLACE[name]
    v = g.env[a]
    if "IDX" in expr:
        if v.dim() == 0:
            return None
        d = r.randrange(v.dim())
        expr = expr.replace("IDX", ":, " * d + r.choice(["0", "1:", "::2", "-1"]))
        if "{1}" not in expr:
            return Stmt(None, expr, [a], name, ["inplace"], assign=True)
        kind, b = g.second_operand(a)
        if kind == "lit":
            return Stmt(None, expr.replace("{1}", b), [a], name, ["inplace"], assign=True)
        return Stmt(None, expr, [a, b], name, ["inplace"], assign=True)
    if "{1}" in expr:
        kind, b = g.second_operand(a)
        if kind == "lit":
            return Stmt(None, expr.replace("{1}", b), [a], name, ["inplace"])
        return Stmt(None, expr, [a, b], name, ["inplace"])
    return Stmt(None, expr, [a], name, ["inplace"])


def gen_factory(g: Generator):
    a = g.tensor()
    if a is None:
        return None
    name = g.rng.choice(["zeros_like", "ones_like", "full_like"])
    if name == "full_like":
        return Stmt(None, f"torch.full_like({{0}}, {g.literal()})", [a], name)
    return Stmt(None, f"torch.{name}({{0}})", [a], name)


def gen_matmul(g: Generator):
    """A matmul (extern) between fused prologues and epilogues."""
    a = g.tensor(lambda t: t.dim() >= 2 and t.is_floating_point())
    if a is None:
        return None
    return Stmt(None, g.rng.choice(["{0} @ {0}.transpose(-1, -2)",
                                    "torch.matmul({0}.transpose(-1, -2), {0})"]),
                [a], "matmul")


# Idioms of a few ops in one statement, as models write them: a reduction broadcast back
# over what it reduced, reductions of layout changes and of joined tensors.
IDIOMS = {
    "centre": "{0} - {0}.amax(D, keepdim=True)",
    "centre_mean": "{0} - {0}.mean(D, keepdim=True)",
    "standardise": "({0} - {0}.mean(D, keepdim=True)) / ({0}.std(D, keepdim=True) + 1)",
    "share": "{0} / ({0}.abs().sum(D, keepdim=True) + 1)",
    "rms": "({0} * {0}).mean(D, keepdim=True).add(1e-5).rsqrt() * {0}",
    "softmax_manual": "({0} - {0}.amax(D, keepdim=True)).exp().sum(D)",
    "logsumexp_manual": "({0} - {0}.amax(D, keepdim=True)).exp().sum(D).log()",
    "stack_sum": "torch.stack(({0}, {1})).sum(0)",
    "stack_amax": "torch.stack(({0}, {1}), D).amax(D)",
    "cat_mean": "torch.cat([{0}, {1}], D).mean(D)",
    "transpose_sum": "{0}.transpose(0, -1).sum(D)",
    "step_amin": "{0}[..., ::2].amin(D)",
    "expand_sum": "{0}.unsqueeze(0).expand(3, *{0}.shape).sum(0)",
}


def gen_idiom(g: Generator):
    a = g.tensor()
    if a is None:
        return None
    v = g.env[a]
    if v.dim() == 0:
        return None
    name = g.rng.choice(list(IDIOMS))
    d = g.rng.randrange(-v.dim(), v.dim())
    expr = IDIOMS[name].replace("D", str(d))
    args = [a]
    if "{1}" in expr:
        fits = g.tensors(lambda t: t.shape == v.shape)
        args.append(g.rng.choice(fits))
    if name in ("standardise", "share", "rms") and not g.exact(a):
        return None  # a division by rounding noise when the rows are constant
    return Stmt(None, expr, args, name, [f"reduce:dim{d % v.dim()}-of-{v.dim()}", "idiom"])


CATEGORIES: Dict[str, Callable[[Generator], Optional[Stmt]]] = {
    "unary": gen_unary, "binary": gen_binary, "compare": gen_compare, "select": gen_select,
    "ternary": gen_ternary, "convert": gen_convert, "reduction": gen_reduction,
    "composite": gen_composite, "view": gen_view, "join": gen_join, "inplace": gen_inplace,
    "factory": gen_factory, "matmul": gen_matmul, "idiom": gen_idiom,
}
CATEGORY_WEIGHTS = {"unary": 16, "binary": 16, "compare": 6, "select": 7, "ternary": 3,
                    "convert": 6, "reduction": 18, "composite": 9, "view": 14, "join": 7,
                    "inplace": 5, "factory": 2, "matmul": 1, "idiom": 8}
# How often a program may end with an operation eager rejects (the exception paths).
KEEP_RAISING = 0.03


def _unimplemented_in_eager(exc):
    """ATen of this torch has no CPU kernel of the op for a half-precision dtype."""
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("not implemented for 'Half'" in text or
                                              "not implemented for 'BFloat16'" in text)


HALF_DTYPES = (torch.float16, torch.bfloat16)


def _to_meta(value):
    if not isinstance(value, torch.Tensor):
        return value
    return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta")


class EagerMode(TorchDispatchMode):
    """Eager PyTorch as the reference, with two additions:

    - torch 1.13 has no CPU kernel of most float16 math (exp, softmax, gelu, ...), which
      torch 2.x has and fused kernels compute; such an op runs on float32 copies of its
      half-precision operands and its result is rounded to the dtype its meta kernel gives
      (what the kernels of newer versions do: compute in float32, round once);
    - the dtypes of every ATen result are recorded (the program's precision)."""

    def __init__(self):
        super().__init__()
        self.dtypes = set()
        self.half_fallbacks = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            out = func(*args, **kwargs)
        except RuntimeError as exc:
            if not _unimplemented_in_eager(exc):
                raise
            out = self._in_float32(func, args, kwargs)
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.dtypes.add(t.dtype)
        return out

    def _in_float32(self, func, args, kwargs):
        self.half_fallbacks += 1
        meta = func(*tree_map(_to_meta, args), **tree_map(_to_meta, kwargs))

        def widen(t):
            return t.float() if isinstance(t, torch.Tensor) and t.dtype in HALF_DTYPES else t

        wide_args, wide_kwargs = tree_map(widen, args), tree_map(widen, kwargs)
        out = func(*wide_args, **wide_kwargs)
        written = []
        for i, a in enumerate(func._schema.arguments):  # in-place: write the original
            if a.alias_info is not None and a.alias_info.is_write:
                old = args[i] if i < len(args) else kwargs.get(a.name)
                new = wide_args[i] if i < len(wide_args) else wide_kwargs.get(a.name)
                if isinstance(old, torch.Tensor) and old is not new:
                    old.copy_(new)
                    written.append((new, old))
        flat, spec = tree_flatten(out)
        result = []
        for o, m in zip(flat, tree_flatten(meta)[0]):
            original = [old for new, old in written if o is new]
            if original:
                o = original[0]
            elif isinstance(o, torch.Tensor) and isinstance(m, torch.Tensor):
                o = o.to(m.dtype)
            result.append(o)
        return tree_unflatten(result, spec)


def _evaluate(stmt, env):
    local = dict(env, torch=torch, F=F)
    with EagerMode():
        if stmt.assign:
            exec(stmt.render(), local)
            return local[stmt.args[0]]
        return eval(stmt.render(), local)


def generate(seed, index) -> Program:
    """Program `index` of `seed`: the same on every run and machine with this torch."""
    rng = random.Random(f"fusion-fuzz:{seed}:{index}")
    gen = Generator(rng)
    specs = gen.make_inputs()
    gen.inputs = {spec.name for spec in specs}
    gen.finite_inputs = {spec.name for spec in specs
                         if spec.dtype in FLOAT_NAMES and spec.values in ("normal", "positive")}
    program = Program(seed, index, specs, [], [], generator_seed=rng.randrange(2**31))
    namespace = load(program.inputs_source())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for spec, value in zip(specs, namespace["make_inputs"]()):
            gen.env[spec.name] = value
        count = rng.choices([1, 2, 3, 4, 5], weights=[10, 20, 25, 25, 20])[0]
        ends_raising = False
        while len(program.stmts) < count and not ends_raising:
            for _ in range(30):
                stmt = gen.propose()
                if stmt is None:
                    continue
                try:
                    result = _evaluate(stmt, gen.env)
                except Exception:  # noqa: BLE001 - any error eager raises
                    if rng.random() < KEEP_RAISING:
                        if not stmt.assign:
                            stmt.target = f"v{len(program.stmts)}"
                        program.stmts.append(stmt)
                        ends_raising = True
                        break
                    else:
                        continue
                if not isinstance(result, torch.Tensor) or result.numel() > MAX_NUMEL:
                    continue
                if not stmt.assign:
                    stmt.target = f"v{len(program.stmts)}"
                name = stmt.target or stmt.args[0]
                gen.env[name] = result
                gen.note(stmt, name, result)
                gen.recent = name
                program.stmts.append(stmt)
                break
            else:
                break
    if not program.stmts:
        program.stmts.append(Stmt("v0", "{0} + 1", [specs[0].name], "add"))
    # Returned: the last value and up to two others nothing reads (so that little is dead).
    last = program.stmts[-1]
    program.outputs = [last.target or last.args[0]]
    read = {a for s in program.stmts for a in s.args}
    sinks = [s.target for s in program.stmts[:-1] if s.target and s.target not in read]
    program.outputs = rng.sample(sinks, min(len(sinks), 2)) + program.outputs
    return program


# ---------------------------------------------------------------------------------------
# Running and comparing.

@dataclasses.dataclass
class Outcome:
    value: object = None
    exc: Optional[BaseException] = None
    inputs: List[object] = dataclasses.field(default_factory=list)
    precision: torch.dtype = torch.float64  # least precise float dtype computed in
    scale: float = 1.0  # largest finite magnitude of the float inputs, at least 1
    half_fallbacks: int = 0  # ops run in float32 for want of a half-precision kernel

    def raised(self):
        return self.exc is not None


PRECISION_ORDER = (torch.bfloat16, torch.float16, torch.float32, torch.float64)
# Relative perturbation of the inputs of the float64 runs: about two roundings; the
# number of perturbed runs (where the result is periodic in a large argument, each moves
# it by a random amount).
PERTURBED_RUNS = 4
PERTURBATION = {torch.bfloat16: 8e-3, torch.float16: 1e-3, torch.float32: 2.5e-7,
                torch.float64: 5e-16}


def least_precise(dtypes):
    for dtype in PRECISION_ORDER:
        if dtype in dtypes:
            return dtype
    return torch.float64


def run_eager(source, float64=False, perturb=None, seed=None, record=True) -> Outcome:
    """Runs the program eagerly (in float64 with float64=True, inputs converted). Plain
    eager PyTorch is the reference; only where it has no half-precision kernel does the
    program run again under EagerMode (a Python dispatch mode, which is not exactly plain
    eager: in torch 1.13, `bool_tensor % True` raises without it and not within it).
    Another run under EagerMode (with `record`) records the dtypes the program computes
    in. `perturb`:
    (seed, delta), float inputs multiplied by 1 + delta * uniform(-1, 1). `seed`: the
    inputs' (default: the program's)."""
    namespace = load(source)

    def make_inputs():
        return namespace["make_inputs"]() if seed is None else namespace["make_inputs"](seed)

    def call(mode=None):
        inputs = make_inputs()
        if float64:
            inputs = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point()
                      else x for x in inputs]
        if perturb is not None:
            g = torch.Generator().manual_seed(perturb[0])
            inputs = [x * (1 + perturb[1] * (2 * torch.rand(x.shape, generator=g,
                                                             dtype=x.dtype).to(x.device) - 1))
                      if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                      for x in inputs]
        outcome = Outcome(inputs=inputs)
        default = torch.get_default_dtype()
        if float64:
            torch.set_default_dtype(torch.float64)
        try:
            if mode is None:
                outcome.value = namespace["f"](*inputs)
            else:
                with mode:
                    outcome.value = namespace["f"](*inputs)
        except Exception as exc:  # noqa: BLE001
            outcome.exc = exc
        finally:
            torch.set_default_dtype(default)
        return outcome

    outcome = call()
    recorder = EagerMode()
    if record or (outcome.raised() and _unimplemented_in_eager(outcome.exc)):
        recorded = call(recorder)
        if outcome.raised() and _unimplemented_in_eager(outcome.exc):
            outcome = recorded
            outcome.half_fallbacks = recorder.half_fallbacks
    floats = [x for x in make_inputs() if isinstance(x, torch.Tensor) and x.is_floating_point()]
    for x in floats:
        m = x.detach().double().abs()
        m = m[m.isfinite()]
        if m.numel():
            outcome.scale = max(outcome.scale, m.max().item())
    outcome.precision = least_precise(recorder.dtypes | {x.dtype for x in floats})
    return outcome


def _leaves(value):
    if isinstance(value, (tuple, list)):
        out = []
        for v in value:
            out += _leaves(v)
        return out
    return [value]


def _distance(x, y):
    """|x - y| elementwise in float64, 0 where both are NaN or equal infinities, inf where
    only one is NaN."""
    d = (x - y).abs()
    nan_x, nan_y = x.isnan(), y.isnan()
    d = torch.where((nan_x & nan_y) | (x == y), torch.zeros_like(d), d)
    return torch.where(nan_x ^ nan_y, torch.full_like(d, math.inf), d)


def _tolerance(dtype, values, scale):
    rtol, atol = TOLERANCES.get(dtype, (0.0, 0.0))
    finite = torch.where(values.isfinite(), values.abs(), torch.zeros_like(values))
    return atol * scale + rtol * finite


def compare_tensor(actual, expected, references, what, precision=torch.float64, scale=1.0):
    """None when `actual` passes against `expected` (see TOLERANCES), else a message.
    `references`: the float64 results, exact inputs first, then perturbed ones (may be
    empty); `precision`: the least precise float dtype the program computed in; `scale`:
    the magnitude of its inputs."""
    if actual.dtype != expected.dtype:
        return f"{what}: dtype {actual.dtype}, eager {expected.dtype}"
    if actual.shape != expected.shape:
        return f"{what}: shape {tuple(actual.shape)}, eager {tuple(expected.shape)}"
    if torch.equal(actual, expected):
        return None
    tolerance_dtype = actual.dtype
    if actual.is_floating_point():
        tolerance_dtype = least_precise({actual.dtype, precision})
    c = actual.detach().to(torch.float64)
    e = expected.detach().to(torch.float64)
    finite = e[e.isfinite()]
    scale = max(scale, finite.abs().max().item() if finite.numel() else 1.0, 1.0)
    tolerance = _tolerance(tolerance_dtype, e, scale)
    bad = _distance(c, e) > tolerance
    references = [r.detach().to(torch.float64) for r in references
                  if isinstance(r, torch.Tensor) and r.shape == expected.shape]
    if bad.any() and references:
        r = references[0]
        bad &= _distance(c, r) > 2 * _distance(e, r) + _tolerance(tolerance_dtype, r, scale)
        if bad.any() and len(references) > 1:
            spread = torch.stack([_distance(p, r) for p in references[1:]]).amax(0)
            bad &= _distance(c, e) > 3 * spread + tolerance
    if not bad.any():
        return None
    at = tuple(bad.nonzero()[0].tolist())
    return (f"{what}: {int(bad.sum())} of {bad.numel()} elements differ; at {at}: "
            f"compiled {c[at].item()!r}, eager {e[at].item()!r}")


def compare_results(actual, expected, references=(), what="result", **tolerance):
    """compare_tensor over the tensors of two results of the same structure."""
    a, e = _leaves(actual), _leaves(expected)
    refs = [_leaves(r) for r in references]
    refs = [r for r in refs if len(r) == len(e)]
    if len(a) != len(e):
        return f"{what}: {len(a)} values, eager {len(e)}"
    for i, (x, y) in enumerate(zip(a, e)):
        z = [r[i] for r in refs]
        name = what if len(e) == 1 else f"{what}[{i}]"
        if isinstance(y, torch.Tensor):
            if not isinstance(x, torch.Tensor):
                return f"{name}: {type(x).__name__}, eager a tensor"
            problem = compare_tensor(x, y, z, name, **tolerance)
            if problem:
                return problem
        elif x != y and not (isinstance(x, float) and math.isnan(x) and math.isnan(y)):
            return f"{name}: {x!r}, eager {y!r}"
    return None


@dataclasses.dataclass
class Failure:
    kind: str  # what went wrong, compared between candidates when minimising
    message: str
    program: Program
    backend: str
    call: int = 0

    def report(self):
        return (f"fusion fuzz failure (backend {self.backend!r}, seed {self.program.seed}, "
                f"program {self.program.index}, call {self.call + 1}): {self.message}\n"
                f"reproduce: python3 fuzz/fusion_fuzz.py --seed {self.program.seed} "
                f"--index {self.program.index} --backend {self.backend}\n\n"
                + repro_source(self.program, self.backend, self.call))


def repro_source(program, backend, call=0):
    """The program as a script comparing eager and compiled; a failure of a later call
    repeats the calls before it (other input values of the same shapes)."""
    head = ("import torch\nimport torch.nn.functional as F\n\nimport dynvm\n\n\n"
            + program.source() + "\n\n")
    tail = "print('eager:   ', expected)\nprint('compiled:', actual)\n"
    if call == 0:
        return head + ("expected = f(*make_inputs())\n"
                       f"actual = dynvm.compile(f, backend={backend!r})(*make_inputs())\n"
                       + tail)
    seeds = ", ".join(str(program.generator_seed + k) for k in range(call + 1))
    return head + (f"compiled = dynvm.compile(f, backend={backend!r})\n"
                   f"for seed in ({seeds}):\n"
                   "    expected = f(*make_inputs(seed))\n"
                   "    actual = compiled(*make_inputs(seed))\n" + tail)


@dataclasses.dataclass
class RunInfo:
    kernels: int = 0
    graph_breaks: int = 0
    graph_failures: int = 0
    glue_runs: int = 0
    eager_raised: bool = False
    eager_half_fallbacks: int = 0  # ops the reference ran in float32 (no half kernel)


def check(program, backend, calls=4, compile_fn=None) -> Tuple[Optional[Failure], RunInfo]:
    """Runs `program` compiled `calls` times, on inputs of the same shapes, dtypes and
    layouts but new values each time (the first call traces and compiles, later ones hit
    the cache, the fourth runs the native glue), and each time eagerly on the same inputs;
    compares results, mutated inputs and exceptions."""
    import dynvm

    info = RunInfo()
    source = program.source()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dynvm.reset()
        namespace = load(source)
        compiled = (compile_fn or (lambda f: dynvm.compile(f, backend=backend)))(namespace["f"])
        failure = None
        recorded = {}

        def precision():
            """The least precise float dtype the program computes in (a recorded run)."""
            if "precision" not in recorded:
                recorded["precision"] = run_eager(source).precision
            return recorded["precision"]

        for call in range(calls):
            seed = program.generator_seed + call
            failure = _check_call(program, call, seed, namespace, compiled, backend, info,
                                  precision)
            if failure is not None:
                break
        counters = dict(dynvm.counters)
    info.kernels = counters.get("kernels", 0)
    info.graph_breaks = counters.get("graph_breaks", 0)
    info.graph_failures = counters.get("graph_failures", 0)
    info.glue_runs = counters.get("glue_runs", 0)
    return failure, info


def _check_call(program, call, seed, namespace, compiled, backend, info, precision):
    """One compiled call against eager on the inputs of `seed`: a Failure or None.
    Results are first compared with the tolerance of the dtypes of the inputs and results
    alone, which is strictest; only what fails that is compared again with the
    tolerance of the program's precision() (recording dtypes costs a dispatch mode run)
    and the float64 references."""
    expected = run_eager(program.source(), seed=seed, record=False)
    info.eager_raised |= expected.raised()
    info.eager_half_fallbacks += expected.half_fallbacks
    references = None

    def get_references():
        """The program in float64: on the inputs, then PERTURBED_RUNS times on inputs
        perturbed by about the rounding of its least precise dtype (how much rounding can
        move each result: a large spread marks an ill-conditioned element)."""
        nonlocal references
        if references is None:
            source64 = program.inputs_source() + "\n\n" + float64_body(program.body_source())
            delta = PERTURBATION[precision()]
            runs = [run_eager(source64, float64=True, seed=seed, record=False)]
            runs += [run_eager(source64, float64=True, perturb=(k, delta), seed=seed,
                               record=False) for k in range(1, PERTURBED_RUNS + 1)]
            references = [] if runs[0].raised() else [r for r in runs if not r.raised()]
        return references

    inputs = namespace["make_inputs"](seed)
    try:
        value, exc = compiled(*inputs), None
    except Exception as e:  # noqa: BLE001
        value, exc = None, e

    def fail(kind, message):
        return Failure(kind, message, program, backend, call)

    if expected.raised():
        if exc is None:
            return fail("no-exception", f"eager raised {type(expected.exc).__name__}: "
                        f"{_first_line(expected.exc)}; compiled returned")
        if type(exc) is not type(expected.exc):
            return fail("exception", f"compiled raised {type(exc).__name__}: "
                        f"{_first_line(exc)}; eager raised {type(expected.exc).__name__}: "
                        f"{_first_line(expected.exc)}")
        return None
    if exc is not None:
        if _unimplemented_in_eager(exc) and expected.half_fallbacks:
            return None  # ATen ran an op eager's reference had to compute in float32
        return fail("raised", f"compiled raised {type(exc).__name__}: {_first_line(exc)}\n"
                    f"{_short_traceback(exc)}")

    def compare(actual, wanted, what, float64_runs):
        strict = dict(precision=expected.precision, scale=expected.scale)
        problem = compare_results(actual, wanted, (), what, **strict)
        if problem:
            loose = dict(precision=precision(), scale=expected.scale)
            problem = compare_results(actual, wanted, float64_runs(), what, **loose)
        return problem

    kind = "mismatch"
    problem = compare(value, expected.value, "result",
                      lambda: [r.value for r in get_references()])
    if problem is None:
        kind = "mutation"
        problem = compare(inputs, expected.inputs, "input after call",
                          lambda: [r.inputs for r in get_references()])
    if problem is None:
        return None
    if "dtype" in problem or "shape" in problem:
        kind = "metadata"
    return fail(kind, problem)


def _first_line(exc):
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else ""


def _short_traceback(exc):
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-3:])


# ---------------------------------------------------------------------------------------
# Minimisation: greedy passes, each candidate kept when it still fails the same way.

def _candidates(program: Program):
    # Fewer outputs.
    for i in range(len(program.outputs)):
        if len(program.outputs) > 1:
            p = program.copy()
            del p.outputs[i]
            yield p
    # Drop a statement, its uses replaced by one of its operands.
    for i in reversed(range(len(program.stmts))):
        stmt = program.stmts[i]
        produced = stmt.target
        replacements = [a for a in dict.fromkeys(stmt.args) if a != produced] or [None]
        for rep in replacements:
            p = program.copy()
            del p.stmts[i]
            if produced is not None:
                if rep is None:
                    continue
                for s in p.stmts[i:]:
                    s.args = [rep if x == produced else x for x in s.args]
                p.outputs = list(dict.fromkeys(rep if x == produced else x for x in p.outputs))
            if p.stmts:
                yield p
    # Unused inputs.
    used = {a for s in program.stmts for a in s.args} | set(program.outputs)
    for i, spec in enumerate(program.inputs):
        if spec.name not in used:
            p = program.copy()
            del p.inputs[i]
            yield p
    # Simpler inputs.
    for i, spec in enumerate(program.inputs):
        if not spec.is_tensor():
            continue
        if spec.layout != "contiguous":
            p = program.copy()
            p.inputs[i].layout, p.inputs[i].layout_arg = "contiguous", ()
            yield p
        if spec.values != "normal":
            p = program.copy()
            p.inputs[i].values = "normal"
            yield p
        if spec.dtype != "float32" and spec.dtype in FLOAT_NAMES:
            p = program.copy()
            p.inputs[i].dtype = "float32"
            yield p
    # Smaller sizes, changed together in every input that has the size at that position
    # (counted from the right, as broadcasting aligns).
    seen = set()
    for spec in program.inputs:
        for pos in range(1, len(spec.shape) + 1):
            size = spec.shape[-pos]
            for new in (1, 2, 3, size // 2):
                if new >= size or new < 1 or (pos, size, new) in seen:
                    continue
                seen.add((pos, size, new))
                p = program.copy()
                for s in p.inputs:
                    if s.is_tensor() and len(s.shape) >= pos and s.shape[-pos] == size:
                        shape = list(s.shape)
                        shape[-pos] = new
                        s.shape = tuple(shape)
                        if s.layout == "expanded" and new == 1:
                            s.layout_arg = tuple(d for d in s.layout_arg
                                                 if d != len(shape) - pos)
                            if not s.layout_arg:
                                s.layout = "contiguous"
                yield p


def _live(program: Program) -> Program:
    """Removes statements nothing returned depends on (in-place ones are kept)."""
    p = program.copy()
    needed = set(p.outputs)
    keep = []
    for stmt in reversed(p.stmts):
        if stmt.target is None or stmt.target in needed or "inplace" in stmt.tags:
            keep.append(stmt)
            needed.update(stmt.args)
    p.stmts = list(reversed(keep))
    return p


def minimise(failure: Failure, calls=4, compile_fn=None, budget_s=120.0) -> Failure:
    deadline = time.monotonic() + budget_s
    best = failure

    def still_fails(candidate):
        try:
            f, _ = check(candidate, failure.backend, calls, compile_fn)
        except Exception:  # noqa: BLE001 - a candidate the fuzzer cannot even run
            return None
        return f if f is not None and f.kind == failure.kind else None

    live = _live(best.program)
    if len(live.stmts) < len(best.program.stmts):
        f = still_fails(live)
        if f:
            best = f
    improved = True
    while improved and time.monotonic() < deadline:
        improved = False
        for candidate in _candidates(best.program):
            if time.monotonic() > deadline:
                break
            candidate = _live(candidate)
            f = still_fails(candidate)
            if f:
                best = f
                improved = True
                break
    renamed = _renumbered(best.program)
    if renamed.source() != best.program.source():
        f = still_fails(renamed)
        if f:
            best = f
    return best


def _renumbered(program: Program) -> Program:
    """The same program with its values named v0, v1, ... again."""
    p = program.copy()
    names = {}
    for stmt in p.stmts:
        stmt.args = [names.get(a, a) for a in stmt.args]
        if stmt.target is not None:
            names[stmt.target] = stmt.target = f"v{len(names)}"
    p.outputs = [names.get(o, o) for o in p.outputs]
    return p


# ---------------------------------------------------------------------------------------
# Campaigns.

@dataclasses.dataclass
class Summary:
    programs: int = 0
    runs: int = 0
    seconds: float = 0.0
    failures: List[Failure] = dataclasses.field(default_factory=list)
    ops: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    dtypes: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    ranks: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    layouts: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    tags: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    outcomes: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    def record(self, program, backend, info):
        self.runs += 1
        self.ops.update(program.ops())
        for spec in program.inputs:
            self.dtypes[spec.dtype if spec.is_tensor() else "python " + spec.dtype] += 1
            if spec.is_tensor():
                self.ranks[len(spec.shape)] += 1
                self.layouts[spec.layout] += 1
                if 0 in spec.shape:
                    self.tags["input:size-0"] += 1
                if 1 in spec.shape:
                    self.tags["input:size-1"] += 1
                if spec.values != "normal":
                    self.tags[f"values:{spec.values}"] += 1
        for stmt in program.stmts:
            self.tags.update(stmt.tags)
        self.outcomes[f"{backend}: programs"] += 1
        if info.kernels:
            self.outcomes[f"{backend}: with kernels"] += 1
        self.outcomes[f"{backend}: kernels"] += info.kernels
        if info.graph_breaks:
            self.outcomes[f"{backend}: with graph breaks"] += 1
        if info.graph_failures:
            self.outcomes[f"{backend}: with graph failures"] += 1
        if info.glue_runs:
            self.outcomes[f"{backend}: native glue ran"] += 1
        if info.eager_raised:
            self.outcomes["eager raised"] += 1
        if info.eager_half_fallbacks:
            self.outcomes["eager ran half-precision ops in float32"] += 1

    COUNTERS = ("ops", "dtypes", "ranks", "layouts", "tags", "outcomes")

    def to_json(self):
        data = {name: dict(getattr(self, name)) for name in self.COUNTERS}
        data["ranks"] = {str(k): v for k, v in self.ranks.items()}
        data.update(programs=self.programs, runs=self.runs,
                    failures=[f.report() for f in self.failures])
        return data

    def merge_json(self, data):
        """Adds the counts of a worker's summary (to_json) to this one."""
        self.programs += data["programs"]
        self.runs += data["runs"]
        self.failures += [ReportedFailure(text) for text in data["failures"]]
        for name in self.COUNTERS:
            counts = data[name]
            if name == "ranks":
                counts = {int(k): v for k, v in counts.items()}
            getattr(self, name).update(counts)

    def text(self):
        def line(title, counter, limit=None):
            items = counter.most_common(limit)
            return f"{title} ({len(counter)}): " + ", ".join(f"{k} {v}" for k, v in items)

        rate = self.programs / self.seconds if self.seconds else 0.0
        lines = [f"{self.programs} programs, {self.runs} compiled runs in {self.seconds:.1f} s "
                 f"({rate:.1f} programs/s), {len(self.failures)} failures",
                 line("ops", self.ops), line("input dtypes", self.dtypes),
                 line("input ranks", self.ranks), line("layouts", self.layouts),
                 line("dims and shapes", self.tags), line("outcomes", self.outcomes)]
        return "\n".join(lines)


def run_campaign(seed, backends, start=0, count=None, seconds=None, calls=4,
                 minimise_failures=True, max_failures=20, log=None, crash_file=None,
                 minimise_budget_s=120.0) -> Summary:
    """Runs programs start, start+1, ... of `seed` until `count` ran or `seconds` passed."""
    summary = Summary()
    began = time.monotonic()
    last_log = began
    index = start
    kinds_seen = collections.Counter()
    while True:
        if count is not None and index >= start + count:
            break
        if seconds is not None and time.monotonic() - began >= seconds:
            break
        program = generate(seed, index)
        for backend in backends:
            if crash_file:
                with open(crash_file, "w") as out:
                    out.write(f"# seed {seed}, program {index}, backend {backend}\n")
                    out.write(repro_source(program, backend))
            failure, info = check(program, backend, calls)
            summary.record(program, backend, info)
            if failure is not None:
                kinds_seen[failure.kind] += 1
                if minimise_failures:
                    failure = minimise(failure, calls, budget_s=minimise_budget_s)
                summary.failures.append(failure)
                if log:
                    log(failure.report())
        summary.programs += 1
        index += 1
        if len(summary.failures) >= max_failures:
            break
        if log and time.monotonic() - last_log > 30:
            last_log = time.monotonic()
            elapsed = last_log - began
            log(f"[{elapsed:.0f} s] {summary.programs} programs, up to {index - 1} "
                f"({summary.programs / elapsed:.1f}/s), {len(summary.failures)} failures, "
                f"max RSS {_max_rss_mb():.0f} MB")
    summary.seconds = time.monotonic() - began
    return summary


@dataclasses.dataclass
class ReportedFailure:
    """A failure as a worker process reported it, or a worker that died."""
    text: str

    def report(self):
        return self.text


def run_in_workers(args, backends, seconds, log) -> Summary:
    """Runs the campaign in a sequence of worker processes of `args.chunk` programs each
    (kernels are never unloaded, so one process would keep growing). A worker that dies
    (a crash in compiled code, a kill) is reported with the program it was running, and
    the next worker starts after that program."""
    summary = Summary()
    began = time.monotonic()
    index = args.start
    end = None if args.count is None else args.start + args.count
    while len(summary.failures) < args.max_failures:
        left_s = None if seconds is None else seconds - (time.monotonic() - began)
        if (left_s is not None and left_s <= 1) or (end is not None and index >= end):
            break
        count = args.chunk if end is None else min(args.chunk, end - index)
        out = os.path.join(tempfile.gettempdir(), f"fusion_fuzz_worker_{os.getpid()}.json")
        if os.path.exists(out):
            os.remove(out)
        command = [sys.executable, os.path.abspath(__file__), "--seed", str(args.seed),
                   "--start", str(index), "--count", str(count), "--backend", args.backend,
                   "--calls", str(args.calls), "--chunk", "0", "--worker-out", out,
                   "--device", DEVICE,
                   "--max-failures", str(args.max_failures - len(summary.failures))]
        if left_s is not None:
            command += ["--seconds", str(left_s)]
        if args.no_minimise:
            command.append("--no-minimise")
        worker = subprocess.Popen(command)
        code = worker.wait()
        if os.path.exists(out):
            with open(out) as f:
                data = json.load(f)
            os.remove(out)
            summary.merge_json(data)
            index += data["programs"]
            continue
        current = os.path.join(tempfile.gettempdir(), f"fusion_fuzz_current_{worker.pid}.py")
        try:
            with open(current) as f:
                program = f.read()
            os.remove(current)
            header = program.splitlines()[0]  # "# seed S, program I, backend B"
            crashed = int(header.split("program ")[1].split(",")[0])
        except (OSError, IndexError, ValueError):
            program, crashed = "(the worker had not started a program)", index
        report = (f"fusion fuzz failure: the worker process died (exit code {code}) running "
                  f"program {crashed} of seed {args.seed}:\n\n{program}")
        log(report)
        summary.failures.append(ReportedFailure(report))
        summary.programs += crashed - index + 1
        index = crashed + 1
    summary.seconds = time.monotonic() - began
    return summary


def _max_rss_mb():
    try:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    except ImportError:
        return 0.0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--device", default="cpu",
                        help="the device the programs' input tensors are on (cpu, cuda)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="run for this long (default: 60 unless --count is given)")
    parser.add_argument("--count", type=int, default=None, help="run this many programs")
    parser.add_argument("--start", type=int, default=0, help="first program index")
    parser.add_argument("--index", type=int, default=None,
                        help="check only this program (with --print: print it)")
    parser.add_argument("--backend", choices=["dynvm", "eager", "both"], default="both")
    parser.add_argument("--calls", type=int, default=4,
                        help="compiled calls per program (the 4th runs the native glue)")
    parser.add_argument("--print", action="store_true", help="print the program and stop")
    parser.add_argument("--no-minimise", action="store_true")
    parser.add_argument("--max-failures", type=int, default=20)
    parser.add_argument("--chunk", type=int, default=2000,
                        help="programs per worker process (0: all in this process)")
    parser.add_argument("--worker-out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    global DEVICE
    DEVICE = args.device
    backends = ["dynvm", "eager"] if args.backend == "both" else [args.backend]

    def log(text):
        print(text, flush=True)

    if args.index is not None:
        program = generate(args.seed, args.index)
        if args.print:
            print(repro_source(program, backends[0]))
            return 0
        status = 0
        for backend in backends:
            failure, info = check(program, backend, args.calls)
            if failure:
                if not args.no_minimise:
                    failure = minimise(failure, args.calls)
                print(failure.report())
                status = 1
            else:
                print(f"backend {backend}: pass ({info})")
        return status
    seconds = args.seconds if args.seconds is not None or args.count is not None else 60
    if args.worker_out is None:
        log(f"fusion fuzz: seed {args.seed}, backends {', '.join(backends)}, "
            f"{'%g s' % seconds if seconds else '%d programs' % args.count}"
            + (f", {args.chunk} programs per worker process" if args.chunk else ""))
    if args.chunk and args.worker_out is None:
        summary = run_in_workers(args, backends, seconds, log)
        log(summary.text())
        return 1 if summary.failures else 0
    # The program being run is written here first: a crash leaves it behind.
    crash_file = os.path.join(tempfile.gettempdir(), f"fusion_fuzz_current_{os.getpid()}.py")
    summary = run_campaign(args.seed, backends, start=args.start, count=args.count,
                           seconds=seconds, calls=args.calls,
                           minimise_failures=not args.no_minimise,
                           max_failures=args.max_failures, log=log, crash_file=crash_file)
    if args.worker_out is not None:
        with open(args.worker_out, "w") as f:
            json.dump(summary.to_json(), f)
    else:
        log(summary.text())
    try:
        os.remove(crash_file)
    except OSError:
        pass
    return 1 if summary.failures else 0


if __name__ == "__main__":
    sys.exit(main())
