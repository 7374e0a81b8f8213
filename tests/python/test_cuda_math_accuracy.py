"""Accuracy of the float32 math in dynvm's CUDA kernels, in units in the last place (ulp)
of the exact result, against a float64 reference: the bounds docs/cuda_target.md
documents ("Math functions and their error bounds"). Each function is compiled alone into
a fused kernel and run over 2^22 inputs of its range (uniform samples and random bit
patterns). These run on the GPU machine and skip elsewhere; CI checks the CPU target's
bounds in tests/unit/codegen_cpu/fast_math_test.cpp."""

import math

import pytest
import torch

import dynvm

from test_cuda_kernels import _cuda_target_usable

pytestmark = pytest.mark.skipif(not _cuda_target_usable(),
                                reason="no GPU, or the CUDA target is not usable here")

N = 1 << 22

# name: (function, low, high, bound in ulp). The bounds are CUDA's documented ones for the
# libdevice functions the kernels call (expf, logf, ...; expm1f measured 1.41 ulp, above
# its documented 1), and for the expressions dynvm writes itself (sigmoid as
# 1 / (1 + expf(-x)), rsqrt as 1 / sqrtf(x)) what their parts give; docs/cuda_target.md
# lists the maxima measured on the H200. The ranges keep the results normal floats.
FUNCTIONS = {
    "exp": (torch.exp, -87.0, 88.0, 2.0),
    "expm1": (torch.expm1, -20.0, 88.0, 2.0),
    "log": (torch.log, 1e-37, 3e38, 1.0),
    "log1p": (torch.log1p, -0.999, 3e38, 1.0),
    "tanh": (torch.tanh, -12.0, 12.0, 2.0),
    "erf": (torch.erf, -4.0, 4.0, 2.0),
    "sigmoid": (torch.sigmoid, -80.0, 80.0, 3.5),
    "sin": (torch.sin, -100.0, 100.0, 2.0),
    "cos": (torch.cos, -100.0, 100.0, 2.0),
    "sqrt": (torch.sqrt, 1e-37, 3e38, 0.5),
    "rsqrt": (torch.rsqrt, 1e-37, 3e38, 1.5),
    "reciprocal": (torch.reciprocal, 1e-37, 3e37, 0.5),
}


def _inputs(low, high):
    g = torch.Generator(device="cuda").manual_seed(0)
    uniform = torch.rand(N // 2, device="cuda", generator=g, dtype=torch.float64)
    uniform = (low + (high - low) * uniform).float()
    # Random float32 bit patterns in [low, high]: every binade is sampled, which a uniform
    # sample of a wide range is not.
    bits = torch.randint(0, 1 << 31, (N,), device="cuda", generator=g, dtype=torch.int64)
    values = bits.to(torch.int32).view(torch.float32)
    values = torch.cat([values, -values])
    values = values[(values >= low) & (values <= high)][: N // 2]
    return torch.cat([uniform, values, torch.tensor([low, high], device="cuda").float()])


def _ulp_errors(got, reference):
    # The spacing of float32 numbers at the exact result: 2^(e - 23) for |r| in
    # [2^e, 2^(e+1)), and 2^-149 below the normal range.
    _, exponent = torch.frexp(reference)
    spacing = torch.ldexp(torch.ones_like(reference), (exponent - 1).clamp(min=-126) - 23)
    return (got.double() - reference).abs() / spacing


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_float32_math_within_its_documented_bound(name):
    fn, low, high, bound = FUNCTIONS[name]
    x = _inputs(low, high)

    def kernel(x):
        return fn(x)

    dynvm.reset()
    compiled = dynvm.compile(kernel)
    with torch.no_grad():
        got = compiled(x)
    assert dynvm.counters["kernels"] >= 1, "no fused kernel was compiled"
    reference = fn(x.double())
    finite = torch.isfinite(reference) & (reference.abs() <= torch.finfo(torch.float32).max)
    assert torch.isfinite(got[finite]).all()
    errors = _ulp_errors(got[finite], reference[finite])
    worst = int(errors.argmax())
    largest = float(errors[worst])
    print(f"{name}: {largest:.3f} ulp at x = {float(x[finite][worst])!r}")
    assert largest <= bound + 1e-3, (
        f"{name}: {largest:.3f} ulp at x = {float(x[finite][worst])!r} "
        f"(got {float(got[finite][worst])!r}, exact {float(reference[finite][worst])!r})")
    # Special values behave as eager's.
    special = torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0],
                           device="cuda")
    with torch.no_grad():
        torch.testing.assert_close(compiled(special), fn(special), equal_nan=True,
                                   atol=0, rtol=2e-7)
