"""dynvm's frontend against CPython's own dis, instruction by instruction and entry by
entry of the exception tables, for every code object of 40 standard-library modules:
on the running Python through the live path (a PyCodeObject) and the .pyc path (dynvm's
marshal reader), and for 3.12 and 3.13 also through the .pyc fixtures made with those
Pythons (tests/data/dis_fixtures/generate.py); for 3.13 also dis.dis()'s text of a few.
It needs no torch: the live path is the probe module's, so scripts/test-python313.sh runs
it under 3.13 (DYNVM_PROBE_ONLY=1: no `dynvm` executable, .pyc files read by the probe)."""
import gzip
import importlib.util
import json
import os
import pathlib
import py_compile
import subprocess
import sysconfig

import pytest

import dis_reference

import _dynvm_probe as probe

DATA = pathlib.Path(__file__).resolve().parent.parent / "data"
PROBE_ONLY = os.environ.get("DYNVM_PROBE_ONLY") == "1"
DYNVM = os.environ.get("DYNVM_EXE", "dynvm")


def pyc_listing(pyc):
    """`dynvm dis --json` of a .pyc file; in a probe build, the same listing from the probe."""
    if PROBE_ONLY:
        return json.loads(probe.pyc_dis_json(str(pyc)))
    out = subprocess.run([DYNVM, "dis", "--json", str(pyc)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def stdlib_source(module):
    """The standard library's source file of `module`, found on disk: by the time a test
    runs, another suite in the same process may have replaced the module in sys.modules
    (its spec then has no origin)."""
    base = pathlib.Path(sysconfig.get_paths()["stdlib"]).joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return str(candidate)
    return importlib.util.find_spec(module).origin


def cpython_listing(module):
    src = stdlib_source(module)
    code = compile(pathlib.Path(src).read_bytes(), module.replace(".", "/") + ".py", "exec")
    return code, dis_reference.normalize(dis_reference.describe_all(code))


def assert_same(ours, theirs, what):
    diff = dis_reference.first_difference(dis_reference.normalize(ours), theirs)
    assert diff is None, "%s: %s" % (what, diff)


@pytest.mark.parametrize("module", dis_reference.MODULES)
def test_live_code_matches_dis(module):
    code, theirs = cpython_listing(module)
    ours = json.loads(probe.dis_json(code))
    assert_same(ours, theirs, module)


@pytest.mark.parametrize("module", dis_reference.MODULES)
def test_pyc_matches_dis(module, tmp_path):
    src = stdlib_source(module)
    pyc = tmp_path / (module + ".pyc")
    py_compile.compile(src, cfile=str(pyc), dfile=module.replace(".", "/") + ".py",
                       doraise=True)
    # The reference: what CPython says of the very code object the .pyc holds.
    import marshal
    theirs = dis_reference.normalize(
        dis_reference.describe_all(marshal.loads(pyc.read_bytes()[16:])))
    assert_same(pyc_listing(pyc), theirs, module)


def fixtures(version):
    return sorted((DATA / version / "pyc").glob("*.pyc"))


FIXTURES = [(version, pyc) for version in ("py312", "py313") for pyc in fixtures(version)]


@pytest.mark.parametrize("version,pyc", FIXTURES,
                         ids=["%s-%s" % (v, p.stem) for v, p in FIXTURES])
def test_fixture_matches_dis(version, pyc):
    expected = json.loads(gzip.decompress((DATA / version / "dis" / (pyc.stem + ".json.gz"))
                                          .read_bytes()))
    assert_same(pyc_listing(pyc), dis_reference.normalize(expected), pyc.name)


LISTED_313 = sorted((DATA / "py313" / "listing").glob("*.dis.txt"))


@pytest.mark.parametrize("listing", LISTED_313, ids=[p.name.split(".dis")[0] for p in LISTED_313])
def test_py313_text_matches_dis(listing):
    """`dynvm dis` prints 3.13's dis.dis() text: labels instead of offsets."""
    if PROBE_ONLY:
        pytest.skip("a probe build has no `dynvm` executable to print the text")
    pyc = DATA / "py313" / "pyc" / (listing.name[:-len(".dis.txt")] + ".pyc")
    out = subprocess.run([DYNVM, "dis", str(pyc)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout == listing.read_text()


def test_enough_modules_checked():
    assert len(dis_reference.MODULES) >= 40
    assert len(fixtures("py312")) >= 40
    assert len(fixtures("py313")) >= 40
    assert len(LISTED_313) >= 4
