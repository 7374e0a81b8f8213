"""Training steps on the CUDA target with a compiled backward (graph/autodiff.h): both
halves run as CUDA kernels; loss, parameter gradients and batch-norm statistics match
eager's (TF32 off). Skipped without a GPU and a usable CUDA target."""

import contextlib
import copy
import pathlib
import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import dynvm
from conftest import in_place_ops

NODE = "CompiledGraphBackward"


def _cuda_target_usable():
    if not torch.cuda.is_available():
        return False
    from dynvm import config

    return any(t["name"] == "cuda" and t["usable"] for t in config.targets())


@pytest.mark.skipif(not _cuda_target_usable(), reason="no GPU, or the CUDA target is not usable")
@pytest.mark.parametrize("model_name", ["gpt2_tiny", "conv_net"])
def test_cuda_training_step_matches_eager(model_name):
    # Both halves on the CUDA target: CUDA kernels forward and backward.
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
    from models import gpt2_block

    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    if model_name == "gpt2_tiny":
        config = gpt2_block.GPT2Config(dropout=0.0)
        model = gpt2_block.build_tiny_gpt2(0, config).train().cuda()
        args = (torch.randint(0, config.vocab_size, (2, 16), device="cuda"),)
    else:
        model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                              nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                              nn.Linear(8, 5)).train().cuda()
        args = (torch.randn(4, 3, 16, 16, device="cuda"),)
    reference = copy.deepcopy(model)
    out = dynvm.compile(model)(*args)
    assert NODE in out.grad_fn.name()
    want = reference(*args)
    torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-5)
    out.float().logsumexp(-1).mean().backward()
    want.float().logsumexp(-1).mean().backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-5, msg=name)
    for (name, b), c in zip(model.named_buffers(), reference.buffers()):
        torch.testing.assert_close(b, c, rtol=1e-4, atol=1e-6, msg=name)
    assert dynvm.counters["compiled_backwards"] >= 1


@pytest.mark.skipif(not _cuda_target_usable(), reason="no GPU, or the CUDA target is not usable")
@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_cuda_whole_step_traces_the_foreach_optimizer(optimizer):
    # A step compiled whole on CUDA, where optimizers default to foreach: the update is
    # traced into graphs of CUDA kernels and matches eager after a few steps.
    torch.backends.cuda.matmul.allow_tf32 = False

    def make(model):
        if optimizer == "sgd":
            return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        return torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.GELU(),
                          nn.Linear(32, 4)).cuda()
    reference = copy.deepcopy(model)
    x = torch.randn(8, 16, device="cuda")

    def trainer(m):
        opt = make(m)

        def step():
            opt.zero_grad()
            loss = m(x).square().mean()
            loss.backward()
            opt.step()
            return loss

        return step

    traced, eager = trainer(model), trainer(reference)
    compiled = dynvm.compile(traced)
    for _ in range(5):
        torch.testing.assert_close(compiled(), eager(), rtol=1e-4, atol=1e-6)
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-6)
    # Later steps run the traced update fused (CPU scalar step sizes passed to the CUDA
    # kernels by value): none of eager's in-place operators runs.
    eager_ops = in_place_ops(eager)
    assert eager_ops and not eager_ops & in_place_ops(compiled), eager_ops
    report = dynvm.explain(traced)()
    assert not [b for b in report.break_reasons if "torch/optim" in str(b)], report.break_reasons
    assert not [op for ops in report.ops_per_graph for op in ops if "_foreach_" in op]


CUDA_ATTENTION = {
    "causal": lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, is_causal=True),
    "additive_mask": lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
    "scale": lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, scale=0.3) * 2,
    # Gradients read by fused kernels (tanh's, exp's, the scaling's backward).
    "kernels_around": lambda q, k, v, m: F.scaled_dot_product_attention(
        torch.tanh(q), k * 0.5, v.exp()).sigmoid(),
}


@pytest.mark.skipif(not _cuda_target_usable(), reason="no GPU, or the CUDA target is not usable")
@pytest.mark.parametrize("key_grad", [True, False])
@pytest.mark.parametrize("name", sorted(CUDA_ATTENTION))
def test_cuda_attention_has_a_compiled_backward(name, key_grad):
    # Float32 attention on CUDA dispatches to memory-efficient attention, whose backward is
    # ATen's from the saved output, logsumexp and random state (graph/autodiff.cpp);
    # before, such a graph's backward recomputed its whole forward.
    dynvm.reset()
    generator = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(2, 4, 24, 16, device="cuda", generator=generator)
               for _ in range(3))
    mask = torch.randn(24, 24, device="cuda", generator=generator)
    leaves = [t.requires_grad_(grad) for t, grad in ((q, True), (k, key_grad), (v, True))]
    mine = [t.detach().clone().requires_grad_(t.requires_grad) for t in leaves]
    fn = CUDA_ATTENTION[name]
    got = dynvm.compile(lambda *a: fn(*a))(*mine, mask)
    want = fn(*leaves, mask)
    assert NODE in got.grad_fn.name()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    seed = torch.randn(got.shape, device="cuda", generator=generator)
    (got * seed).sum().backward()
    (want * seed).sum().backward()
    for a, b in zip(mine, leaves):
        if b.requires_grad:
            torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-5)
        else:
            assert a.grad is None
    assert dynvm.counters["compiled_backwards"] >= 1, dict(dynvm.counters)


HALF_ATTENTION = {
    "causal": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
    "scale": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=0.3) * 2,
    "kernels_around": lambda q, k, v: F.scaled_dot_product_attention(
        torch.tanh(q), k * 0.5, v.exp()).sigmoid(),
    "dropout": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dropout_p=0.3),
}


@pytest.mark.skipif(not _cuda_target_usable(), reason="no GPU, or the CUDA target is not usable")
@pytest.mark.parametrize("kernel", ["default", "FLASH_ATTENTION", "CUDNN_ATTENTION"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", sorted(HALF_ATTENTION))
def test_cuda_half_attention_is_traced_with_a_compiled_backward(name, dtype, kernel):
    # Half-precision attention dispatches to flash or cuDNN attention, whose results
    # include undefined tensors, integers and random state on another device: before, the
    # trace broke its graph at every such call. Their backwards are ATen's from the saved
    # output, logsumexp and random state, so a dropout mask is drawn again as eager draws it.
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if kernel == "CUDNN_ATTENTION" and name == "dropout":
        pytest.skip("cuDNN attention with dropout is not available in every torch build")
    choice = sdpa_kernel([getattr(SDPBackend, kernel)]) if kernel != "default" else \
        contextlib.nullcontext()
    dynvm.reset()
    generator = torch.Generator(device="cuda").manual_seed(0)
    leaves = [torch.randn(2, 4, 64, 32, device="cuda", dtype=dtype, generator=generator)
              .requires_grad_() for _ in range(3)]
    mine = [t.detach().clone().requires_grad_() for t in leaves]
    fn = HALF_ATTENTION[name]
    with choice:
        report = dynvm.explain(fn)(*[t.detach() for t in mine])
        assert report.graph_break_count == 0, report.break_reasons
        compiled = dynvm.compile(lambda *a: fn(*a))
        torch.manual_seed(1)
        got = compiled(*mine)
        torch.manual_seed(1)
        want = fn(*leaves)
    assert NODE in got.grad_fn.name()
    torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)
    seed = torch.randn(got.shape, device="cuda", dtype=dtype, generator=generator)
    (got * seed).sum().backward()
    (want * seed).sum().backward()
    for a, b in zip(mine, leaves):
        torch.testing.assert_close(a.grad, b.grad, rtol=2e-2, atol=2e-2)
    assert dynvm.counters["compiled_backwards"] >= 1, dict(dynvm.counters)
