"""Writes the marshal fixtures of the frontend tests for the running Python.

    /usr/bin/python3 tests/data/marshal/generate.py         # writes py311/
    python3.12 tests/data/marshal/generate.py               # writes py312/

For each fixture NAME it writes NAME.marshal (marshal.dumps of a compiled module) and
NAME.txt, CPython's own view of every code object in it (depth-first, in co_consts
order) in the text form tests/unit/frontend/marshal_reader_test.cpp prints from a
RawCode. Constants appear as repr() prints them, except that a frozenset lists its
elements sorted by their repr: the order in the marshal data (which dynvm keeps) is
CPython's sort by each element's own marshal bytes, which depend on reference counts
at the time of writing, so neither side can reproduce it. It also writes module.pyc and
module_hash.pyc with fixed header fields. String hashing is pinned (PYTHONHASHSEED=0)
so that the output is the same on every run.
"""
import importlib.util
import marshal
import os
import re
import subprocess
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))

CONSTANTS = r'''
def numbers():
    return (None, ..., True, False, 0, 1, -1, 255, 256, 2**31 - 1, -2**31, 2**31,
            2**63 - 1, -2**63, 2**63, -2**64, BIG100, -BIG1000, 12345678901234567890,
            0.0, -0.0, 1.0, -2.5, 1e-05, 0.0001, 1e16, 1e15, 123456789012345678.0, 1.5e300,
            5e-324, 0.1, 1 / 3, 1e22, 2.5e-05, 1e400, -1e400, 1e400 - 1e400,
            0j, 1j, -1j, 1 + 2j, 1.5 - 0.5j, -0.0 - 1j, 1e400j, 2e-10j, -(0j))

def strings():
    return ('', 'a', "it's", 'say "hi"', 'both \' and "', '\x00\x1f\x7f\x80\xa0\xad',
            'tab\tnl\nret\r', '\\', '\u00e9t\u00e9', '\u65e5\u672c', '\u200b', '\ud800',
            '\U0001f600', '\U000e0001', '\u2028', '\x85', 'x' * 300, '\u00e9' * 300,
            b'', b'abc', b"'", b'"', b'\'"', b'\x00\xff\x7f\t\n\r\\', b'z' * 300)

def containers(x):
    if x in {1, 2, 3}:
        return ((), (1,), (1, 'a', (2, (3,))), ('k',) * 2)
    if x in {'alpha', 'beta', 'gamma', 'delta'}:
        return frozenset
    return x in {1.5, (1, 2), 'mixed', None}

f = lambda y: (lambda z: y + z)
'''

FUNCTIONS = r'''
import os

def positional(a, b, /, c, d=1, *args, e, f=2, **kwargs):
    """Docstring."""
    total = a + b + c + d + e + f
    for value in args:
        total += value
    return total, kwargs

def closure(n):
    cell = [n]
    def inner(k):
        nonlocal n
        n += k
        return cell[0] + n
    return inner

def comprehension(items):
    return [i * i for i in items if i], {k: v for k, v in items}

def generator(limit):
    i = 0
    while i < limit:
        yield i
        i += 1

async def coroutine(x):
    await x
    async with x as y:
        return y

def handler(path):
    try:
        with open(path) as f:
            return f.read()
    except (OSError, ValueError) as exc:
        raise RuntimeError(str(exc)) from exc
    finally:
        print("done")

class Point:
    x: int = 0
    def __init__(self, x):
        super().__init__()
        self.x = x
    @property
    def double(self):
        return self.x * 2

def slicing(s, i):
    return s[1:i], s[::2], s[i], -s[0] ** 2, not s, s is None
'''

# Literals, since the compiler does not fold big powers.
CONSTANTS = CONSTANTS.replace("BIG1000", str(2**1000)).replace("BIG100", str(2**100))

STDLIB = ["bisect", "fnmatch"]


def hexlify(data):
    return data.hex() if data else "-"


def code_objects(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from code_objects(const)


def canonical_repr(value):
    if type(value) is frozenset:
        items = sorted(map(canonical_repr, value))
        return "frozenset({%s})" % ", ".join(items) if items else "frozenset()"
    if type(value) is tuple:
        items = [canonical_repr(v) for v in value]
        return "(%s)" % (items[0] + "," if len(items) == 1 else ", ".join(items))
    return repr(value)


def normalized_repr(value):
    return re.sub(r" at 0x[0-9a-f]+,", " at 0x0,", canonical_repr(value))


def describe(module_code):
    lines = []
    for code in code_objects(module_code):
        lines += [
            "code " + code.co_qualname,
            "name " + code.co_name,
            "filename " + code.co_filename,
            "firstlineno %d" % code.co_firstlineno,
            "argcount %d" % code.co_argcount,
            "posonlyargcount %d" % code.co_posonlyargcount,
            "kwonlyargcount %d" % code.co_kwonlyargcount,
            "stacksize %d" % code.co_stacksize,
            "flags %d" % code.co_flags,
            "varnames " + repr(code.co_varnames),
            "cellvars " + repr(code.co_cellvars),
            "freevars " + repr(code.co_freevars),
            "names " + repr(code.co_names),
            "co_code " + hexlify(code.co_code),
            "linetable " + hexlify(code.co_linetable),
            "exceptiontable " + hexlify(code.co_exceptiontable),
        ]
        lines += ["const " + normalized_repr(c) for c in code.co_consts]
        lines.append("end")
    return "\n".join(lines) + "\n"


def write(path, data):
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(path, mode, **({} if mode == "wb" else {"encoding": "utf-8"})) as f:
        f.write(data)


def write_fixture(outdir, name, source, filename):
    code = compile(source, filename, "exec")
    write(os.path.join(outdir, name + ".marshal"), marshal.dumps(code))
    write(os.path.join(outdir, name + ".txt"), describe(code))
    return code


def main():
    if os.environ.get("PYTHONHASHSEED") != "0":
        env = dict(os.environ, PYTHONHASHSEED="0")
        sys.exit(subprocess.call([sys.executable] + sys.argv, env=env))
    sys.set_int_max_str_digits(0)
    outdir = os.path.join(HERE, "py%d%d" % sys.version_info[:2])
    os.makedirs(outdir, exist_ok=True)
    write_fixture(outdir, "constants", CONSTANTS, "<constants>")
    code = write_fixture(outdir, "functions", FUNCTIONS, "functions.py")
    for module in STDLIB:
        with open(importlib.util.find_spec(module).origin, encoding="utf-8") as f:
            write_fixture(outdir, "stdlib_" + module, f.read(), module + ".py")

    body = marshal.dumps(code)
    magic = importlib.util.MAGIC_NUMBER
    stamp = (0).to_bytes(4, "little") + (1700000000).to_bytes(4, "little")
    stamp += len(FUNCTIONS.encode()).to_bytes(4, "little")
    write(os.path.join(outdir, "module.pyc"), magic + stamp + body)
    source_hash = importlib.util.source_hash(FUNCTIONS.encode())
    write(os.path.join(outdir, "module_hash.pyc"),
          magic + (3).to_bytes(4, "little") + source_hash + body)
    print("wrote", os.path.relpath(outdir))


if __name__ == "__main__":
    main()
