"""Writes dis-parity fixtures for the running Python: .pyc files of the standard-library
modules in tests/python/dis_reference.py, the JSON CPython's own dis gives for them,
a dump of the opcode module (tables and stack effects), and for a few modules the same
JSON uncompressed and dis.dis()'s text, which the C++ unit tests read.

Run from the repository root with the Python the fixtures describe, e.g. on the GPU
machine (Python 3.12) or with pyenv's 3.13:
    PYTHONHASHSEED=0 python3.13 tests/data/dis_fixtures/generate.py tests/data
It writes tests/data/py3XX/{opcode_dump.json, pyc/<module>.pyc, dis/<module>.json.gz}
and, from 3.13 on, tests/data/py3XX/listing/<module>.dis.{json,txt} for LISTING_MODULES
(3.12's uncompressed listings are in tests/data/decode/py312, made by
tests/data/decode/generate.py).
"""
import dis
import gzip
import importlib.util
import io
import json
import marshal
import os
import py_compile
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import dis_reference  # noqa: E402

# Small modules without frozenset constants (whose repr order depends on hashing).
LISTING_MODULES = ["bisect", "fnmatch", "json.decoder", "contextlib"]


def write_listings(outdir, name, code):
    """The module's JSON listing and dis.dis() text, code-object addresses as 0x0."""
    os.makedirs(os.path.join(outdir, "listing"), exist_ok=True)
    base = os.path.join(outdir, "listing", name)
    with open(base + ".dis.json", "w") as f:
        json.dump(dis_reference.describe_all(code), f, separators=(",", ":"))
        f.write("\n")
    text = io.StringIO()
    dis.dis(code, file=text)
    with open(base + ".dis.txt", "w") as f:
        f.write(re.sub(r" at 0x[0-9a-f]+,", " at 0x0,", text.getvalue()))


def main():
    outdir = os.path.join(sys.argv[1], "py%d%d" % sys.version_info[:2])
    os.makedirs(os.path.join(outdir, "pyc"), exist_ok=True)
    os.makedirs(os.path.join(outdir, "dis"), exist_ok=True)
    with open(os.path.join(outdir, "opcode_dump.json"), "w") as f:
        json.dump(dis_reference.opcode_dump(), f, indent=0, sort_keys=True)
    for name in dis_reference.MODULES:
        src = importlib.util.find_spec(name).origin
        pyc = os.path.join(outdir, "pyc", name + ".pyc")
        py_compile.compile(src, cfile=pyc, dfile=name.replace(".", "/") + ".py", doraise=True,
                           invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
        with open(pyc, "rb") as f:
            f.read(16)
            code = marshal.loads(f.read())
        with gzip.open(os.path.join(outdir, "dis", name + ".json.gz"), "wt") as f:
            json.dump(dis_reference.describe_all(code), f, separators=(",", ":"))
        if name in LISTING_MODULES and sys.version_info >= (3, 13):
            write_listings(outdir, name, code)
    print("wrote", outdir, len(dis_reference.MODULES), "modules")


if __name__ == "__main__":
    main()
