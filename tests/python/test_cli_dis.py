"""`dynvm dis`: listings of .py and .pyc files, and clear errors for bad input."""
import importlib.util
import json
import os
import py_compile
import subprocess
import sys

import dis_reference

DYNVM = os.environ.get("DYNVM_EXE", "dynvm")

SOURCE = """\
def f(a, *args, k=1, **kw):
    try:
        return [x * a for x in args if x]
    except ZeroDivisionError:
        return None

class C:
    def m(self):
        return super().m()
"""


def dynvm(*args):
    return subprocess.run([DYNVM, *args], capture_output=True, text=True)


def test_py_file_json_matches_dis(tmp_path):
    src = tmp_path / "m.py"
    src.write_text(SOURCE)
    out = dynvm("dis", "--json", str(src))
    assert out.returncode == 0, out.stderr
    ours = json.loads(out.stdout)
    theirs = dis_reference.describe_all(compile(SOURCE, str(src), "exec"))
    diff = dis_reference.first_difference(dis_reference.normalize(ours),
                                          dis_reference.normalize(theirs))
    assert diff is None, diff
    expected = ["<module>", "f", "f.<locals>.<listcomp>", "C", "C.m"]
    if sys.version_info >= (3, 12):  # comprehensions are inlined (PEP 709)
        expected.remove("f.<locals>.<listcomp>")
    assert [c["qualname"] for c in ours] == expected


def test_py_file_human_listing_looks_like_dis(tmp_path):
    src = tmp_path / "m.py"
    src.write_text(SOURCE)
    out = dynvm("dis", str(src))
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "Disassembly of <code object f" in text
    assert "LOAD_FAST" in text and "BINARY_OP" in text and "(*)" in text
    assert "ExceptionTable:" in text
    assert ">>" in text  # jump targets are marked


def test_pyc_file_listing(tmp_path):
    pyc = tmp_path / "copy.pyc"
    py_compile.compile(importlib.util.find_spec("copy").origin, cfile=str(pyc), doraise=True)
    out = dynvm("dis", "--json", str(pyc))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)[0]["qualname"] == "<module>"


def test_missing_file(tmp_path):
    out = dynvm("dis", str(tmp_path / "nope.py"))
    assert out.returncode == 1
    assert "nope.py" in out.stderr and "No such file" in out.stderr
    assert out.stdout == ""


def test_unsupported_magic_names_the_version(tmp_path):
    pyc = tmp_path / "old.pyc"
    py_compile.compile(importlib.util.find_spec("copy").origin, cfile=str(pyc), doraise=True)
    data = bytearray(pyc.read_bytes())
    data[0:2] = (3413).to_bytes(2, "little")  # the magic number of CPython 3.8
    pyc.write_bytes(bytes(data))
    out = dynvm("dis", str(pyc))
    assert out.returncode == 1
    assert "old.pyc" in out.stderr and "unsupported Python version 3.8" in out.stderr


def test_truncated_pyc(tmp_path):
    pyc = tmp_path / "t.pyc"
    py_compile.compile(importlib.util.find_spec("copy").origin, cfile=str(pyc), doraise=True)
    pyc.write_bytes(pyc.read_bytes()[:200])
    out = dynvm("dis", str(pyc))
    assert out.returncode == 1
    assert "t.pyc" in out.stderr and "truncated" in out.stderr.lower()


def test_garbage_pyc_header(tmp_path):
    pyc = tmp_path / "g.pyc"
    pyc.write_bytes(b"\x00\x01")
    out = dynvm("dis", str(pyc))
    assert out.returncode == 1
    assert "g.pyc" in out.stderr


def test_syntax_error_names_file_and_line(tmp_path):
    src = tmp_path / "bad.py"
    src.write_text("x = 1\ndef f(:\n    pass\n")
    out = dynvm("dis", str(src))
    assert out.returncode == 1
    assert "bad.py" in out.stderr and "line 2" in out.stderr
    assert "SyntaxError" in out.stderr


def test_dis_without_file_is_a_usage_error():
    out = dynvm("dis")
    assert out.returncode == 2
    assert "usage" in out.stderr.lower()
