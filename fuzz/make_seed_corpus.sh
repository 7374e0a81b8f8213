#!/usr/bin/env bash
# Fills a seed corpus for marshal_fuzzer: .pyc files of some standard library modules
# compiled by the project's Python, plus marshal data of assorted constants.
#   fuzz/make_seed_corpus.sh CORPUS_DIR [PYTHON]
set -euo pipefail
out=${1:?usage: $0 CORPUS_DIR [PYTHON]}
python=${2:-/usr/bin/python3}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$python" - "$tmp" "$out" <<'PY'
import importlib.util, marshal, os, py_compile, shutil, sys
tmp, out = sys.argv[1], sys.argv[2]
modules = ["bisect", "colorsys", "copy", "fnmatch", "glob", "heapq", "keyword", "shlex",
           "string", "textwrap", "types", "contextlib", "dataclasses", "enum", "functools"]
for name in modules:
    src = importlib.util.find_spec(name).origin
    pyc = os.path.join(tmp, name + ".pyc")
    py_compile.compile(src, cfile=pyc, doraise=True)
    shutil.copy(pyc, os.path.join(out, "%s.py%d%d.pyc" % ((name,) + sys.version_info[:2])))
constants = [None, ..., True, False, 0, -1, 2**31, -(2**100), 1.5, -0.0, float("inf"),
             1 + 2j, "", "abc", "\u00e9\u65e5\U0001f600", "x" * 300, b"\x00\xff",
             (), (1, "a", (2.5,)), frozenset({1, "b"}), StopIteration,
             compile("def f(a, *b, c=1, **d):\n    return [x for x in b]\n", "<seed>", "exec")]
for i, value in enumerate(constants):
    with open(os.path.join(out, "constant%02d.marshal" % i), "wb") as f:
        f.write(marshal.dumps(value))
print("seed corpus:", len(os.listdir(out)), "files in", out)
PY
