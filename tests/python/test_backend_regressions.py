"""Regression tests for wrong results the OpInfo sweep (test_opinfo.py) found under the
backends: each program gave a result other than eager's before its fix."""
import pytest
import torch
import torch.nn.functional as F

import dynvm
from conftest import codegen_built

pytestmark = pytest.mark.skipif(not dynvm.vm_available(), reason="the VM is not built")

BACKENDS = ["eager"] + (["dynvm"] if codegen_built() else [])


def same_as_eager(fn, *args, backend):
    """fn compiled under `backend` gives eager's values, dtype, shape and strides."""
    expected = fn(*args)
    actual = dynvm.compile(fn, backend=backend)(*args)
    for e, a in zip(expected if isinstance(expected, tuple) else (expected,),
                    actual if isinstance(actual, tuple) else (actual,)):
        torch.testing.assert_close(a, e, equal_nan=True)
        assert a.stride() == e.stride()


@pytest.mark.parametrize("backend", BACKENDS)
def test_embedding_bag_with_strided_indices(backend):
    # embedding_bag makes its indices contiguous for _embedding_bag_forward_only, which
    # reads them as such; decompose dropped that copy as an identity.
    weight = torch.randn(10, 5)
    indices = torch.tensor([9, 0, 6, 0, 3, 0, 4, 0, 5, 0])[::2]
    offsets = torch.tensor([0, 3])
    weights = torch.randn(5)
    same_as_eager(lambda w, i, o, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p),
                  weight, indices, offsets, weights, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_contiguous_of_permuted_temporary_is_returned_contiguous(backend):
    # decompose returned the permuted temporary itself: view(-1) of the result failed.
    fn = lambda x: (x.t() * 2).contiguous()  # noqa: E731
    same_as_eager(fn, torch.randn(3, 4), backend=backend)
    assert dynvm.compile(fn, backend=backend)(torch.randn(3, 4)).view(-1).shape == (12,)


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_op_that_cannot_broadcast_into_its_input_raises(backend):
    # torch 1.13's meta kernel of logical_and_ resized the fake [5, 1] input to [5, 5]
    # where eager raises; backend dynvm then returned a result instead of the error.
    fn = dynvm.compile(lambda a, b: a.logical_and_(b), backend=backend)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        fn(torch.randn(5, 1), torch.randn(5, 5))


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_op_broadcasting_its_other_operand_stays_in_the_graph(backend):
    def fn(a, b):
        return (a * 2).logical_or_(b).sum()

    a, b = torch.randn(5, 5), torch.randn(5, 1)
    explained = dynvm.explain(fn)(a, b)
    assert explained.graph_count == 1 and explained.graph_break_count == 0
    same_as_eager(fn, a, b, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_copy_into_a_fresh_tensor_returns_a_tensor_of_its_own(backend):
    # torch.diff(x, n=0) is zeros_like(x).copy_(x): functionalization made the result x
    # itself, so writing into the result wrote into the argument.
    x = torch.randn(4)
    result = dynvm.compile(lambda t: torch.diff(t, 0, 0), backend=backend)(x)
    assert torch.equal(result, x) and result.data_ptr() != x.data_ptr()


@pytest.mark.parametrize("backend", BACKENDS)
def test_copy_of_an_argument_taken_before_it_changes(backend):
    def fn(x, row):
        kept = torch.zeros(2, 3).copy_(row)  # a broadcast copy of the row
        row.add_(1)
        return kept, torch.zeros_like(x).copy_(x)

    x, row = torch.randn(2, 3), torch.randn(3)
    row_before = row.clone()
    kept, copied = dynvm.compile(fn, backend=backend)(x, row)
    assert torch.equal(row, row_before + 1)
    assert torch.equal(kept, row_before.expand(2, 3))
    assert kept.stride() == (3, 1) and copied.data_ptr() != x.data_ptr()


# Fills that ATen's checked conversion rejects ("value cannot be converted to type ...
# without overflow"): decompose turned them into arithmetic that wrapped, saturated or
# lost the fill (fill_ of 300 into uint8 gave 44, masked_fill of 1e20 into int64 filled
# nothing).
OVERFLOWING_FILLS = {
    "fill_int64_1e20": (lambda x: x.clone().fill_(1e20), torch.tensor([1, 2])),
    "fill_uint8_300": (lambda x: (x + 1).fill_(300), torch.tensor([1, 2], dtype=torch.uint8)),
    "fill_float32_1e300": (lambda x: (x * 2).fill_(1e300), torch.tensor([1.0, 2.0])),
    "masked_fill_int64_nan": (lambda x: x.masked_fill(x > 1, float("nan")),
                              torch.tensor([1, 2])),
    "masked_fill_complex_into_int64": (
        lambda x: x.masked_fill(x > 1, torch.tensor(1j, dtype=torch.complex64)),
        torch.tensor([1, 2])),
    "masked_fill_float64_into_float32": (
        lambda x: x.masked_fill(x > 1, torch.tensor(1e300, dtype=torch.float64)),
        torch.tensor([1.0, 2.0])),
    "threshold_int64_1e20": (lambda x: F.threshold(x, 1, 1e20), torch.tensor([1, 2])),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(OVERFLOWING_FILLS))
def test_fill_that_does_not_fit_raises(name, backend):
    fn, x = OVERFLOWING_FILLS[name]
    with pytest.raises(RuntimeError, match="without overflow"):
        fn(x)
    with pytest.raises(RuntimeError, match="without overflow"):
        dynvm.compile(fn, backend=backend)(x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fills_that_fit_keep_their_values(backend):
    def fn(x, y):
        return (x.masked_fill(x > 1, -1), x.clone().fill_(2.7), y.masked_fill(y > 0, 255),
                torch.full_like(y, 7), F.threshold(x, 1, 10))

    same_as_eager(fn, torch.tensor([1, 2, 3], dtype=torch.uint8),
                  torch.tensor([0, 2], dtype=torch.int16), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("program", [
    lambda a, b: torch.sub(torch.ne(b, a), 0.1, alpha=2),
    lambda a, b: (a > 0) - b,
    lambda a, b: b - (a > 0),
    lambda a, b: torch.rsub(a > 0, 1.5),
])
def test_subtraction_with_a_bool_operand_raises(program, backend):
    # torch 2.14's meta kernel of sub accepts a bool tensor that eager's kernel rejects,
    # and the result type (float) hid the bool operand: the fused sub returned a value
    # (found by the fusion fuzzer).
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    message = "Subtraction, the `-` operator, with a bool tensor"
    # NotImplementedError under torch 2.14, RuntimeError under 2.11: the compiled call
    # raises what eager raises.
    with pytest.raises((NotImplementedError, RuntimeError), match=message) as eager:
        program(a, b)
    with pytest.raises(type(eager.value), match=message):
        dynvm.compile(program, backend=backend)(a, b)


@pytest.mark.parametrize("backend", BACKENDS)
def test_group_norm_of_a_channels_last_input_keeps_its_layout(backend):
    # Torch 2's kernel returns a channels-last result for a channels-last input (its meta
    # kernel says row-major); the decomposition returned row-major (OpInfo, torch 2.14).
    x = torch.randn(2, 6, 3, 5).to(memory_format=torch.channels_last)
    weight, bias = torch.randn(6), torch.randn(6)
    same_as_eager(lambda x, w, b: torch.native_group_norm(x, w, b, 2, 6, 15, 2, 1e-5)[0],
                  x, weight, bias, backend=backend)


def _two_equal_results_then_written(c, xs):
    xs.append(c * 2)
    xs.append(c * 2)
    n = c.sum().item()  # a graph break: the two results leave the graph
    for t in xs:
        t.sub_(1)
    return n


def test_equal_results_that_leave_the_graph_stay_two_tensors():
    # Common-subexpression elimination merged the two `c * 2` nodes, so the list held one
    # tensor twice and the in-place subtraction after the break ran twice on it ([0, 0]
    # where eager has [1, 1] for each); found by the program fuzzer (seed 77, program 1722).
    compiled = dynvm.compile(_two_equal_results_then_written)
    c = torch.ones(2)
    got, expected = [], []
    assert compiled(c, got) == _two_equal_results_then_written(c, expected)
    assert got[0] is not got[1]
    for g, e in zip(got, expected):
        assert torch.equal(g, e)
