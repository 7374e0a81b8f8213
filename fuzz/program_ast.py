"""AST templates for the program fuzzer: Python text with placeholders, parsed once, whose
placeholders are filled with AST nodes (an expression, a list of statements) or renamed."""

import ast
import copy
import functools
import textwrap


@functools.lru_cache(maxsize=None)
def _parsed(source, mode):
    return ast.parse(textwrap.dedent(source), mode=mode)


class _Fill(ast.NodeTransformer):
    """Replaces the names in `subs`: a str renames (variables, parameters, functions,
    global and nonlocal declarations), an ast.expr replaces a Name, a list of statements
    replaces a statement that is only the name."""

    def __init__(self, subs):
        self.subs = subs

    def _renamed(self, name):
        value = self.subs.get(name)
        return value if isinstance(value, str) else name

    def visit_Name(self, node):
        value = self.subs.get(node.id)
        if value is None:
            return node
        if isinstance(value, str):
            return ast.Name(id=value, ctx=node.ctx)
        if isinstance(value, ast.expr):
            return copy.deepcopy(value)
        raise TypeError(f"placeholder {node.id} used as an expression")

    def visit_Expr(self, node):
        if isinstance(node.value, ast.Name) and isinstance(self.subs.get(node.value.id), list):
            return copy.deepcopy(self.subs[node.value.id])
        return self.generic_visit(node)

    def visit_arg(self, node):
        node.arg = self._renamed(node.arg)
        return self.generic_visit(node)

    def visit_FunctionDef(self, node):
        node.name = self._renamed(node.name)
        return self.generic_visit(node)

    def visit_Global(self, node):
        node.names = [self._renamed(n) for n in node.names]
        return node

    visit_Nonlocal = visit_Global

    def visit_keyword(self, node):
        if node.arg is not None:
            node.arg = self._renamed(node.arg)
        return self.generic_visit(node)


def stmts(source, **subs):
    """The statements of `source` with its placeholders filled."""
    tree = copy.deepcopy(_parsed(source, "exec"))
    return _Fill(subs).visit(tree).body


def expr(source, **subs):
    """The expression `source` with its placeholders filled."""
    tree = copy.deepcopy(_parsed(source, "eval"))
    return _Fill(subs).visit(tree).body


def name(identifier):
    return ast.Name(id=identifier, ctx=ast.Load())


def const(value):
    """A literal; negative numbers as unary minus, as the parser gives them."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        return ast.UnaryOp(op=ast.USub(), operand=ast.Constant(-value))
    return ast.Constant(value)


def tuple_of(items):
    return ast.Tuple(elts=list(items), ctx=ast.Load())


def source_of(module):
    return ast.unparse(ast.fix_missing_locations(module)) + "\n"
