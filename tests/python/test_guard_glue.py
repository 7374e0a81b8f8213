"""Compiled guards (host glue through the ORC JIT) in use: when a variant's guards compile,
that a compiled guard failing still recompiles, that DYNVM_GUARD_GLUE turns them off or on
at once, and the whole break corpus with every variant's guards compiled from the start."""

import os
import pathlib
import subprocess
import sys

import torch

import dynvm
from conftest import needs_codegen, run_python

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent


class Scale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(4))
        self.factor = 3

    def forward(self, x):
        return x * self.weight * self.factor


@needs_codegen
def test_guards_compile_once_a_variant_is_reused_and_still_fail_when_they_should():
    model = Scale()
    compiled = dynvm.compile(model, backend="eager")
    x = torch.randn(4)
    with torch.no_grad():
        for _ in range(6):
            assert torch.equal(compiled(x), model(x))
        assert dynvm.counters["guard_glues"] == 1
        assert dynvm.counters["recompiles"] == 0
        # Each of these fails one compiled guard: another dtype, a changed constant
        # attribute, a replaced parameter. Every result must still be eager's.
        x64 = torch.randn(4, dtype=torch.float64)
        assert torch.equal(compiled(x64), model(x64))
        model.factor = 5
        assert torch.equal(compiled(x), model(x))
        model.weight = torch.nn.Parameter(torch.full((1,), 2.0))  # broadcasts
        assert torch.equal(compiled(x), model(x))
    assert dynvm.counters["recompiles"] == 3


def test_dynvm_guard_glue_off_never_compiles_guards():
    code = (
        "import torch, dynvm\n"
        "f = dynvm.compile(lambda x: x + 1, backend='eager')\n"
        "x = torch.randn(3)\n"
        "for _ in range(10): assert torch.equal(f(x), x + 1)\n"
        "print(dynvm.counters['guard_glues'], dynvm.counters['cache_hits'])\n")
    result = run_python(code, DYNVM_GUARD_GLUE="off")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0", "9"]


@needs_codegen
def test_guard_sets_over_the_limit_stay_with_the_interpreter():
    code = (
        "import torch, dynvm\n"
        "f = dynvm.compile(lambda x, y: x + y, backend='eager')\n"
        "x = torch.randn(3)\n"
        "for _ in range(6): assert torch.allclose(f(x, x + 1), x + (x + 1))\n"
        "print(dynvm.counters['guard_glues'], dynvm.counters['glue_runs'])\n")
    # GRAD_MODE, AUTOCAST and two TENSOR_MATCH
    over = run_python(code, DYNVM_GUARD_GLUE_MAX="3")
    assert over.returncode == 0, over.stderr
    assert over.stdout.split() == ["0", "0"]
    at_limit = run_python(code, DYNVM_GUARD_GLUE_MAX="4")
    assert at_limit.returncode == 0, at_limit.stderr
    assert at_limit.stdout.split() == ["1", "3"]


@needs_codegen
def test_dynvm_guard_glue_0_compiles_when_the_variant_is_built():
    code = (
        "import torch, dynvm\n"
        "f = dynvm.compile(lambda x: x + 1, backend='eager')\n"
        "f(torch.randn(3))\n"
        "print(dynvm.counters['guard_glues'])\n")
    result = run_python(code, DYNVM_GUARD_GLUE="0")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1"]


@needs_codegen
def test_break_corpus_with_every_variant_checked_by_compiled_guards():
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         str(ROOT / "tests" / "python" / "test_break_corpus.py")],
        capture_output=True, text=True, env=dict(os.environ, DYNVM_GUARD_GLUE="0"),
        timeout=900, cwd=ROOT)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout


@needs_codegen
def test_dynvm_logs_glue_prints_the_program_and_its_llvm_ir():
    code = (
        "import torch, dynvm\n"
        "f = dynvm.compile(lambda x: x * 2, backend='eager')\n"
        "f(torch.randn(3))\n")
    result = run_python(code, DYNVM_GUARD_GLUE="0", DYNVM_LOGS="glue")
    assert result.returncode == 0, result.stderr
    # The variant's native function: its guards, then the run of its graph.
    assert "[dynvm glue] variant:\nglue variant params 6 slots " in result.stderr
    for helper in ("check_guard 2", "begin_run 3", "bind_input 3", "run_step 2",
                   "wrap_output 2"):
        assert "helper " + helper + "\n" in result.stderr, helper
    assert "[dynvm glue] variant LLVM IR:" in result.stderr
    assert "define i64 @dynvm_glue_" in result.stderr
