"""What CPython's own `dis` says about a code object, in the JSON shape of
`dynvm dis --json`: the reference for the parity tests and for the fixtures made on
other Python versions (tests/data/dis_fixtures/generate.py)."""
import ast
import dis
import opcode
import os
import re
import sys
import types

# Standard-library modules whose every code object the parity tests compare.
MODULES = [
    "argparse", "ast", "bisect", "calendar", "collections", "contextlib", "copy", "csv",
    "dataclasses", "datetime", "difflib", "enum", "fnmatch", "fractions", "functools",
    "heapq", "inspect", "json.decoder", "json.encoder", "logging", "pathlib", "pickle",
    "pprint", "random", "shutil", "statistics", "string", "textwrap", "threading",
    "tokenize", "traceback", "typing", "uuid", "warnings", "zipfile", "asyncio.base_events",
    "email.message", "http.client", "unittest.case", "_pydecimal",
]


def code_objects(code):
    """Depth-first, the module first, nested code objects in co_consts order."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from code_objects(const)


def describe(code):
    """One code object as `dynvm dis --json` prints it."""
    instructions = []
    for ins in dis.get_instructions(code):
        line = ins.positions.lineno if ins.positions is not None else None
        instructions.append({
            "offset": ins.offset,
            "opname": ins.opname,
            "arg": ins.arg,
            "argval": ins.argrepr,
            "line": line,
        })
    table = [
        {"start": e.start, "end": e.end, "target": e.target, "depth": e.depth,
         "lasti": bool(e.lasti)}
        for e in dis._parse_exception_table(code)
    ]
    return {"qualname": code.co_qualname, "firstlineno": code.co_firstlineno,
            "instructions": instructions, "exception_table": table}


def describe_all(code):
    return [describe(c) for c in code_objects(code)]


def opcode_dump():
    """The opcode module's tables and dis.stack_effect for every opcode and arg, in the
    shape scripts/gen_opcode_tables.py reads (it makes the dump; this is its entry for
    the fixture generator)."""
    scripts = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts")
    sys.path.insert(0, scripts)
    try:
        import gen_opcode_tables
    finally:
        sys.path.remove(scripts)
    return gen_opcode_tables.dump_module(opcode, dis)


_CODE_ADDRESS = re.compile(r"<code object (.*?) at 0x[0-9a-f]+,")


_FROZENSET = re.compile(r"^frozenset\(\{(.*)\}\)$")


def _sorted_frozenset(text):
    """frozenset({...}) with its elements in a fixed order. CPython prints a frozenset in
    hash-table order, which depends on the process (string hashing is randomised) and, in
    marshal data, on reference counts at the time of writing: no reader can reproduce it,
    so listings are compared with the elements sorted."""
    match = _FROZENSET.match(text)
    if match is None:
        return text
    elements = ast.literal_eval("[" + match.group(1) + "]")
    return "frozenset({%s})" % ", ".join(sorted(repr(e) for e in elements))


def normalize(listing):
    """Replaces what differs between equivalent listings: code-object addresses (they
    change from run to run) and the element order of frozenset constants."""
    for code in listing:
        for ins in code["instructions"]:
            if isinstance(ins["argval"], str) and "<code object" in ins["argval"]:
                ins["argval"] = _CODE_ADDRESS.sub(r"<code object \1 at 0x?,", ins["argval"])
            elif isinstance(ins["argval"], str) and ins["argval"].startswith("frozenset("):
                ins["argval"] = _sorted_frozenset(ins["argval"])
    return listing


def first_difference(ours, theirs):
    """A readable description of where two listings first differ, or None."""
    if len(ours) != len(theirs):
        return "%d code objects, CPython has %d" % (len(ours), len(theirs))
    for a, b in zip(ours, theirs):
        where = "%s (line %s)" % (b["qualname"], b["firstlineno"])
        for key in ("qualname", "firstlineno", "exception_table"):
            if a.get(key) != b.get(key):
                return "%s: %s differs:\n  ours:    %r\n  CPython: %r" % (
                    where, key, a.get(key), b.get(key))
        ia, ib = a["instructions"], b["instructions"]
        for x, y in zip(ia, ib):
            if x != y:
                return "%s: instruction differs:\n  ours:    %r\n  CPython: %r" % (where, x, y)
        if len(ia) != len(ib):
            return "%s: %d instructions, CPython has %d" % (where, len(ia), len(ib))
    return None
