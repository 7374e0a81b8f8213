"""Operators whose results mix tensors with undefined tensors (None in Python) and
integers, as CUDA's flash and cuDNN attention return them (output, logsumexp, no
cumulative sequence lengths, the longest sequences, random state): the trace records
them as graph operators. Before, each such call was a graph break, so every
half-precision `scaled_dot_product_attention` on CUDA broke its graph."""
import pytest
import torch

import dynvm
from conftest import codegen_built

pytestmark = pytest.mark.skipif(not dynvm.vm_available(), reason="the VM is not built")

BACKENDS = ["eager"] + (["dynvm"] if codegen_built() else [])

_LIBRARY = torch.library.Library("dynvm_results_test", "DEF")
# Like _scaled_dot_product_flash_attention: tensors, an undefined tensor, integers, a
# tensor, and state of a dtype the graph has no name for (flash attention's random state).
_LIBRARY.define("mixed(Tensor x) -> (Tensor, Tensor, Tensor, SymInt, SymInt, Tensor, Tensor)")


def _mixed(x):
    state = torch.zeros(2, dtype=torch.uint64, device=x.device)
    return x * 2, x.sum(-1), None, x.size(0), x.size(-1), x + 1, state


_LIBRARY.impl("mixed", _mixed, "CPU")
_LIBRARY.impl("mixed", _mixed, "Meta")
# A composite over it, as scaled_dot_product_attention is over the kernel ATen picks: the
# trace records `mixed`, whose results Python never sees.
_LIBRARY.define("front(Tensor x) -> (Tensor, Tensor, Tensor)")


def _front(x):
    doubled, sums, absent, rows, columns, shifted, _ = torch.ops.dynvm_results_test.mixed(x)
    assert absent is None
    return doubled.cos() + shifted, sums.exp(), shifted * rows + columns


_LIBRARY.impl("front", _front, "CompositeImplicitAutograd")
front = torch.ops.dynvm_results_test.front.default


def program(x):
    first, second, third = front(x.sin())
    return first * 2, second + third.sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_operator_with_undefined_and_integer_results_is_traced(backend):
    x = torch.randn(3, 5)
    report = dynvm.explain(program)(x)
    assert report.graph_count == 1 and not report.break_reasons, report
    assert "dynvm_results_test::mixed" in report.ops_per_graph[0]
    compiled = dynvm.compile(program, backend=backend)
    for _ in range(2):
        torch.testing.assert_close(compiled(x), program(x))
