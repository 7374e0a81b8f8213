"""Symbolic sizes while tracing (dynamic shapes, docs/dynamic_shapes.md).

A trace asked to keep some dimensions of its input tensors dynamic gives their fakes
symbolic sizes: torch's ShapeEnv makes one symbol per such dimension, and the fake mode's
meta kernels propagate expressions over them. Python arithmetic on `x.size(1)` stays
symbolic; a branch on a symbolic comparison records a guard in the ShapeEnv. This module
names the symbols as dynvm's graph IR does (s0, s1, ... in the order they were made),
writes torch's expressions in that IR's text form (graph/sym_expr.h), and turns the
ShapeEnv's guards into relations the runtime checks on every call.

Sizes 0 and 1 are never symbolic (broadcasting depends on them): such a dimension keeps
its fixed size, and a symbol's value is at least 2, which the runtime checks too.
"""
import dataclasses

import torch
from torch._guards import GuardSource, Source
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv


class Untranslatable(RuntimeError):
    """An expression or guard of the ShapeEnv that dynvm's expressions cannot write (Max,
    Min, a non-integer division): the trace falls back to fixed sizes."""


class _Name(str):
    """A source's name: torch reads `source.name` as a property in some versions and calls
    `source.name()` in others; this string answers both."""

    def __call__(self):
        return str(self)


@dataclasses.dataclass(frozen=True)
class SizeSource(Source):
    """Where a symbol's value comes from: a guard source's text and a dimension."""
    text: str

    @property
    def name(self):
        return _Name(self.text)

    def guard_source(self):
        return GuardSource.LOCAL


def _sympy():
    import sympy
    return sympy


def _functions():
    from torch.utils._sympy import functions
    return functions


def _convolutions():
    aten = torch.ops.aten
    return (aten.convolution.default, aten._convolution.default)


def _contiguous_without_guards(t):
    """Whether `t`'s strides are the contiguous ones of its sizes, compared as expressions
    (asking the tensor would guard on its symbolic sizes)."""
    sympy = _sympy()

    def expr(v):
        return v.node.expr if isinstance(v, torch.SymInt) else sympy.Integer(v)

    expected = sympy.Integer(1)
    for size, stride in reversed(list(zip(t.shape, t.stride()))):
        size = expr(size)
        if size != 1 and expr(stride) != expected:
            return False
        expected = expected * size
    return True


class SymbolTable:
    """The symbols of one trace and the ShapeEnv that propagates them."""

    def __init__(self):
        self.shape_env = ShapeEnv(duck_shape=False)
        self.symbols = []   # (sympy symbol, source text, hint), in dynvm's numbering
        self._ids = {}      # sympy symbol -> dynvm id

    def symbolic_fake(self, fake_mode, tensor, dims, source_text):
        """A fake of `tensor` whose sizes in `dims` are new symbols (sizes 0 and 1 stay
        fixed); strides follow the sizes when the tensor is contiguous, else stay fixed,
        which the runtime checks like any fixed stride."""
        sizes = list(tensor.shape)
        symbolic = []
        static = getattr(tensor, "_dynvm_static_dims", ())   # dynvm.mark_static
        ranges = getattr(tensor, "_dynvm_dynamic_ranges", {})  # dynvm.mark_dynamic's bounds
        for d in range(tensor.dim()):
            if d in dims and d not in static and sizes[d] >= 2:
                text = f"{source_text}.size()[{d}]"
                sym = self.shape_env.create_symbol(sizes[d], SizeSource(text),
                                                   dynamic_dim=DimDynamic.DYNAMIC)
                self._ids[sym] = len(self.symbols)
                self.symbols.append((sym, text, sizes[d]))
                sizes[d] = self.shape_env.create_symintnode(sym, hint=sizes[d],
                                                            source=SizeSource(text))
                low, high = ranges.get(d, (None, None))
                # Branches on the bounds: the ShapeEnv guards the side this size is on.
                if low is not None:
                    bool(sizes[d] >= low)
                if high is not None:
                    bool(sizes[d] <= high)
                symbolic.append(d)
        if not symbolic:
            return None
        if tensor.is_contiguous():
            strides = [1] * tensor.dim()
            for d in range(tensor.dim() - 2, -1, -1):
                strides[d] = strides[d + 1] * sizes[d + 1] if tensor.shape[d + 1] > 1 \
                    else strides[d + 1]
        else:
            strides = list(tensor.stride())
        with fake_mode:
            fake = torch.empty_strided(sizes, strides, dtype=tensor.dtype, device=tensor.device,
                                       requires_grad=tensor.requires_grad)
        return fake

    def unguarded_conv_backend(self, func, args, kwargs):
        """A context for one operator call: for a convolution whose input and weight are
        both contiguous, the fake kernel's choice of a convolution backend records no
        guard. That choice (mkldnn from batch 16 on the CPU, say) only decides the output's
        memory format, and with contiguous operands every backend's is contiguous; guarded,
        it would split the sizes into two variants (resnet18 over batches 1..64 traced
        three times)."""
        if func not in _convolutions():
            return None
        operands = list(args[:2]) + [kwargs.get(k) for k in ("input", "weight") if k in kwargs]
        tensors = [t for t in operands if isinstance(t, torch.Tensor)]
        if len(tensors) != 2 or not all(_contiguous_without_guards(t) for t in tensors):
            return None
        return self.shape_env.suppress_guards()

    # --- torch's expressions in dynvm's text form
    def text(self, value):
        """An int or torch.SymInt as SymExpr text."""
        if isinstance(value, int):
            return str(value)
        node = getattr(value, "node", None)
        if node is None:
            raise Untranslatable(f"a {type(value).__name__} where a size was expected")
        return self._expr(self._simplified(node.expr))

    def _simplified(self, expr):
        """`expr` with the ShapeEnv's replacements (a symbol a guard equated to a number or
        another symbol) applied."""
        try:
            return self.shape_env.simplify(expr)
        except Exception:  # an older ShapeEnv: the expression as it is
            return expr

    def constant(self, value):
        """The Python number a symbolic one is fixed to by the guards so far (a symbol
        equated to a number: a hidden size a weight decides), or None."""
        expr = self._simplified(value.node.expr)
        if not expr.is_number:
            return None
        if isinstance(value, torch.SymBool):
            return bool(expr)
        if isinstance(value, torch.SymFloat):
            return float(expr)
        return int(expr)

    def _expr(self, e):
        sympy = _sympy()
        f = _functions()
        if isinstance(e, sympy.Integer) or (e.is_number and e == int(e)):
            return str(int(e))
        if isinstance(e, sympy.Symbol):
            if e not in self._ids:
                raise Untranslatable(f"the symbol {e} is not an input size")
            return f"s{self._ids[e]}"
        if isinstance(e, sympy.Add):
            return "(" + " + ".join(self._expr(a) for a in e.args) + ")"
        if isinstance(e, sympy.Mul):
            return "(" + "*".join(self._expr(a) for a in e.args) + ")"
        if isinstance(e, sympy.Pow) and e.exp.is_Integer and int(e.exp) >= 1:
            return f"({self._expr(e.base)})**{int(e.exp)}"
        if isinstance(e, f.FloorDiv) or type(e).__name__ == "CleanDiv":
            return f"({self._expr(e.args[0])} // {self._expr(e.args[1])})"
        if isinstance(e, sympy.Mod) or type(e).__name__ in ("Mod", "PythonMod"):
            return f"({self._expr(e.args[0])} % {self._expr(e.args[1])})"
        if type(e).__name__ == "ModularIndexing":
            x, div, mod = (self._expr(a) for a in e.args)
            return f"(({x} // {div}) % {mod})"
        if type(e).__name__ in ("Max", "Min"):  # sympy's, or torch's own
            name = type(e).__name__.lower()
            args = [self._expr(a) for a in e.args]
            text = args[0]
            for a in args[1:]:
                text = f"{name}({text}, {a})"
            return text
        if type(e).__name__ == "CeilDiv":
            return f"(-((-{self._expr(e.args[0])}) // {self._expr(e.args[1])}))"
        raise Untranslatable(f"the size expression {e} ({type(e).__name__})")

    _RELATIONS = {"Equality": "==", "Unequality": "!=", "StrictLessThan": "<",
                  "LessThan": "<=", "StrictGreaterThan": ">", "GreaterThan": ">="}

    def relation_texts(self):
        """The ShapeEnv's guards as relations ("s0 > 256"), each once, in order."""
        sympy = _sympy()
        out = []
        for guard in self.shape_env.guards:
            for e in (guard.expr.args if isinstance(guard.expr, sympy.And) else (guard.expr,)):
                out.append(self._relation(e))
        return list(dict.fromkeys(out))

    def _relation(self, e):
        sympy = _sympy()
        if isinstance(e, sympy.Not):
            inner = self._relation(e.args[0])
            for op, negated in (("==", "!="), ("!=", "=="), ("<=", ">"), (">=", "<"),
                                ("<", ">="), (">", "<=")):
                if f" {op} " in inner:
                    lhs, rhs = inner.split(f" {op} ")
                    return f"{lhs} {negated} {rhs}"
        op = self._RELATIONS.get(type(e).__name__)
        if op is None or len(e.args) != 2:
            raise Untranslatable(f"the guard {e}")
        return f"{self._expr(e.args[0])} {op} {self._expr(e.args[1])}"

    def symbol_list(self):
        """(source text, hint) per symbol, in dynvm's numbering."""
        return [(text, hint) for _, text, hint in self.symbols]

