"""The VM against eager PyTorch on the corpus (tests/python/corpus): every function,
compiled with backend="eager" and fullgraph=True, must give eager's results and
side effects on its inputs from exactly one graph with no break, trace once, and
serve a second call with new values of the same shapes from the same variant; a few
functions called with another shape must retrace exactly once.

Skipped as a whole until the VM is built (dynvm.vm_available())."""

import pytest
import torch

import corpus
import dynvm
from corpus import arithmetic, control_flow, dtype_shape, loops, methods, modules, slicing
from corpus._case import Args, fixed_module
from corpus._compare import (assert_aliasing_same, assert_same, call, clone, op_count,
                             tensor_leaves)
from corpus._eager_checks import signature

pytestmark = pytest.mark.skipif(
    not getattr(dynvm, "vm_available", lambda: False)(), reason="the VM is not built yet"
)

# Corpus functions the VM does not capture in one graph yet, each with the reason. They
# are strict expected failures: one that starts passing fails the run until it is
# removed from this table (docs/status.md lists the same gaps).
KNOWN_GAPS = {
    "module_forward_hooks": "nn.Module hooks are a graph break",
}


def _params(cases):
    return [pytest.param(c, id=c.name, marks=pytest.mark.xfail(strict=True,
                                                                reason=KNOWN_GAPS[c.name]))
            if c.name in KNOWN_GAPS else pytest.param(c, id=c.name) for c in cases]


CASES = corpus.all_cases()
_PLAIN = (bool, int, float, str, type(None), torch.dtype, torch.device)


def _compile(fn):
    return dynvm.compile(fn, backend="eager", fullgraph=True)


def _counters():
    return {key: dynvm.counters[key] for key in
            ("frames_traced", "cache_hits", "graph_breaks", "recompiles")}


def _only_plain_values(obj):
    """True when `obj` holds only tensors, Python scalars and builtin containers: inputs
    whose variant must be reused for new values of the same shapes. (A module or user
    object may be guarded by identity, so a new one may retrace.)"""
    if isinstance(obj, (torch.Tensor, *_PLAIN)):
        return True
    if isinstance(obj, Args):
        return _only_plain_values(obj.args) and _only_plain_values(obj.kwargs)
    if isinstance(obj, (list, tuple)):
        return all(_only_plain_values(item) for item in obj)
    if type(obj) is dict:
        return all(_only_plain_values(value) for value in obj.values())
    return False


def _grad_inputs(args):
    return [(path, t) for path, t in tensor_leaves(args) if t.requires_grad and t.is_leaf]


def _backward_through_outputs(result):
    outputs = [t for _, t in tensor_leaves(result, "result") if t.requires_grad]
    if outputs:
        sum(o.sum() for o in outputs).backward()
    return bool(outputs)


def _assert_call_matches_eager(compiled, case, seed):
    """One eager and one compiled call on separate copies of the inputs drawn with
    `seed`: results, aliasing of inputs, side effects on inputs, and gradients agree."""
    inputs = case.inputs(seed)
    eager_in, compiled_in = clone(inputs), clone(inputs)
    expected = call(case.fn, eager_in)
    actual = call(compiled, compiled_in)
    assert_same(actual, expected, "result")
    assert_aliasing_same(actual, expected, compiled_in, eager_in)
    assert_same(compiled_in.args, eager_in.args, "positional inputs after the call")
    assert_same(compiled_in.kwargs, eager_in.kwargs, "keyword inputs after the call")
    if _grad_inputs(eager_in):
        assert _backward_through_outputs(actual) == _backward_through_outputs(expected)
        for (path, mine), (_, theirs) in zip(_grad_inputs(compiled_in), _grad_inputs(eager_in)):
            if theirs.grad is None:
                assert mine.grad is None, f"{path}.grad: eager has none"
            else:
                assert_same(mine.grad, theirs.grad, f"{path}.grad")
    return inputs


@pytest.mark.parametrize("case", _params(CASES))
def test_compiled_matches_eager(case):
    compiled = _compile(case.fn)
    first_inputs = _assert_call_matches_eager(compiled, case, seed=0)
    after_first = _counters()
    assert after_first["frames_traced"] == 1, after_first
    assert after_first["graph_breaks"] == 0, after_first

    second_inputs = _assert_call_matches_eager(compiled, case, seed=1)
    after_second = _counters()
    assert after_second["graph_breaks"] == 0, after_second
    assert signature(second_inputs.args) == signature(first_inputs.args)
    if _only_plain_values(second_inputs):
        assert after_second["frames_traced"] == 1, (
            f"new values of the same shapes retraced: {after_second}")
        assert after_second["cache_hits"] == after_first["cache_hits"] + 1, after_second


@pytest.mark.parametrize("case", _params(CASES))
def test_explain_reports_one_graph(case):
    inputs = clone(case.inputs(0))
    report = dynvm.explain(case.fn)(*inputs.args, **inputs.kwargs)
    assert report.graph_count == 1, str(report)
    assert report.graph_break_count == 0, str(report)
    assert list(report.break_reasons) == [], str(report)
    assert len(report.ops_per_graph) == 1, str(report)
    assert op_count(report.ops_per_graph[0]) > 0, str(report)


# Functions whose second call has another shape: (function, inputs, inputs of another
# shape). Each must trace once per shape and then serve both shapes from its cache.
_LINEAR = fixed_module(lambda: torch.nn.Linear(4, 3))
RETRACE = [
    (arithmetic.add_int_scalar, lambda: (torch.randn(3, 4),), lambda: (torch.randn(5, 4),)),
    (methods.relu_sum_unsqueeze_chain, lambda: (torch.randn(3, 4),),
     lambda: (torch.randn(3, 7),)),
    (dtype_shape.view_with_last_dim, lambda: (torch.randn(2, 3, 4),),
     lambda: (torch.randn(2, 3, 6),)),
    (loops.for_over_tensor_rows, lambda: (torch.randn(3, 4),), lambda: (torch.randn(5, 4),)),
    (control_flow.branch_on_shape, lambda: (torch.randn(2, 5),),
     lambda: (torch.randn(2, 4),)),
    (slicing.slices_from_shape, lambda: (torch.randn(4, 4),), lambda: (torch.randn(6, 4),)),
    (dtype_shape.torch_size_arithmetic, lambda: (torch.randn(2, 3, 4),),
     lambda: (torch.randn(3, 2, 8),)),
    (modules.linear_module, lambda: (_LINEAR, torch.randn(2, 4)),
     lambda: (_LINEAR, torch.randn(3, 4))),
]


def _check_call(compiled, fn, make, seed):
    """Compiled and eager calls on inputs drawn with `seed` agree. Tensors are copied
    for each call; a module argument stays the same object (none of these mutate)."""
    torch.manual_seed(seed)
    args = make()

    def copies():
        return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]

    assert_same(compiled(*copies()), fn(*copies()))


@pytest.mark.parametrize("fn, make_a, make_b", RETRACE, ids=[r[0].__name__ for r in RETRACE])
def test_new_shape_retraces_once(fn, make_a, make_b):
    compiled = _compile(fn)
    _check_call(compiled, fn, make_a, seed=0)
    assert _counters()["frames_traced"] == 1
    _check_call(compiled, fn, make_a, seed=1)
    counts = _counters()
    assert counts["frames_traced"] == 1 and counts["cache_hits"] == 1, counts

    _check_call(compiled, fn, make_b, seed=2)
    counts = _counters()
    assert counts["frames_traced"] == 2, counts
    assert counts["recompiles"] == 1, counts

    # Both shapes are now served without tracing again.
    _check_call(compiled, fn, make_a, seed=3)
    _check_call(compiled, fn, make_b, seed=4)
    counts = _counters()
    assert counts["frames_traced"] == 2, counts
    assert counts["cache_hits"] == 3, counts
    assert counts["graph_breaks"] == 0, counts
