"""Delta debugging on a program's AST: statements dropped (in chunks, then one by one),
compound statements replaced by their bodies, parameters of f removed with their
inputs, expressions replaced by a part of themselves or a constant; each candidate kept
when `still_fails(source)` says it fails the same way."""

import ast
import copy
import time
from typing import Callable, Iterator

from program_ast import source_of

STATEMENT_FIELDS = ("body", "orelse", "finalbody")


def _statement_lists(tree) -> Iterator[list]:
    """Every list of statements, in a fixed order (the same in a deep copy)."""
    for node in ast.walk(tree):
        for field in STATEMENT_FIELDS:
            value = getattr(node, field, None)
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                yield node, field, value


def _set_body(node, field, new):
    if not new and not isinstance(node, ast.Module) and field == "body":
        new = [ast.Pass()]
    setattr(node, field, new)


def _drop_statements(tree) -> Iterator[ast.Module]:
    lists = list(_statement_lists(tree))
    for k, (_, _, body) in enumerate(lists):
        size = len(body)
        while size >= 1:
            for start in range(0, len(body), size):
                if size == len(body) and len(body) == 1 and isinstance(body[0], ast.Pass):
                    continue
                candidate = copy.deepcopy(tree)
                node, field, value = list(_statement_lists(candidate))[k]
                _set_body(node, field, value[:start] + value[start + size:])
                yield candidate
            size //= 2


def _unwrap_compound(tree) -> Iterator[ast.Module]:
    """An if, loop, with or try replaced by its body (or its else, handler, finally)."""
    lists = list(_statement_lists(tree))
    for k, (_, _, body) in enumerate(lists):
        for i, stmt in enumerate(body):
            parts = []
            if isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
                parts = [stmt.body, getattr(stmt, "orelse", []), getattr(stmt, "finalbody", [])]
                parts += [h.body for h in getattr(stmt, "handlers", [])]
            for part in parts:
                if not part:
                    continue
                candidate = copy.deepcopy(tree)
                node, field, value = list(_statement_lists(candidate))[k]
                _set_body(node, field, value[:i] + copy.deepcopy(part) + value[i + 1:])
                yield candidate


def _function(tree, title):
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == title:
            return node
    return None


def _drop_parameters(tree) -> Iterator[ast.Module]:
    """Parameter i of f removed, with element i of the list make_inputs returns; f's
    *args and **kwargs removed, with what make_inputs passes to them."""
    f = _function(tree, "f")
    if f is None:
        return
    for i in range(len(f.args.args)):
        candidate = copy.deepcopy(tree)
        make = _function(candidate, "make_inputs")
        returned = make.body[-1].value if make and isinstance(make.body[-1], ast.Return) else None
        positional = returned.elts[0] if isinstance(returned, ast.Tuple) else None
        if isinstance(positional, ast.BinOp):  # [a, b] + rest
            positional = positional.left
        if not isinstance(positional, ast.List) or len(positional.elts) <= i:
            return
        del positional.elts[i]
        del _function(candidate, "f").args.args[i]
        yield candidate
    if f.args.vararg or f.args.kwarg:  # f(..., *rest, **opts) -> f(...)
        candidate = copy.deepcopy(tree)
        returned = _function(candidate, "make_inputs").body[-1].value
        if isinstance(returned, ast.Tuple) and len(returned.elts) == 2:
            if isinstance(returned.elts[0], ast.BinOp):
                returned.elts[0] = returned.elts[0].left
            returned.elts[1] = ast.Dict(keys=[], values=[])
            f_def = _function(candidate, "f")
            f_def.args.vararg = f_def.args.kwarg = None
            yield candidate


def _simpler(node):
    """Expressions to put in place of `node`: parts of it, then a constant."""
    if isinstance(node, ast.BinOp):
        yield node.left
        yield node.right
    elif isinstance(node, ast.UnaryOp):
        yield node.operand
    elif isinstance(node, ast.BoolOp):
        yield from node.values
    elif isinstance(node, ast.Compare):
        yield node.left
    elif isinstance(node, ast.IfExp):
        yield node.body
        yield node.orelse
    elif isinstance(node, ast.Call):
        yield from (a for a in node.args if not isinstance(a, ast.Starred))
        if isinstance(node.func, ast.Attribute):
            yield node.func.value  # t.sum() -> t
    elif isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, ast.Load):
        yield node.value
    elif isinstance(node, (ast.List, ast.Tuple)) and isinstance(node.ctx, ast.Load):
        if len(node.elts) > 1:
            for i in range(len(node.elts)):
                yield type(node)(elts=node.elts[:i] + node.elts[i + 1:], ctx=ast.Load())
    elif isinstance(node, ast.JoinedStr) and len(node.values) > 1:
        for i in range(len(node.values)):
            yield ast.JoinedStr(values=node.values[:i] + node.values[i + 1:])
    if isinstance(node, (ast.BinOp, ast.Call, ast.BoolOp, ast.Compare, ast.IfExp)):
        yield ast.Constant(1)


class _Replace(ast.NodeTransformer):
    def __init__(self, target, replacement):
        self.position = -1
        self.target = target
        self.replacement = replacement

    def generic_visit(self, node):
        if isinstance(node, ast.expr):
            self.position += 1
            if self.position == self.target:
                return copy.deepcopy(self.replacement)
        return super().generic_visit(node)


def _simplify_expressions(tree) -> Iterator[ast.Module]:
    expressions = []

    class Collect(ast.NodeVisitor):
        def generic_visit(self, node):
            if isinstance(node, ast.expr):
                expressions.append(node)
            super().generic_visit(node)

    f = _function(tree, "f")
    Collect().visit(tree)
    inside_f = {id(n) for n in ast.walk(f)} if f else set()
    for position, node in enumerate(expressions):
        if id(node) not in inside_f:
            continue
        for replacement in _simpler(node):
            yield _Replace(position, replacement).visit(copy.deepcopy(tree))


PASSES = (_drop_statements, _unwrap_compound, _drop_parameters, _simplify_expressions)


def minimise(source: str, still_fails: Callable[[str], bool], budget_s: float = 120.0,
             progress: Callable[[], None] = lambda: None) -> str:
    """The smallest program found within `budget_s` that still fails as `source` does."""
    deadline = time.monotonic() + budget_s
    best = ast.parse(source)
    best_source = source_of(best)
    tried = {best_source}
    improved = True
    while improved and time.monotonic() < deadline:
        improved = False
        for make_candidates in PASSES:
            for candidate in make_candidates(best):
                if time.monotonic() > deadline:
                    return best_source
                try:
                    text = source_of(candidate)
                    compile(text, "<candidate>", "exec")
                except (SyntaxError, ValueError, TypeError):
                    continue
                if text in tried or len(text) >= len(best_source):
                    continue
                tried.add(text)
                progress()
                if still_fails(text):
                    best, best_source, improved = ast.parse(text), text, True
                    break
            if improved:
                break
    return best_source
