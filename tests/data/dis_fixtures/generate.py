"""Writes dis-parity fixtures for the running Python: .pyc files of standard-library
modules, the JSON CPython's own dis gives for them, and a dump of the opcode module.

Run with the Python whose bytecode the fixtures describe, e.g. on the GPU machine:
    python3 tests/data/dis_fixtures/generate.py OUTDIR
It writes OUTDIR/py3XX/{opcode_dump.json, pyc/<module>.pyc, dis/<module>.json.gz}.
The JSON has the shape `dynvm dis --json` prints (docs/cli.md).
"""
import dis
import gzip
import importlib.util
import json
import opcode
import os
import py_compile
import sys
import types

MODULES = [
    "argparse", "ast", "bisect", "calendar", "collections", "contextlib", "copy", "csv",
    "dataclasses", "datetime", "difflib", "enum", "fnmatch", "fractions", "functools",
    "heapq", "inspect", "json.decoder", "json.encoder", "logging", "pathlib", "pickle",
    "pprint", "random", "shutil", "statistics", "string", "textwrap", "threading",
    "tokenize", "traceback", "typing", "uuid", "warnings", "zipfile", "asyncio.base_events",
    "email.message", "http.client", "unittest.case", "_pydecimal",
]


def code_objects(code):
    """Depth-first, module first, nested code objects in co_consts order."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from code_objects(const)


def describe(code):
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


def opcode_dump():
    fields = ["opname", "opmap", "hasconst", "hasname", "hasjrel", "hasjabs", "haslocal",
              "hasfree", "hascompare", "cmp_op", "_nb_ops", "_inline_cache_entries",
              "_specializations", "_intrinsic_1_descs", "_intrinsic_2_descs", "hasarg",
              "HAVE_ARGUMENT", "EXTENDED_ARG", "_specialized_instructions"]
    out = {"version": list(sys.version_info[:3])}
    for f in fields:
        if hasattr(opcode, f):
            v = getattr(opcode, f)
            if isinstance(v, (set, frozenset)):
                v = sorted(v)
            out[f] = v
    if hasattr(dis, "_nb_ops") and "_nb_ops" not in out:
        out["_nb_ops"] = dis._nb_ops
    effects = {}
    for name, op in opcode.opmap.items():
        rows = []
        for arg in range(0, 301):
            row = []
            for jump in (None, True, False):
                try:
                    if op < opcode.HAVE_ARGUMENT:
                        if arg:
                            row = None
                            break
                        row.append(dis.stack_effect(op, jump=jump))
                    else:
                        row.append(dis.stack_effect(op, arg, jump=jump))
                except ValueError:
                    row.append(None)
            if row is None:
                break
            rows.append(row)
        effects[name] = rows
    out["stack_effect"] = effects
    return out


def main():
    outdir = os.path.join(sys.argv[1], "py%d%d" % sys.version_info[:2])
    os.makedirs(os.path.join(outdir, "pyc"), exist_ok=True)
    os.makedirs(os.path.join(outdir, "dis"), exist_ok=True)
    with open(os.path.join(outdir, "opcode_dump.json"), "w") as f:
        json.dump(opcode_dump(), f, indent=0, sort_keys=True)
    for name in MODULES:
        src = importlib.util.find_spec(name).origin
        pyc = os.path.join(outdir, "pyc", name + ".pyc")
        py_compile.compile(src, cfile=pyc, dfile=name.replace(".", "/") + ".py",
                           doraise=True, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
        with open(pyc, "rb") as f:
            import marshal
            f.read(16)
            code = marshal.loads(f.read())
        listing = [describe(c) for c in code_objects(code)]
        with gzip.open(os.path.join(outdir, "dis", name + ".json.gz"), "wt") as f:
            json.dump(listing, f, separators=(",", ":"))
    print("wrote", outdir, len(MODULES), "modules")


if __name__ == "__main__":
    main()
