"""scripts/check_layering.py on small trees: each kind of rule catches its include, and a
clean tree passes. The check itself runs on the repository as the CTest check.layering."""

import pathlib
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "check_layering.py"


def check(tree):
    return subprocess.run([sys.executable, str(SCRIPT), str(tree)], capture_output=True,
                          text=True)


def write(tree, path, include):
    file = tree / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(f"#include {include}\nint x;\n")


@pytest.mark.parametrize("path, include, why", [
    ("codegen/loop_ir/loop_ir_verify.cpp", "<ATen/ATen.h>", "the loop IR is target-neutral"),
    ("codegen/include/dynvm/codegen/glue_ir.h", "<llvm/IR/Module.h>", "the glue IR"),
    ("codegen/cuda/lower_loops_to_cuda.cpp", "<ATen/ATen.h>", "the CUDA lowering writes text"),
    ("codegen/cuda/cuda_kernel.cpp", "<llvm/IR/Module.h>", "LLVM belongs to the CPU target"),
    ("codegen/cuda/cuda_kernel.cpp", "<nvrtc.h>", "cuda/cuda_libraries.cpp only"),
    ("codegen/executor/compiled_graph.cpp", "<cuda.h>", "cuda/cuda_libraries.cpp only"),
    ("codegen/targets/targets.cpp", "<ATen/ATen.h>", "loads neither torch nor LLVM"),
    ("graph/graph.cpp", "<Python.h>", "not Python"),
    ("vm/vm.cpp", '"dynvm/codegen/cpu_kernel.h"', "does not generate code"),
])
def test_a_forbidden_include_is_reported(tmp_path, path, include, why):
    write(tmp_path, path, include)
    result = check(tmp_path)
    assert result.returncode == 1, result.stdout
    assert f"{path}:1: includes" in result.stdout and why in result.stdout, result.stdout


def test_allowed_includes_pass(tmp_path):
    write(tmp_path, "codegen/cuda/cuda_kernel.cpp", "<ATen/ATen.h>")
    write(tmp_path, "codegen/cuda/cuda_libraries.cpp", "<cuda.h>")
    write(tmp_path, "codegen/cpu/cpu_jit.cpp", "<llvm/IR/Module.h>")
    write(tmp_path, "codegen/glue/glue_jit.cpp", "<llvm/IR/Module.h>")
    write(tmp_path, "codegen/loop_ir/loop_ir.cpp", '"dynvm/graph/dtype.h"')
    result = check(tmp_path)
    assert result.returncode == 0, result.stdout
    assert "0 violation(s)" in result.stdout
