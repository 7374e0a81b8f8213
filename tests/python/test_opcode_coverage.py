"""Opcode coverage (issue 17): the VM's per-opcode counts of what it traced, broke on and
refused, their exit-time dumps, and scripts/coverage.py's report over them."""

import importlib.util
import json
import pathlib
import sys

import pytest
import torch

import dynvm
from conftest import run_python

pytestmark = pytest.mark.skipif(not dynvm.vm_available(), reason="the VM is not built")

REPO = pathlib.Path(__file__).resolve().parents[2]


def load_coverage_script():
    spec = importlib.util.spec_from_file_location("coverage_script",
                                                  REPO / "scripts" / "coverage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def counts():
    from dynvm import _native

    return {c["opcode"]: c for c in _native.core().opcode_coverage()}


def reset_counts():
    from dynvm import _native

    _native.core().reset_opcode_coverage()


def test_traced_instructions_are_counted_by_opcode():
    def f(x, n):
        total = x
        for i in range(n):
            total = total + x * i
        return total

    reset_counts()
    x = torch.randn(3)
    torch.testing.assert_close(dynvm.compile(f, backend="eager")(x, 3), f(x, 3))
    c = counts()
    # The loop body ran three times in the trace: at least three adds and three multiplies.
    assert c["BINARY_OP"]["executed"] >= 6
    assert c["FOR_ITER"]["executed"] >= 4
    assert c["RETURN_VALUE"]["executed"] >= 1
    assert all(entry["breaks"] == 0 for entry in c.values())


def test_a_break_is_counted_at_its_instruction_with_its_reason():
    def f(x):
        y = x + 1
        if y.sum() > 0:  # data-dependent: the trace stops at the jump on the tensor
            return y * 2
        return y

    reset_counts()
    x = torch.ones(3)
    torch.testing.assert_close(dynvm.compile(f, backend="eager")(x), f(x))
    c = counts()
    broke = {name: entry for name, entry in c.items() if entry["breaks"]}
    assert broke, c
    reasons = [reason for entry in broke.values() for reason in entry["reasons"]]
    assert any("data-dependent" in reason for reason in reasons), reasons
    assert all(entry["refused"] == 0 for entry in broke.values())


def test_a_name_in_a_break_reason_is_collapsed():
    def f(x):
        return x + name_that_does_not_exist  # noqa: F821

    reset_counts()
    with pytest.raises(NameError):
        dynvm.compile(f, backend="eager")(torch.ones(2))
    reasons = counts()["LOAD_GLOBAL"]["reasons"]
    assert "name '\u2026' is not defined" in reasons, reasons
    assert not any("name_that_does_not_exist" in reason for reason in reasons)


def test_an_opcode_without_a_rule_counts_as_refused():
    # A class statement inside the traced function (LOAD_BUILD_CLASS has no rule).
    source = (
        "def f(x):\n"
        "    class Scale:\n"
        "        factor = 3\n"
        "    return x * Scale.factor\n"
    )
    namespace = {}
    exec(compile(source, "<class_body>", "exec"), namespace)
    f = namespace["f"]
    reset_counts()
    x = torch.ones(2)
    torch.testing.assert_close(dynvm.compile(f, backend="eager")(x), x * 3)
    refused = {name: entry for name, entry in counts().items() if entry["refused"]}
    assert "LOAD_BUILD_CLASS" in refused, counts()
    entry = refused["LOAD_BUILD_CLASS"]
    assert entry["breaks"] >= entry["refused"] >= 1


def test_processes_dump_their_counts_and_the_script_merges_them(tmp_path):
    raw = tmp_path / "raw"
    code = (
        "import torch, dynvm\n"
        "def f(x):\n"
        "    return [x * k for k in range(3)]\n"
        "dynvm.compile(f, backend='eager')(torch.ones(2))\n"
    )
    for _ in range(2):
        result = run_python(code, DYNVM_OPCODE_COVERAGE=str(raw))
        assert result.returncode == 0, result.stderr
    dumps = sorted(raw.glob("opcodes-*.json"))
    assert len(dumps) == 2

    script = load_coverage_script()
    merged, processes = script.merge_dumps([str(raw)])
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert processes[version] == 2
    per_dump = []
    for dump in dumps:
        record = json.loads(dump.read_text())
        per_dump.append({c["opcode"]: c["executed"] for c in record["opcodes"]})
    assert merged[version]["BINARY_OP"]["executed"] == sum(d["BINARY_OP"] for d in per_dump)
    assert per_dump[0]["BINARY_OP"] >= 3  # three multiplies in the comprehension

    out = tmp_path / "report"
    assert script.main(["merge", str(raw), "--out", str(out)]) == 0
    text = (out / "opcodes.md").read_text()
    assert f"## Python {version}" in text
    assert "| BINARY_OP |" in text
    # Every opcode of this Python is listed, met or not.
    for name in script.base_opcodes(version):
        assert f"| {name} |" in text


def test_the_table_of_another_version_comes_from_its_opcode_dump():
    script = load_coverage_script()
    names = script.base_opcodes("3.12")
    assert "LOAD_FAST" in names and "CALL" in names
    assert not any(name.startswith("INSTRUMENTED_") for name in names)
    assert "LOAD_ATTR_INSTANCE_VALUE" not in names  # a specialisation of LOAD_ATTR


def test_opcodes_that_cannot_meet_the_vm_are_listed_apart_with_why():
    script = load_coverage_script()
    table = {"BINARY_OP": {"executed": 3, "breaks": 0, "refused": 0, "reasons": {}}}
    text = script.format_markdown({"3.11": table}, {"3.11": 1}, "test")
    never = next(line for line in text.splitlines() if line.startswith("Never met: "))
    apart = next(line for line in text.splitlines()
                 if line.startswith("Not in code the VM traces: "))
    assert "STORE_NAME" not in never and "STORE_NAME (only in module or class bodies)" in apart
    assert "GET_AITER (only in coroutines" in apart
    assert "MATCH_KEYS" in never and "MATCH_KEYS" not in apart  # reachable: still never met
    assert "BINARY_OP" not in never

