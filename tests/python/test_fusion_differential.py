"""Differential tests of the fusion pipeline: the programs of a fixed seed of the fusion
fuzzer (fuzz/fusion_fuzz.py: one to five tensor ops over random inputs, layouts and
dtypes) compiled with backend "dynvm" and backend "eager" must compute what eager
PyTorch computes, raise what it raises and mutate inputs as it does. A failure prints the
minimised program as runnable source (docs/fuzzing.md).

Also here: the harness itself (it flags wrong values, missing exceptions and missing
mutations, and minimises), the coverage of the fixed programs, and the programs of the
bugs the fuzzer found."""

import pathlib
import sys

import pytest
import torch

import dynvm
from conftest import needs_codegen

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "fuzz"))
import fusion_fuzz  # noqa: E402

pytestmark = pytest.mark.skipif(
    not getattr(dynvm, "vm_available", lambda: False)(), reason="the VM is not built yet"
)

SEED = 12
CHUNKS = 8
DYNVM_PROGRAMS = 1600  # with EAGER_PROGRAMS: about two minutes of CPU, kernels compiled afresh
EAGER_PROGRAMS = 1600


def run_chunk(backend, total, chunk):
    per_chunk = total // CHUNKS
    summary = fusion_fuzz.run_campaign(SEED, [backend], start=chunk * per_chunk,
                                       count=per_chunk, calls=4, max_failures=1,
                                       minimise_budget_s=60)
    assert summary.programs == per_chunk or summary.failures
    if summary.failures:
        pytest.fail(summary.failures[0].report(), pytrace=False)
    return summary


@needs_codegen
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_backend_dynvm_matches_eager(chunk):
    summary = run_chunk("dynvm", DYNVM_PROGRAMS, chunk)
    # Most programs fuse something: a change that made every group fall back to ATen
    # would otherwise pass unnoticed.
    with_kernels = summary.outcomes["dynvm: with kernels"]
    assert with_kernels > 0.7 * summary.programs, summary.text()


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_backend_eager_matches_eager(chunk):
    run_chunk("eager", EAGER_PROGRAMS, chunk)


def test_the_programs_cover_every_op_dtype_and_layout():
    summary = fusion_fuzz.Summary()
    for index in range(DYNVM_PROGRAMS):
        summary.record(fusion_fuzz.generate(SEED, index), "none", fusion_fuzz.RunInfo())
    ops = set(summary.ops)
    expected = (set(fusion_fuzz.UNARY) | set(fusion_fuzz.BINARY) | set(fusion_fuzz.COMPARE) |
                set(fusion_fuzz.CONVERSIONS) | set(fusion_fuzz.INPLACE) | set(fusion_fuzz.IDIOMS) |
                {"pow_scalar", "sum", "mean", "amax", "amin", "var", "std", "var_mean",
                 "logsumexp", "softmax", "log_softmax", "layer_norm", "where", "clamp",
                 "masked_fill", "addcmul", "addcdiv", "lerp", "cat", "stack", "split",
                 "chunk", "reshape", "view", "permute", "transpose", "expand", "slice",
                 "select", "unsqueeze", "squeeze", "matmul", "full_like"})
    assert expected <= ops, sorted(expected - ops)
    assert set(summary.dtypes) >= {"float32", "float64", "float16", "bfloat16", "int64", "bool",
                                   "python float", "python int", "python bool"}
    assert set(summary.layouts) == set(fusion_fuzz.LAYOUTS)
    assert set(summary.ranks) == {0, 1, 2, 3, 4}
    for tag in ("reduce:one-dim", "reduce:several-dims", "reduce:all-dims", "keepdim",
                "reduce:0-d", "input:size-0", "input:size-1", "values:special", "view:step"):
        assert summary.tags[tag] > 0, tag


def test_programs_are_reproducible():
    for index in (0, 7, 123):
        assert fusion_fuzz.generate(SEED, index).source() == \
            fusion_fuzz.generate(SEED, index).source()


# ---- the harness


def _program(body, inputs):
    """A Program from statements written by hand: `body` is a list of (target, expr)
    with {0}, {1} naming `args`."""
    stmts = [fusion_fuzz.Stmt(target, expr, list(args), op)
             for target, expr, args, op in body]
    return fusion_fuzz.Program(0, 0, inputs, stmts, [body[-1][0]], generator_seed=5)


def _sum_program():
    a = fusion_fuzz.InputSpec("a", "float32", (2, 10, 10))
    b = fusion_fuzz.InputSpec("b", "float32", (2, 10, 10), layout="permuted",
                              layout_arg=(0, 2, 1))
    return _program([("v0", "{0} * 2", ["a"], "mul"),
                     ("v1", "torch.exp({0})", ["b"], "exp"),
                     ("v2", "{0}.sum(0)", ["v0"], "sum")], [a, b])


def test_harness_flags_a_wrong_result_and_minimises_it():
    def off_by_one(f):
        return lambda *args: f(*args) + 1

    program = _sum_program()
    failure, _ = fusion_fuzz.check(program, "eager", calls=1, compile_fn=off_by_one)
    assert failure is not None and failure.kind == "mismatch"
    small = fusion_fuzz.minimise(failure, calls=1, compile_fn=off_by_one)
    # One statement and the input it reads remain, at the smallest sizes.
    assert len(small.program.stmts) == 1
    assert [i.name for i in small.program.inputs] == ["a"]
    assert small.program.inputs[0].shape == (1, 1, 1)
    report = small.report()
    assert "def f(a):" in report and "dynvm.compile(f, backend='eager')" in report
    namespace = {}
    exec(compile(report[report.index("import torch"):], "<report>", "exec"), namespace)


def test_harness_flags_missing_exceptions_and_mutations():
    a = fusion_fuzz.InputSpec("a", "int64", (3,))
    raising = _program([("v0", "{0}.mean()", ["a"], "mean")], [a])  # mean of int64 raises

    def swallow(f):
        def call(*args):
            try:
                return f(*args)
            except RuntimeError:
                return torch.zeros(())
        return call

    failure, _ = fusion_fuzz.check(raising, "eager", calls=1, compile_fn=swallow)
    assert failure is not None and failure.kind == "no-exception"

    mutating = _program([("v0", "{0}.add_(1)", ["a"], "add_")], [a])

    def on_a_copy(f):
        return lambda x: f(x.clone())

    failure, _ = fusion_fuzz.check(mutating, "eager", calls=1, compile_fn=on_a_copy)
    assert failure is not None and failure.kind == "mutation"


def test_harness_accepts_rounding_and_requires_equal_dtypes():
    compare = fusion_fuzz.compare_tensor
    x = torch.tensor([1.0, 2.0, 3.0])
    assert compare(x * (1 + 1e-6), x, [], "r") is None
    assert compare(x + 0.1, x, [], "r") is not None
    assert "dtype" in compare(x.double(), x, [], "r")
    nan = torch.tensor([float("nan"), 1.0])
    assert compare(nan, nan.clone(), [], "r") is None
    assert compare(torch.tensor([0.0, 1.0]), nan, [], "r") is not None
    # Where eager itself is far from the float64 result, compiled may be as far...
    one, eager = torch.tensor([1.0]), torch.tensor([1.1])
    assert compare(one, eager, [], "r") is not None
    assert compare(one, eager, [torch.tensor([1.05], dtype=torch.float64)], "r") is None
    # ... and where perturbing the inputs by a rounding moves the result as far.
    exact = torch.tensor([1.1], dtype=torch.float64)
    assert compare(one, eager, [exact, exact + 0.001], "r") is not None
    assert compare(one, eager, [exact, exact + 0.05], "r") is None


# ---- programs of the bugs the fuzzer found (each failed before its fix)

F32, I64, BOOL = "float32", "int64", "bool"
FOUND = {
    # Lane reductions of fewer than four iterations ran none (commit 310fc8a).
    "stack_sum": (["torch.stack(({0}, {1})).sum(0)"], [(F32, (10, 10)), (F32, (10, 10))]),
    "logsumexp_outer": (["torch.logsumexp({0}, -2, keepdim=True)"], [(F32, (2, 8))]),
    # addcmul of integers multiplied by the value 0.5 instead of its truncation, 0.
    "addcmul_int": (["torch.addcmul({0}, {0}, {0}, value=0.5)"], [(I64, (4, 5))]),
    # Activations of integers and bools were computed where eager raises.
    "gelu_int": (["torch.nn.functional.gelu({0})"], [(I64, (4, 5))]),
    "hardswish_bool": (["torch.nn.functional.hardswish({0})"], [(BOOL, (4, 5))]),
    "lerp_int": (["torch.lerp({0}, {0}, 0.25)"], [(I64, (4, 5))]),
    "abs_bool": (["torch.abs({0})"], [(BOOL, (4, 5))]),
    "relu_bool": (["torch.relu({0})"], [(BOOL, (4, 5))]),
    "clamp_bool": (["torch.clamp({0}, max=False)"], [(BOOL, (4, 5))]),
    # rsub of a bool scalar was computed where eager raises.
    "rsub_bool": (["torch.rsub({0}, True)"], [(F32, (4, 5))]),
    # layer_norm with weights of another dtype than the input's was computed where eager
    # raises.
    "layer_norm_int_weight": (["torch.nn.functional.layer_norm({0}, (8,), {1}, {1})"],
                              [(F32, (3, 8)), (I64, (8,))]),
    # An in-place op reading a view of what it writes read it before writing (functional),
    # where eager reads the rest of it after the first element was written.
    "overlapping_sub_": (["{0}.select(1, -1)", "{1}.chunk(2, 0)[0]", "{1}.sub_({2}, alpha=2)"],
                         [(F32, (2, 2))]),
    # A view written in place was fused into a group as a copy: the input kept its value.
    "expand_add_": (["{0}.expand_as({0})", "{1}.expm1()", "{1}.add_(3)"], [(F32, (3, 1))]),
}


@needs_codegen
@pytest.mark.parametrize("name", sorted(FOUND))
@pytest.mark.parametrize("backend", ["dynvm", "eager"])
def test_found_program(name, backend):
    """Statement k defines v<k>; {0}, {1}, ... are the inputs a, b, ..., then v0, v1, ..."""
    exprs, specs = FOUND[name]
    inputs = [fusion_fuzz.InputSpec("ab"[i], dtype, shape) for i, (dtype, shape) in
              enumerate(specs)]
    names = [i.name for i in inputs] + [f"v{k}" for k in range(len(exprs))]
    stmts = [fusion_fuzz.Stmt(f"v{k}", expr, names, name) for k, expr in enumerate(exprs)]
    program = fusion_fuzz.Program(0, 0, inputs, stmts, [f"v{len(exprs) - 1}"],
                                  generator_seed=5)
    if name == "expand_add_":
        program.outputs = ["v1"]  # nothing reads the input after the write
    failure, _ = fusion_fuzz.check(program, backend)
    assert failure is None, failure.report()
