"""Every primitive operator of fused kernels, in every dtype and broadcasting pattern it
takes, under backend "dynvm" against eager PyTorch, on each device with a code generator:
the CPU (LLVM) here, and CUDA (NVRTC) where a GPU is usable (the GPU machine).

The primitive set is the graph layer's one list (graph/primitive_ops.cpp, read through
dynvm._native.core().primitive_ops()); CASES says how user code reaches each operator, and
a test fails when an operator is added to the list without a case here. Each case runs
over six dtypes (float32, float16, bfloat16, int32, int64, bool) and, by the number of its
tensor operands, over shapes that broadcast in every way (equal, a row, a column, a
0-d tensor, a transposed view). Compiled results must equal eager's: same dtype, shape
and values (floats within a tolerance, integers and booleans exactly, NaN where eager has
NaN); where eager raises, the compiled function raises the same type.

    PYTHONPATH=build/python python3 -m pytest -q tests/python/test_primitive_differential.py
"""

import pytest
import torch
import torch.nn.functional as F

import dynvm
from conftest import codegen_built

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.bool]
TOLERANCE = {
    torch.float32: dict(rtol=1e-4, atol=1e-5),  # fast exp/log/tanh/erf/sigmoid, as in test_opinfo
    torch.float16: dict(rtol=2e-3, atol=2e-3),  # one rounding of a float32 result
    torch.bfloat16: dict(rtol=1.6e-2, atol=1.6e-2),
}

# operator -> (number of tensor operands, what user code writes). Several results per case
# where the operator has several forms (reductions over different dims, casts to several
# dtypes).
CASES = {
    "aten::neg": (1, lambda a: -a),
    "aten::exp": (1, torch.exp),
    "aten::log": (1, lambda a: torch.log(a.abs() + 1) if a.dtype != torch.bool else torch.log(a)),
    "aten::tanh": (1, torch.tanh),
    "aten::erf": (1, torch.erf),
    "aten::sigmoid": (1, torch.sigmoid),
    "aten::sqrt": (1, lambda a: torch.sqrt(a.abs()) if a.dtype != torch.bool else torch.sqrt(a)),
    "aten::rsqrt": (1, lambda a: torch.rsqrt(a.abs() + 1) if a.dtype != torch.bool
                    else torch.rsqrt(a)),
    "aten::abs": (1, torch.abs),
    "aten::relu": (1, torch.relu),
    "aten::reciprocal": (1, torch.reciprocal),
    "aten::sin": (1, torch.sin),
    "aten::cos": (1, torch.cos),
    "aten::log1p": (1, lambda a: torch.log1p(a.abs()) if a.dtype != torch.bool else torch.log1p(a)),
    "aten::expm1": (1, torch.expm1),
    "aten::logical_not": (1, torch.logical_not),
    "aten::add.Tensor": (2, lambda a, b: (a + b, torch.add(a, b, alpha=2))),
    "aten::add.Scalar": (1, lambda a: (a + 3, a + 0.5)),
    "aten::sub.Tensor": (2, lambda a, b: (a - b, torch.sub(a, b, alpha=3))),
    "aten::sub.Scalar": (1, lambda a: (a - 2, a - 1.5)),
    "aten::mul.Tensor": (2, lambda a, b: a * b),
    "aten::mul.Scalar": (1, lambda a: (a * 3, a * 0.25)),
    "aten::div.Tensor": (2, lambda a, b: a / b),
    "aten::div.Scalar": (1, lambda a: (a / 4, a / 0.5)),
    "aten::pow.Tensor_Scalar": (1, lambda a: (a ** 2, a ** 3, a.abs() ** 0.5)),
    # (Integer results stay ATen calls: the operator is primitive for floating results.)
    "aten::pow.Scalar": (1, lambda a: (0.9 ** a.float(), 2.0 ** a) if a.is_floating_point()
                         else 0.9 ** a.float()),
    "aten::maximum": (2, torch.maximum),
    "aten::minimum": (2, torch.minimum),
    "aten::eq.Tensor": (2, lambda a, b: a == b),
    "aten::eq.Scalar": (1, lambda a: a == 1),
    "aten::ne.Tensor": (2, lambda a, b: a != b),
    "aten::ne.Scalar": (1, lambda a: a != 0),
    "aten::lt.Tensor": (2, lambda a, b: a < b),
    "aten::lt.Scalar": (1, lambda a: a < 0.5),
    "aten::le.Tensor": (2, lambda a, b: a <= b),
    "aten::le.Scalar": (1, lambda a: a <= 1),
    "aten::gt.Tensor": (2, lambda a, b: a > b),
    "aten::gt.Scalar": (1, lambda a: a > -0.5),
    "aten::ge.Tensor": (2, lambda a, b: a >= b),
    "aten::ge.Scalar": (1, lambda a: a >= 0),
    "aten::logical_and": (2, torch.logical_and),
    "aten::logical_or": (2, torch.logical_or),
    "aten::where.self": (3, lambda c, a, b: (torch.where(c > 0, a, b), torch.where(c > 0, a, 2))),
    "aten::clamp": (1, lambda a: (a.clamp(-1, 2), a.clamp(min=0), a.clamp(max=1))),
    "aten::_to_copy": (1, lambda a: (a.to(torch.float32), a.to(torch.int32), a.to(torch.bfloat16),
                                     a.to(torch.float16), a.to(torch.bool), a.to(torch.int64))),
    "aten::sum.dim_IntList": (1, lambda a: (a.sum(-1), a.sum(0, keepdim=True), a.sum((0, 1)))),
    "aten::amax": (1, lambda a: (a.amax(-1), a.amax(0, keepdim=True))),
    "aten::amin": (1, lambda a: (a.amin(-1), a.amin(0, keepdim=True))),
    # Views: with an operator after them, so that a kernel reads through the view.
    "aten::view": (1, lambda a: a.contiguous().view(-1) + 1),
    "aten::reshape": (1, lambda a: a.reshape(a.shape[-1], -1) * 2),
    "aten::expand": (1, lambda a: a[:1].expand(3, *a.shape[1:]) + 1),
    "aten::unsqueeze": (1, lambda a: a.unsqueeze(1) * a.unsqueeze(0)[..., :1]),
    "aten::squeeze.dim": (1, lambda a: a[:1].squeeze(0) + 1),
    "aten::permute": (1, lambda a: a.permute(1, 0) - 1),
    "aten::t": (1, lambda a: a.t() * 3),
    "aten::transpose.int": (1, lambda a: a.transpose(0, 1) + a.transpose(0, 1)),
    "aten::slice.Tensor": (1, lambda a: a[1:5, ::2] * 2),
    "aten::select.int": (1, lambda a: a[2] + a[:, 3].sum()),
    # Padded windows, an uneven kernel and stride with ceil_mode, and a pool fused with a
    # pointwise consumer (the indices of max_pool2d_with_indices are unused in each).
    "aten::max_pool2d": (1, lambda a: (
        F.max_pool2d(a[None], 3, 2, 1),
        F.max_pool2d(a[None, None], (2, 3), stride=(1, 2), padding=(1, 1), ceil_mode=True),
        F.max_pool2d(a[None, None] * 2, 2) + 1)),
}

# Shapes of the tensor operands, by their number: every way they broadcast. "T" marks an
# operand made as a transposed view (its strides are not row-major).
PATTERNS = {
    1: [[(8, 33)], [("T", 33, 8)]],
    2: [[(8, 33), (8, 33)], [(8, 33), (33,)], [(8, 1), (1, 33)], [(8, 33), ()],
        [("T", 33, 8), (8, 33)]],
    3: [[(8, 33), (8, 33), (8, 33)], [(8, 1), (33,), (8, 33)], [(), (8, 33), ("T", 33, 8)]],
}


def devices():
    out = []
    if codegen_built():
        out.append("cpu")
    if torch.cuda.is_available() and any(
            t["name"] == "cuda" and t["usable"] for t in dynvm.config.targets()):
        out.append("cuda")
    return out


def make(shape, dtype, device, seed):
    generator = torch.Generator().manual_seed(seed)
    transposed = len(shape) > 0 and shape[0] == "T"
    sizes = shape[1:] if transposed else shape
    if dtype.is_floating_point:
        t = torch.randn(sizes, generator=generator) * 2
    elif dtype == torch.bool:
        t = torch.randint(0, 2, sizes, generator=generator)
    else:
        t = torch.randint(-5, 6, sizes, generator=generator)
    t = t.to(dtype).to(device)
    return t.t() if transposed else t


def outcome(fn, args):
    try:
        result = fn(*args)
    except Exception as e:  # noqa: BLE001 (the exception's type is compared)
        return type(e)
    return result if isinstance(result, tuple) else (result,)


def assert_same(got, want, where):
    if isinstance(want, type):
        assert isinstance(got, type) and issubclass(got, want), f"{where}: eager raised {want}, compiled gave {got}"
        return
    assert not isinstance(got, type), f"{where}: compiled raised {got}, eager returned"
    assert len(got) == len(want), where
    for i, (g, w) in enumerate(zip(got, want)):
        at = f"{where}, result {i}"
        assert (g.dtype, g.shape, g.device) == (w.dtype, w.shape, w.device), at
        if w.dtype.is_floating_point:
            torch.testing.assert_close(g, w, equal_nan=True, msg=lambda m: f"{at}: {m}",
                                       **TOLERANCE[w.dtype])
        else:
            assert torch.equal(g, w), f"{at}: {g} != {w}"


def test_every_primitive_has_a_case():
    primitives = {op for op, _ in dynvm._native.core().primitive_ops()}
    assert primitives == set(CASES), (
        f"no case for {sorted(primitives - set(CASES))}; "
        f"not primitives: {sorted(set(CASES) - primitives)}")


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("op", list(CASES))
def test_primitive_against_eager(op, dtype, device):
    arity, fn = CASES[op]
    dynvm.reset()
    compiled = dynvm.compile(lambda *args: fn(*args))  # torch's builtins are not compiled
    eager_raised = False
    for p, shapes in enumerate(PATTERNS[arity]):
        args = [make(shape, dtype, device, seed=p * 10 + k) for k, shape in enumerate(shapes)]
        want = outcome(fn, [a.clone() for a in args])
        with torch.no_grad():
            got = outcome(compiled, [a.clone() for a in args])
        assert_same(got, want, f"{op} {dtype} on {device}, operands {shapes}")
        eager_raised = eager_raised or isinstance(want, type)
    if not eager_raised:  # a trace that raises as eager does counts as a failed graph
        assert dynvm.counters["graph_failures"] == 0
        # A fused kernel ran, unless the operator is the identity here (abs of a bool,
        # which CUDA's eager takes: the graph returns its input).
        if not (op == "aten::abs" and dtype == torch.bool):
            assert dynvm.counters["kernels"] > 0
