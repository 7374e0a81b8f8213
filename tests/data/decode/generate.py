"""Writes the decoder's test fixtures (tests/unit/frontend/*_test.cpp read them).

Run with CPython 3.11 (the project's Python; see DESIGN.md) from anywhere:
    python3.11 tests/data/decode/generate.py
It writes, under tests/data/decode/:
  py311/<name>.pyc             snippets/<name>.py and a few standard-library modules,
                               compiled by this Python
  py311/<name>.dis.json        what CPython's dis says of them (tests/python/dis_reference.py)
  py311/<name>.dis.txt         dis.dis()'s text, code-object addresses written as 0x0
  py311/<name>.positions.json  co_positions() of every instruction, per code object
  py312/<name>.dis.json        the 3.12 reference for tests/data/py312/pyc/<name>.pyc,
                               uncompressed from tests/data/py312/dis/ (made on 3.12)
Modules with frozenset constants are left out: their repr order depends on hashing.
"""
import dis
import gzip
import io
import json
import marshal
import os
import py_compile
import re
import shutil
import sys
import types
import importlib.util

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(DATA, "..", "python"))
import dis_reference  # noqa: E402

SNIPPETS = ["calls", "control", "expressions", "big"]
STDLIB_311 = ["bisect"]
STDLIB_312 = ["bisect", "fnmatch", "json.decoder", "contextlib"]


def code_objects(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from code_objects(const)


def write_json(path, value):
    with open(path, "w") as f:
        json.dump(value, f, separators=(",", ":"))
        f.write("\n")


def describe_311(name, source, outdir):
    pyc = os.path.join(outdir, name + ".pyc")
    py_compile.compile(source, cfile=pyc, dfile=name + ".py", doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    with open(pyc, "rb") as f:
        code = marshal.loads(f.read()[16:])
    write_json(os.path.join(outdir, name + ".dis.json"), dis_reference.describe_all(code))
    text = io.StringIO()
    dis.dis(code, file=text)
    with open(os.path.join(outdir, name + ".dis.txt"), "w") as f:
        f.write(re.sub(r" at 0x[0-9a-f]+,", " at 0x0,", text.getvalue()))
    positions = []
    for c in code_objects(code):
        positions.append({
            "qualname": c.co_qualname,
            "positions": [list(ins.positions) for ins in dis.get_instructions(c)],
        })
    write_json(os.path.join(outdir, name + ".positions.json"), positions)


def main():
    if sys.version_info[:2] != (3, 11):
        sys.exit("run with CPython 3.11")
    out311 = os.path.join(HERE, "py311")
    out312 = os.path.join(HERE, "py312")
    for d in (out311, out312):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    for name in SNIPPETS:
        describe_311(name, os.path.join(HERE, "snippets", name + ".py"), out311)
    for name in STDLIB_311:
        describe_311(name, importlib.util.find_spec(name).origin, out311)
    for name in STDLIB_312:
        with gzip.open(os.path.join(DATA, "py312", "dis", name + ".json.gz"), "rt") as f:
            write_json(os.path.join(out312, name + ".dis.json"), json.load(f))
    print("wrote", out311, out312)


if __name__ == "__main__":
    main()
