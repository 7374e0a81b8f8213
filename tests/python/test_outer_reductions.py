"""Reductions over an outer dimension under both backends, against eager: the programs of
issue 12, which backend "dynvm" got wrong (a CPU kernel's per-lane reduction with fewer
than four iterations, or with a transcendental body, ran no iteration at all)."""
import pytest
import torch
import torch.nn.functional as F

import dynvm
from conftest import codegen_built

pytestmark = pytest.mark.skipif(not dynvm.vm_available(), reason="the VM is not built")

BACKENDS = ["eager"] + (["dynvm"] if codegen_built() else [])

PROGRAMS = {
    "stack_sum": lambda a, b: torch.stack((a, b)).sum(0),
    "cat_view_sum": lambda a, b: torch.cat((a, b)).view(2, 10, 10).sum(0),
    "stack_mean": lambda a, b: torch.stack((a, b)).mean(0),
    "softmax_numerator_sum": lambda a, b: (a - a.amax(0, keepdim=True)).exp().sum(0),
    "logsumexp": lambda a, b: a.logsumexp(0),
    "stack_amax": lambda a, b: torch.stack((a, b)).amax(0),
    "three_rows_sum": lambda a, b: a[:3].sum(0) + b[:3].exp().sum(0),
    "softmax_dim0": lambda a, b: F.softmax(a, 0) * b,
    "log_softmax_dim0": lambda a, b: F.log_softmax(a * 2, 0),
    "var_dim0": lambda a, b: torch.stack((a, b)).var(0),
    "embedding_bag_sum": lambda a, b: F.embedding_bag(
        torch.tensor([0, 2, 4, 5, 4, 3]), a, torch.tensor([0, 3]), mode="sum"),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_matches_eager(name, backend):
    fn = PROGRAMS[name]
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(10, 10, generator=gen)
    b = torch.randn(10, 10, generator=gen)
    expected = fn(a, b)
    compiled = dynvm.compile(fn, backend=backend)
    for _ in range(2):
        torch.testing.assert_close(compiled(a, b), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(64, 32), (37, 300), (5, 3, 40)])
def test_column_sums_fused_with_full_size_outputs(backend, shape):
    # A bias and a layer-norm gradient's column sums with the full-size outputs a
    # backward computes beside them (tests/data/codegen_cpu/column_sum_with_full_outputs.txt),
    # and a full-size output that uses a column sum (which keeps the row schedule).
    def fn(g, x, w):
        gw = g * w
        return g.sum(0), (g * x).sum(0), gw, torch.tanh(gw * x), x - x.sum(0)

    gen = torch.Generator().manual_seed(0)
    g, x = torch.randn(*shape, generator=gen), torch.randn(*shape, generator=gen)
    w = torch.randn(shape[-1], generator=gen)
    expected = fn(g, x, w)
    compiled = dynvm.compile(fn, backend=backend)
    for _ in range(2):
        torch.testing.assert_close(compiled(g, x, w), expected, rtol=1e-5, atol=1e-5)
