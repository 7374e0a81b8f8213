"""Dynamic shapes (issue 16): one trace serves many sizes. Compiled results are compared
with eager on every size; traces are counted with dynvm.counters["frames_traced"]."""

import os
import random
import subprocess
import sys
import warnings

import pytest
import torch

import dynvm
from conftest import needs_codegen

BACKENDS = ["eager", "dynvm"]


def traces():
    return dynvm.counters["frames_traced"]


def run_logged(code, logs):
    """The standard error of `code` run in a child Python with DYNVM_LOGS=logs."""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, "DYNVM_LOGS": logs})
    assert result.returncode == 0, result.stderr
    return result.stderr


def check_sizes(compiled, eager, inputs, atol=1e-5):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a cache-limit warning fails the test
        for args in inputs:
            got, expected = compiled(*args), eager(*args)
            torch.testing.assert_close(got, expected, atol=atol, rtol=1e-4)


def pointwise_and_reduce(x, w):
    y = (x @ w).view(x.size(0) * x.size(1), -1)
    return torch.relu(y).sum(0) * 2 + x.size(1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_changing_size_becomes_symbolic_at_the_recompile(backend):
    w = torch.randn(16, 16)
    compiled = dynvm.compile(pointwise_and_reduce, backend=backend)
    sizes = [4, 5, 6, 7, 9, 33, 2, 17]
    check_sizes(compiled, pointwise_and_reduce, [(torch.randn(3, n, 16), w) for n in sizes])
    assert traces() == 2  # the first size, then one symbolic trace for every other


@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_true_traces_once_for_every_size_but_one(backend):
    w = torch.randn(16, 16)
    compiled = dynvm.compile(pointwise_and_reduce, backend=backend, dynamic=True)
    check_sizes(compiled, pointwise_and_reduce,
                [(torch.randn(b, n, 16), w) for b, n in [(3, 4), (2, 9), (7, 3), (5, 5)]])
    assert traces() == 1
    # Sizes 1 (and 0) are specialized: broadcasting depends on them.
    check_sizes(compiled, pointwise_and_reduce, [(torch.randn(1, 6, 16), w)])
    assert traces() == 2


def test_dynamic_false_traces_every_size():
    w = torch.randn(16, 16)
    compiled = dynvm.compile(pointwise_and_reduce, dynamic=False)
    check_sizes(compiled, pointwise_and_reduce, [(torch.randn(3, n, 16), w) for n in (4, 5, 6)])
    assert traces() == 3


def test_mark_dynamic_makes_the_first_trace_symbolic():
    def f(x):
        return torch.softmax(x, -1) * x.shape[0]

    compiled = dynvm.compile(f)
    xs = [torch.randn(n, 8) for n in (3, 4, 10)]
    for x in xs:
        dynvm.mark_dynamic(x, 0)
    check_sizes(compiled, f, [(x,) for x in xs])
    assert traces() == 1


class _Batch:
    def __init__(self, ids):
        self.ids = ids


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("where", ["dict", "list", "attribute", "module_kwargs"])
def test_mark_dynamic_on_tensors_inside_arguments(where, backend):
    # The marks are read from the tensor itself wherever the trace reaches it: before,
    # only tensors passed directly as arguments were looked at, and a marked tensor inside
    # a dict, a list or an object was silently traced with fixed sizes, once per size.
    def f(batch):
        if where == "dict":
            x = batch["ids"]
        elif where == "list":
            x = batch[1]
        else:
            x = batch.ids
        return torch.softmax(x * 2, -1).sum(0) + x.shape[0]

    class Net(torch.nn.Module):
        def forward(self, ids, scale=1.0):
            return torch.softmax(ids * scale, -1).sum(0) + ids.shape[0]

    compiled = dynvm.compile(Net() if where == "module_kwargs" else f, backend=backend)
    for n in (3, 4, 10, 7):
        x = torch.randn(n, 8)
        dynvm.mark_dynamic(x, 0)
        if where == "module_kwargs":
            args, kwargs = (), {"ids": x, "scale": 2.0}
        else:
            batch = {"dict": {"ids": x}, "list": [torch.ones(2), x],
                     "attribute": _Batch(x)}[where]
            args, kwargs = (batch,), {}
        got = compiled(*args, **kwargs)
        want = (Net()(*args, **kwargs) if where == "module_kwargs" else f(*args))
        torch.testing.assert_close(got, want)
    assert traces() == 1


def test_mark_dynamic_bounds_are_guarded():
    def f(x):
        return x.sum(0)

    compiled = dynvm.compile(f)
    xs = [torch.randn(n, 3) for n in (3, 4, 9, 12)]
    for x in xs:
        dynvm.mark_dynamic(x, 0, min=2, max=8)
    check_sizes(compiled, f, [(x,) for x in xs])
    assert traces() == 2  # 3 and 4 share a trace; 9 and 12 are beyond it
    with pytest.raises(ValueError):
        dynvm.mark_dynamic(xs[0], 0, min=5, max=2)
    with pytest.raises(IndexError):
        dynvm.mark_dynamic(xs[0], 2)


def test_mark_static_keeps_a_dimension_fixed():
    def f(x):
        return x * 2

    compiled = dynvm.compile(f, dynamic=True)
    xs = [torch.randn(n, 3) for n in (3, 4, 5)]
    for x in xs:
        dynvm.mark_static(x, 0)
    check_sizes(compiled, f, [(x,) for x in xs])
    assert traces() == 3


def branch_on_width(x):
    if x.size(1) > 8:
        return x.sum(1)
    return x.mean(1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_branch_on_a_size_is_a_guarded_relation(backend):
    f = branch_on_width
    compiled = dynvm.compile(f, backend=backend, dynamic=True)
    check_sizes(compiled, f, [(torch.randn(2, n),) for n in (3, 5, 8, 7)])
    assert traces() == 1
    check_sizes(compiled, f, [(torch.randn(2, n),) for n in (9, 20, 12, 4)])
    assert traces() == 2


def test_a_failed_relation_says_which_and_for_which_argument():
    code = (
        "import sys, torch, dynvm\n"
        f"sys.path.insert(0, {os.path.dirname(__file__)!r})\n"
        "from test_dynamic_shapes import branch_on_width\n"
        "c = dynvm.compile(branch_on_width, dynamic=True)\n"
        "c(torch.randn(2, 3)); c(torch.randn(2, 12))\n"
    )
    stderr = run_logged(code, "recompiles")
    assert "SHAPE_RELATIONS s1 <= 8 failed: s1 <= 8 is false with s1 = 12 (L['x'].size()[1])" \
        in stderr


def test_sizes_used_as_python_values_stay_correct():
    def f(x):
        total = 0
        for i in range(x.size(0)):  # a loop over a size: specialized, guarded
            total = total + i
        return x.shape, x.size(1), f"{x.size(1)} columns", x * total

    compiled = dynvm.compile(f, dynamic=True)
    for n, m in [(2, 3), (4, 5), (3, 7)]:
        x = torch.randn(n, m)
        got, expected = compiled(x), f(x)
        assert got[0] == expected[0] and type(got[0]) is torch.Size
        assert got[1] == expected[1] and type(got[1]) is int
        assert got[2] == expected[2]
        torch.testing.assert_close(got[3], expected[3])


def test_view_with_a_computed_size_and_arithmetic_stays_symbolic():
    def f(x, heads):
        b, t, c = x.shape
        y = x.view(b, t, heads, c // heads).transpose(1, 2)
        return y.reshape(b * heads, t, -1).softmax(-1) + t

    compiled = dynvm.compile(f, dynamic=True)
    check_sizes(compiled, f, [(torch.randn(b, t, 32), 4) for b, t in [(2, 5), (3, 9), (4, 2)]])
    assert traces() == 1


def test_explain_shows_the_symbols_and_their_sources():
    def f(x):
        return (x * 2).sum(1)

    code = (
        "import torch, dynvm\n"
        "def f(x):\n"
        "    return (x * 2).sum(1)\n"
        "dynvm.compile(f, dynamic=True)(torch.randn(3, 4))\n"
    )
    stderr = run_logged(code, "graph,guards")
    assert "symbol s0 = 3 from \"L['x'].size()[0]\"" in stderr
    assert "graph(%x: f32[s0, s1] cpu)" in stderr
    assert "sum.dim_IntList(%0, [1])" in stderr
    out = dynvm.explain(dynvm.compile(f, dynamic=True))(torch.randn(3, 4))
    assert any(g.startswith("TENSOR_MATCH L['x']") and "[s0, s1] stride [s1, 1]" in g
               for g in out.guards)
    assert out.symbols == [["s0 = L['x'].size()[0]", "s1 = L['x'].size()[1]"]]
    assert "graph 0: dynamic sizes s0 = L['x'].size()[0], s1 = L['x'].size()[1]" in str(out)


def test_the_run_report_lists_the_symbols_and_relations(tmp_path):
    script = tmp_path / "sizes.py"
    script.write_text(
        "import torch\n"
        "def f(x):\n"
        "    if x.size(0) > 4:\n"
        "        return x.sum(0)\n"
        "    return x.mean(0)\n"
        "for n in (2, 3, 5, 6):\n"
        "    f(torch.randn(n, 3))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DYNVM_")}
    exe = os.path.abspath(os.environ["DYNVM_EXE"]) if "DYNVM_EXE" in os.environ else None
    if exe is None:
        pytest.skip("DYNVM_EXE does not name the dynvm executable")
    result = subprocess.run([exe, "run", "--backend", "eager", str(script)], env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    # The first size is traced as it is; the second makes dimension 0 symbolic.
    assert "dynamic sizes: s0 = L['x'].size()[0]; assumes s0 <= 4" in result.stderr


class Block(torch.nn.Module):
    """A GPT-2-style block: causal self-attention and an MLP."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.fc, self.out = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)
        self.heads = heads

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / (c // self.heads) ** 0.5)
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool, device=x.device))
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.proj(y)
        return x + self.out(torch.nn.functional.gelu(self.fc(self.ln2(x))))


class Encoder(torch.nn.Module):
    """A BERT-style encoder layer with a padding mask."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.layer = torch.nn.TransformerEncoderLayer(d, heads, 64, dropout=0.0,
                                                      batch_first=True)

    def forward(self, x, mask):
        return self.layer(x, src_key_padding_mask=mask)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gpt2_block_sequence_lengths_then_batch_sizes(backend):
    torch.manual_seed(0)
    model = Block().eval()
    compiled = dynvm.compile(model, backend=backend, dynamic=True)
    lengths = random.Random(0).sample(range(2, 65), 12)
    with torch.no_grad():
        check_sizes(compiled, model, [(torch.randn(2, t, 32),) for t in lengths], atol=1e-4)
        check_sizes(compiled, model, [(torch.randn(b, 7, 32),) for b in (3, 1, 8, 5)],
                    atol=1e-4)
    assert traces() <= 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_bert_encoder_sequence_lengths_then_batch_sizes(backend):
    torch.manual_seed(0)
    model = Encoder().eval()
    compiled = dynvm.compile(model, backend=backend, dynamic=True)

    def inputs(b, t):
        mask = torch.zeros(b, t, dtype=torch.bool)
        mask[:, t - 1] = True  # the last position is padding
        return torch.randn(b, t, 32), mask

    lengths = random.Random(1).sample(range(2, 65), 10)
    with torch.no_grad():
        check_sizes(compiled, model, [inputs(2, t) for t in lengths], atol=1e-4)
        check_sizes(compiled, model, [inputs(b, 6) for b in (3, 1, 8)], atol=1e-4)
    assert traces() <= 2


def _kernels_built():
    # Native kernels this process compiled or loaded from the disk cache; a kernel reused
    # from memory counts in neither.
    report = dynvm._native.core().run_report()
    return report["kernels_compiled"] + report["kernels_from_disk"]


@needs_codegen
@pytest.mark.parametrize("model_class", [Block, Encoder])
def test_new_lengths_and_batches_reuse_the_compiled_kernels(model_class):
    # A batch-by-sequence nest of rows is one parallel loop (the coalesce pass moves the
    # constants the lowering put between the two loops out of the way), whose extent the
    # kernel takes at run time: after the first size, new sequence lengths and batch sizes
    # compile no kernel. Before, every length compiled the kernels with rows along it.
    torch.manual_seed(0)
    model = model_class().eval()
    compiled = dynvm.compile(model, backend="dynvm", dynamic=True)

    def inputs(b, t):
        if model_class is Block:
            return (torch.randn(b, t, 32),)
        return torch.randn(b, t, 32), torch.zeros(b, t, dtype=torch.bool)

    with torch.no_grad():
        check_sizes(compiled, model, [inputs(2, 9)], atol=1e-4)
        built = _kernels_built()
        assert dynvm.counters["kernels"] > 0
        check_sizes(compiled, model, [inputs(2, t) for t in (10, 17, 33, 50)] +
                    [inputs(b, 12) for b in (3, 5)], atol=1e-4)
    assert _kernels_built() == built
    assert traces() == 1


def test_resnet18_batch_sizes():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).eval()
    compiled = dynvm.compile(model, backend="eager", dynamic=True)
    # Batch 16 is where ATen's CPU convolution switches backends: torch's fake convolution
    # asks which one, and guarded, that question split the batches into two variants.
    with torch.no_grad():
        check_sizes(compiled, model,
                    [(torch.randn(b, 3, 32, 32),) for b in (2, 5, 1, 3, 8, 16, 17, 40)],
                    atol=1e-4)
    assert traces() <= 2


def test_convolution_backend_choice_is_no_guard_only_for_contiguous_operands():
    conv = torch.nn.Conv2d(3, 4, 3).eval()

    def f(x):
        return conv(x)

    compiled = dynvm.compile(f, backend="eager", dynamic=True)
    with torch.no_grad():
        check_sizes(compiled, f, [(torch.randn(b, 3, 8, 8),) for b in (2, 20, 7)])
    assert traces() == 1
    out = dynvm.explain(dynvm.compile(f, dynamic=True))(torch.randn(2, 3, 8, 8))
    relations = [g for g in out.guards if g.startswith("SHAPE_RELATIONS")]
    assert not any("16" in r for r in relations), relations

    # A channels-last input: the backend decides the output's layout, so the choice stays
    # guarded and both sides of batch 16 still match eager.
    dynvm.reset()
    compiled = dynvm.compile(f, backend="eager", dynamic=True)
    with torch.no_grad():
        check_sizes(compiled, f,
                    [(torch.randn(b, 3, 8, 8).contiguous(memory_format=torch.channels_last),)
                     for b in (2, 20, 7)])
