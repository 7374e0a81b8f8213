"""Graphs that autograd records, fused all the same (runtime/graph_autograd_node.h): the
forward runs the fused kernels and records one autograd node per call; its backward
recomputes the graph as traced, op by op with autograd recording, and differentiates it.
This is the path of graphs with an operator that has no derivative rule (graph/autodiff.h;
here cumsum); the others get a compiled backward (test_compiled_backward.py).
Gradients, hooks, retain_graph and non-differentiable outputs behave as in eager;
double backward raises; graphs whose recomputation would differ (they write a buffer or
draw random numbers) run op by op as before. These run on the CPU target."""

import copy

import pytest
import torch
from torch import nn

import dynvm
from conftest import needs_codegen

pytestmark = needs_codegen


class CumSum(nn.Module):
    """An operator without a derivative rule: the graph keeps the recomputing backward."""

    def forward(self, x):
        return x.cumsum(-1)


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.GELU(), CumSum(),
                         nn.Linear(32, 4))


def test_training_steps_match_eager():
    model = mlp()
    reference = copy.deepcopy(model)
    fast = dynvm.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.01, momentum=0.9)
    for step in range(4):
        x = torch.randn(8, 16, generator=torch.Generator().manual_seed(step))
        loss = fast(x).square().mean()
        ref_loss = reference(x).square().mean()
        torch.testing.assert_close(loss, ref_loss)
        opt.zero_grad()
        ref_opt.zero_grad()
        loss.backward()
        ref_loss.backward()
        for p, q in zip(model.parameters(), reference.parameters()):
            # The loss's gradient comes from the fused forward's output, and cumsum adds
            # up its last-bit differences.
            torch.testing.assert_close(p.grad, q.grad, atol=2e-4, rtol=1e-3)
        opt.step()
        ref_opt.step()
    assert dynvm.counters["kernels"] > 0  # the forward ran fused kernels
    assert dynvm.counters["graph_failures"] == 0


def test_inference_without_no_grad_runs_fused_kernels():
    model = mlp()
    dynvm.reset()
    fast = dynvm.compile(model)
    x = torch.randn(8, 16)
    y = fast(x)
    assert y.requires_grad and "RecomputedGraph" in y.grad_fn.name()
    torch.testing.assert_close(y, model(x))
    assert dynvm.counters["kernels"] > 0


def test_outputs_that_are_not_differentiable():
    w = torch.randn(5, requires_grad=True)
    fast = dynvm.compile(lambda x: ((x * w).cumsum(-1).sum(-1), x * w > 0))
    value, mask = fast(torch.randn(4, 5))
    assert value.requires_grad and not mask.requires_grad and mask.dtype == torch.bool
    value.sum().backward()
    assert w.grad is not None


def test_an_input_that_does_not_require_grad_gets_none():
    w = torch.randn(5, requires_grad=True)
    b = torch.randn(5)
    fast = dynvm.compile(lambda x: torch.sigmoid(x * w + b).cumsum(-1))
    fast(torch.randn(2, 5)).sum().backward()
    assert w.grad is not None and b.grad is None


def test_double_backward_raises_instead_of_a_wrong_gradient():
    w = torch.randn(4, 4, requires_grad=True)
    fast = dynvm.compile(lambda x: torch.tanh(x @ w).cumsum(-1))
    y = fast(torch.randn(2, 4))
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(y.sum(), w, create_graph=True)


@pytest.mark.parametrize("layer", ["batch_norm", "dropout"])
def test_graphs_the_backward_cannot_recompute_run_op_by_op(layer):
    # Batch norm in training writes its running statistics and dropout draws random
    # numbers: recomputing them would write again or draw other masks.
    torch.manual_seed(0)
    extra = nn.BatchNorm1d(8) if layer == "batch_norm" else nn.Dropout(0.5)
    model = nn.Sequential(nn.Linear(8, 8), extra, nn.ReLU(), CumSum()).train()
    reference = copy.deepcopy(model)
    dynvm.reset()
    fast = dynvm.compile(model)
    x = torch.randn(4, 8)
    torch.manual_seed(1)
    y = fast(x)
    torch.manual_seed(1)
    want = reference(x)
    torch.testing.assert_close(y, want)
    y.sum().backward()
    want.sum().backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
    assert "RecomputedGraph" not in y.grad_fn.name()
    if layer == "batch_norm":
        torch.testing.assert_close(model[1].running_mean, reference[1].running_mean)


def test_backward_after_the_variant_is_dropped():
    # The node holds the compiled graph: dynvm.reset() between forward and backward drops
    # the variant, not what the backward recomputes.
    w = torch.randn(5, 5, requires_grad=True)
    fast = dynvm.compile(lambda x: torch.tanh(x @ w).cumsum(-1).sum())
    x = torch.randn(3, 5)
    loss = fast(x)
    dynvm.reset()
    loss.backward()
    want, = torch.autograd.grad(torch.tanh(x @ w).cumsum(-1).sum(), w)
    torch.testing.assert_close(w.grad, want)


def test_repeated_and_viewed_outputs_and_an_input_that_is_not_a_leaf():
    w = torch.randn(4, 4, requires_grad=True)

    def f(x):
        y = torch.tanh(x @ w).cumsum(-1)
        return y, y, y.t(), (y * 2)[0]

    fast = dynvm.compile(f)
    a = torch.randn(3, 4, requires_grad=True)
    got = fast(a * 2)  # the argument has a grad_fn of its own
    sum(t.sum() for t in got).backward()
    got_w, got_a = w.grad.clone(), a.grad.clone()
    w.grad = a.grad = None
    want = f(a * 2)
    sum(t.sum() for t in want).backward()
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e)
    torch.testing.assert_close(got_w, w.grad)
    torch.testing.assert_close(got_a, a.grad)
