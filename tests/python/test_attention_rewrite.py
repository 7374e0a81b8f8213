"""Hand-written attention under backend "dynvm": the graph pass `attention` turns
`softmax(q @ k.transpose(-2, -1) * scale [+ mask]) @ v` into one
scaled_dot_product_attention (docs/graph_passes.md). Results, dtypes and strides equal
eager's; the rewrite shows in the graph dumps; what it must not touch is left alone."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import dynvm
from conftest import run_python


def heads(x, n_head):
    batch, seq, width = x.shape
    return x.view(batch, seq, n_head, width // n_head).transpose(1, 2)


def causal(q, k, v, mask):
    scores = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(q.size(-1)))
    scores = scores.masked_fill(mask[:, :, : q.size(2), : q.size(2)] == 0, float("-inf"))
    return F.softmax(scores, dim=-1) @ v


def additive(q, k, v, bias):
    scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(q.size(-1))
    return torch.softmax(scores + bias, dim=-1) @ v


def unmasked(q, k, v):
    return (q @ k.transpose(-1, -2)).softmax(-1) @ v


def projected(x, w, mask):
    # The usual model: q, k, v split from one projection and viewed as heads.
    q, k, v = (x @ w).split(x.size(-1), dim=-1)
    q, k, v = heads(q, 4), heads(k, 4), heads(v, 4)
    y = causal(q, k, v, mask)
    return y.transpose(1, 2).contiguous().view_as(x)


def single_head_bmm(q, k, v):
    return torch.bmm(torch.softmax(torch.bmm(q, k.transpose(1, 2)) / 2.0, -1), v)


def single_head_matmul(q, k, v, bias):
    return (q @ k.transpose(-2, -1) * 0.3 + bias).softmax(-1) @ v


def heads_attention(x, mask):
    # Heads as transposed views, the attention returned as it is: ATen's CPU flash kernel
    # gives it in a [B, S, H, D] layout, which the executor copies to the row-major
    # layout the graph recorded.
    return causal(heads(x, 4), heads(x * 2, 4), heads(x - 1, 4), mask)


def softmax_upcast(q, k, v, mask):
    # softmax of 16-bit scores in float32, cast back: as autocast runs it on CUDA.
    scores = (q @ k.transpose(-2, -1) * 0.125).masked_fill(mask == 0, float("-inf"))
    return torch.softmax(scores.float(), -1).to(q.dtype) @ v


def softmax_dtype_float32(q, k, v):
    # The Hugging Face form: softmax(..., dtype=torch.float32).to(query.dtype).
    scores = q @ k.transpose(-2, -1) / 8.0
    return F.softmax(scores, dim=-1, dtype=torch.float32).to(v.dtype) @ v


def qkv(batch=2, n_head=4, seq=16, dim=8, seq_kv=None, dtype=torch.float32):
    torch.manual_seed(0)
    seq_kv = seq if seq_kv is None else seq_kv
    return (torch.randn(batch, n_head, seq, dim, dtype=dtype),
            torch.randn(batch, n_head, seq_kv, dim, dtype=dtype),
            torch.randn(batch, n_head, seq_kv, dim, dtype=dtype))


CASES = {
    "causal masked_fill": lambda: (causal, (*qkv(), torch.tril(torch.ones(1, 1, 32, 32)))),
    "additive mask, other kv length": lambda: (
        additive, (*qkv(seq=6, seq_kv=10), torch.randn(6, 10))),
    "no mask, no scale": lambda: (unmasked, qkv(dim=16)),
    "transposed views of one projection": lambda: (
        projected, (torch.randn(2, 16, 32), torch.randn(32, 96) / 6,
                    torch.tril(torch.ones(1, 1, 16, 16)))),
    "returned from transposed views": lambda: (
        heads_attention, (torch.randn(2, 16, 32), torch.tril(torch.ones(1, 1, 16, 16)))),
    "3-d, torch.bmm": lambda: (single_head_bmm, tuple(t[0] for t in qkv(seq=5, seq_kv=7))),
    "3-d, @ and an additive mask": lambda: (
        single_head_matmul, (*(t[0] for t in qkv(seq=6)), torch.randn(6, 6))),
    "bfloat16": lambda: (causal, (*qkv(dtype=torch.bfloat16),
                                  torch.tril(torch.ones(1, 1, 16, 16)))),
    "bfloat16, softmax in float32": lambda: (
        softmax_upcast, (*qkv(dtype=torch.bfloat16), torch.tril(torch.ones(16, 16)))),
    "float16, softmax(dtype=float32)": lambda: (softmax_dtype_float32, qkv(dtype=torch.float16)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_compiled_attention_equals_eager(name):
    fn, args = CASES[name]()
    dynvm.reset()
    compiled = dynvm.compile(fn)
    with torch.no_grad():
        expected = fn(*args)
        for _ in range(2):
            got = compiled(*args)
            tol = {torch.bfloat16: 2e-2, torch.float16: 2e-3}.get(expected.dtype, 1e-5)
            torch.testing.assert_close(got, expected, atol=tol, rtol=tol)
            assert got.dtype == expected.dtype
            assert got.stride() == expected.stride()  # row-major, whatever kernel ran
    assert dynvm.counters["graph_failures"] == 0


def graph_log(body, dtype="torch.float32"):
    """DYNVM_LOGS=graph of compiling `def f(q, k, v): <body>` on [2, 4, 16, 8] tensors."""
    result = run_python(
        "import math, torch, dynvm\n"
        "def f(q, k, v):\n"
        f"    {body}\n"
        f"q = torch.randn(2, 4, 16, 8, dtype={dtype})\n"
        "with torch.no_grad():\n"
        "    dynvm.compile(f)(q, q + 1, q - 1)\n",
        DYNVM_LOGS="graph",
    )
    assert result.returncode == 0, result.stderr
    return result.stderr


def test_the_rewrite_shows_in_the_graph_dump():
    log = graph_log("return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8), -1) @ v")
    after = log.split("after attention", 1)[1].split("after decompose", 1)[0]
    assert "aten::scaled_dot_product_attention(%q, %" in after
    assert "scale=0.35355" in after
    final = log.rsplit("after dce", 1)[1]
    assert "aten::bmm" not in final.split("# groups", 1)[0]


@pytest.mark.parametrize("form", ["scores.float()", "dtype=torch.float32"])
def test_a_float32_softmax_between_casts_is_rewritten(form):
    softmax = ("torch.softmax(s.float(), -1)" if form == "scores.float()"
               else "torch.softmax(s, -1, dtype=torch.float32)")
    log = graph_log(f"s = q @ k.transpose(-2, -1) * 0.125; return {softmax}.to(q.dtype) @ v",
                    dtype="torch.bfloat16")
    after = log.split("after attention", 1)[1].split("before decompose", 1)[0]
    assert "aten::scaled_dot_product_attention(%q, %" in after
    assert "aten::_softmax" not in after and "aten::softmax" not in after


def test_returned_weights_keep_the_explicit_form():
    def f(q, k, v):
        weights = torch.softmax(q @ k.transpose(-2, -1), -1)
        return weights @ v, weights

    args = qkv()
    dynvm.reset()
    with torch.no_grad():
        got_out, got_weights = dynvm.compile(f)(*args)
        want_out, want_weights = f(*args)
    torch.testing.assert_close(got_out, want_out)
    torch.testing.assert_close(got_weights, want_weights)


def test_dropout_in_training_is_not_folded():
    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(0.5)

        def forward(self, q, k, v):
            return self.drop(torch.softmax(q @ k.transpose(-2, -1), -1)) @ v

    model = Attention().train()
    args = qkv()
    dynvm.reset()
    compiled = dynvm.compile(model)
    with torch.no_grad():
        torch.manual_seed(3)
        got = compiled(*args)
        torch.manual_seed(3)
        want = model(*args)
    torch.testing.assert_close(got, want)


def test_a_direct_call_of_sdpa_keeps_the_layout_it_was_traced_with():
    # The user's own scaled_dot_product_attention: the trace recorded the layout ATen's
    # kernel gives (not row-major for heads made of transposed views); it stays that.
    def f(x):
        q, k, v = heads(x, 4), heads(x * 2, 4), heads(x - 1, 4)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    x = torch.randn(2, 16, 32)
    dynvm.reset()
    with torch.no_grad():
        got = dynvm.compile(f)(x)
        want = f(x)
    torch.testing.assert_close(got, want)
    assert got.stride() == want.stride()
    assert dynvm.counters["graph_failures"] == 0
