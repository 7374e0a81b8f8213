"""Backend "dynvm" on CUDA tensors: fused groups become CUDA kernels (NVRTC), and every
result equals eager CUDA's. These tests run where a GPU and the CUDA target are usable
(the GPU machine, docs/gpu_machine.md) and skip elsewhere; CI checks the generated source
as text and compiles it with NVRTC (tests/unit/codegen/cuda_golden_test.cpp). Also here:
the fusion fuzzer's programs on CUDA inputs, and the disk cache across processes."""

import pathlib
import sys

import pytest
import torch
import torch.nn.functional as F

import dynvm
from conftest import run_python

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "fuzz"))


def _cuda_target_usable():
    if not torch.cuda.is_available():
        return False
    from dynvm import config

    return any(t["name"] == "cuda" and t["usable"] for t in config.targets())


pytestmark = pytest.mark.skipif(not _cuda_target_usable(),
                                reason="no GPU, or the CUDA target is not usable here")


def compile_and_compare(fn, *args, atol=1e-5, rtol=1e-5, kernels=True):
    dynvm.reset()
    expected = fn(*args)
    compiled = dynvm.compile(fn)
    with torch.no_grad():
        actual = compiled(*args)
        again = compiled(*args)
    if kernels:
        assert dynvm.counters["kernels"] >= 1, "no fused kernel was compiled"
    for got in (actual, again):
        exp_list = expected if isinstance(expected, tuple) else (expected,)
        got_list = got if isinstance(got, tuple) else (got,)
        for e, a in zip(exp_list, got_list):
            assert a.device == e.device and a.dtype == e.dtype and a.shape == e.shape
            if e.dtype.is_floating_point:
                torch.testing.assert_close(a, e, atol=atol, rtol=rtol, equal_nan=True)
            else:
                assert torch.equal(a, e)


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, device="cuda", dtype=dtype)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def test_pointwise_gelu():
    compile_and_compare(gelu_tanh, randn(1000, 1003))


def test_broadcast_and_transposed_inputs():
    def f(x, b, y):
        return torch.relu(x + b) * y.t()

    compile_and_compare(f, randn(64, 33), randn(33), randn(33, 64))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_storage_float_compute(dtype):
    def f(x, y):
        return torch.sigmoid(x) * y + 1.5, (x > y)

    compile_and_compare(f, randn(257, 129, dtype=dtype), randn(257, 129, dtype=dtype),
                        atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("dim", [0, 1, 2, -1, (0, 2), (0, 1, 2)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_reductions_over_every_dim(dim, keepdim):
    def f(x):
        return x.sum(dim, keepdim=keepdim), x.amax(dim, keepdim=keepdim), \
            (x * 2).mean(dim, keepdim=keepdim)

    compile_and_compare(f, randn(7, 33, 65), atol=1e-4, rtol=1e-4)


def test_softmax_layer_norm_rms_norm():
    def f(x, r, w, b):
        h = F.layer_norm(x + r, (x.shape[-1],), w, b)
        s = torch.softmax(h * 0.125, -1)
        return s, h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    compile_and_compare(f, randn(96, 768), randn(96, 768), randn(768), randn(768),
                        atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("offset", [0, 1])
def test_rows_read_four_elements_at_a_time(dtype, offset):
    # Rows of 2048 (a multiple of four times the block): the kernel's vector variant takes
    # each thread's elements four at a time. `offset` 1 starts the argument one element
    # into its storage, misaligned for vector loads: the scalar kernel runs instead.
    def f(x, r, w):
        h = x + r
        return torch.softmax(h * 0.5, -1), h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    tol = 1e-4 if dtype == torch.float32 else 2e-2
    x = randn(16 * 2048 + offset, dtype=dtype)[offset:].view(16, 2048)
    compile_and_compare(f, x, randn(16, 2048, dtype=dtype), randn(2048, dtype=dtype),
                        atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_few_long_rows_are_split_across_blocks(dtype):
    # A sum over everything (one row of 900000) and per-row reductions of 3 rows: each row
    # is split across blocks whose partials the last block to finish folds
    # (tests/data/codegen_cuda/split_*.txt). Run twice: the per-row counters start at zero
    # on every launch.
    def f(x):
        return x.sum() * 2, x.amax(-1), x.abs().sum(-1, keepdim=True) + 1

    if dtype.is_floating_point:
        x = randn(3, 300000, dtype=dtype)
        tol = 1e-4 if dtype == torch.float32 else 2e-2
    else:
        x = torch.randint(-1000, 1000, (3, 300000), device="cuda", dtype=dtype)
        tol = 0
    compile_and_compare(f, x, atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows, columns", [(1024, 256), (1000, 300), (77, 5)])
def test_column_reductions_split_their_rows_across_blocks(dtype, rows, columns):
    # Sums and maxima over the rows of a few columns, fused with full-size outputs (a
    # layer norm's or a bias's gradient) and with a summand that is also an output (kept
    # in a temporary row): each column's rows are split across blocks, the last block of
    # a column block folds the partials (tests/data/codegen_cuda/column_*.txt). Sizes
    # that do not divide the block or the parts, and a case too small to split.
    def f(g, x, r, w):
        xhat = x * r
        gw = g * w
        summand = g * torch.tanh(x)
        return ((g * xhat).sum(0), g.sum(0), gw, gw * xhat, x.amax(0), summand.sum(0),
                summand)

    g, x, w = randn(rows, columns, dtype=dtype), randn(rows, columns, dtype=dtype), randn(
        columns, dtype=dtype)
    r = randn(rows, 1, dtype=dtype)
    # bfloat16: the fused summands stay float (eager rounds each product to bfloat16),
    # which moves a sum of 1000 products by up to about 0.25.
    atol, rtol = (1e-4, 1e-4) if dtype == torch.float32 else (0.5, 2e-2)
    compile_and_compare(f, g, x, r, w, atol=atol, rtol=rtol)


def test_var_mean_and_nan_propagation():
    def f(x):
        v, m = torch.var_mean(x, -1)
        return v, m, torch.maximum(x, x.flip(0)).amin(0)

    x = randn(65, 300)
    x[3, 7] = float("nan")
    compile_and_compare(f, x, atol=1e-4, rtol=1e-4)


def test_eval_batch_norm_after_a_convolution_is_a_kernel():
    # On CUDA the trace records cuDNN's batch norm (aten::cudnn_batch_norm); in eval mode
    # it decomposes like native_batch_norm, so it becomes a fused kernel, not an ATen call.
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8)).cuda().eval()
    with torch.no_grad():
        model[1].running_mean.uniform_(-1, 1)
        model[1].running_var.uniform_(0.5, 2)
    compile_and_compare(model, randn(2, 3, 16, 16), atol=1e-4, rtol=1e-4)


def test_integers_and_bools():
    def f(a, m, x):
        return torch.where(m, a, 7) * 3 - 1, m & (a > 0), x.to(torch.int8), (a % 5).sum(-1)

    a = torch.randint(-50, 50, (33, 17), device="cuda")
    m = torch.rand(33, 17, device="cuda") > 0.5
    compile_and_compare(f, a, m, randn(33, 17) * 30)


def test_kernels_take_the_current_stream():
    x = randn(4096, 512)
    compiled = dynvm.compile(gelu_tanh)
    expected = gelu_tanh(x)
    stream = torch.cuda.Stream()
    with torch.no_grad(), torch.cuda.stream(stream):
        out = compiled(x)
    stream.synchronize()
    torch.testing.assert_close(out, expected)


def test_the_fusion_fuzzer_programs_on_cuda():
    import fusion_fuzz

    fusion_fuzz.DEVICE = "cuda"
    try:
        summary = fusion_fuzz.run_campaign(5, ["dynvm"], start=0, count=300, calls=2,
                                           max_failures=1, minimise_budget_s=60)
    finally:
        fusion_fuzz.DEVICE = "cpu"
    if summary.failures:
        pytest.fail(summary.failures[0].report(), pytrace=False)
    assert summary.outcomes["dynvm: with kernels"] > 0.5 * summary.programs, summary.text()


def test_a_second_process_compiles_nothing(tmp_path):
    code = f"""
import os
os.environ["DYNVM_CACHE_DIR"] = {str(tmp_path)!r}
import torch, dynvm
from dynvm import _native
def f(x):
    return torch.softmax(x * 0.5 + 1, -1)
x = torch.randn(64, 300, device="cuda")
with torch.no_grad():
    torch.testing.assert_close(dynvm.compile(f)(x), f(x))
print("nvrtc", _native.core().nvrtc_compilations())
"""
    first = run_python(code)
    second = run_python(code)
    assert "nvrtc 1" in first.stdout or "nvrtc 2" in first.stdout, first.stdout + first.stderr
    assert "nvrtc 0" in second.stdout, second.stdout + second.stderr


def test_new_batch_sizes_reuse_the_compiled_kernels(tmp_path):
    # The kernels take their parallel loop's extent at run time (lower_loops_to_cuda.h): a
    # dynamic batch dimension compiles each fused kernel once, not once per batch size.
    code = f"""
import os
os.environ["DYNVM_CACHE_DIR"] = {str(tmp_path)!r}
import torch, torch.nn.functional as F, dynvm
from dynvm import _native
def f(x, w, b):
    h = F.layer_norm(x + 1, (256,), w, b)
    return F.gelu(h, approximate="tanh"), torch.softmax(h * 0.125, -1)
c = dynvm.compile(f, dynamic=True)
w, b = torch.randn(256, device="cuda"), torch.randn(256, device="cuda")
counts = []
with torch.no_grad():
    for n in [5, 7, 9, 12, 33, 64, 100, 6]:
        x = torch.randn(n, 256, device="cuda")
        for got, want in zip(c(x, w, b), f(x, w, b)):
            torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
        counts.append(_native.core().nvrtc_compilations())
print("counts", counts)
"""
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    counts = eval(result.stdout.split("counts ")[1].strip())
    # No size after the second compiles anything (the first two may differ where a launch
    # choice depends on the size: a block of fewer threads for tiny work). A reduction over the batch dimension (a column
    # sum) still compiles per size: its rows are an inner extent.
    assert counts[0] > 0 and counts[-1] == counts[1], counts


def test_max_autotune_times_schedules_once_and_a_second_process_reuses_the_choice(tmp_path):
    code = f"""
import os
os.environ["DYNVM_CACHE_DIR"] = {str(tmp_path)!r}
import torch, dynvm
from dynvm import _native
def f(x, r):
    h = x + r
    return torch.softmax(h * 0.5, -1), h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
fast = dynvm.compile(f, mode="max-autotune")
x, r = torch.randn(512, 2048, device="cuda"), torch.randn(512, 2048, device="cuda")
with torch.no_grad():
    for _ in range(4):
        for got, want in zip(fast(x, r), f(x, r)):
            torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
print("nvrtc", _native.core().nvrtc_compilations())
print("graphs", [e["note"] for e in _native.core().run_report()["cuda_graphs"]])
"""
    first = run_python(code, DYNVM_LOGS="kernels")
    assert first.returncode == 0, first.stderr
    tuned = [line for line in first.stderr.splitlines() if ": tuned: " in line]
    assert tuned and all("threads a block (" in line for line in tuned), first.stderr[-3000:]
    assert int(first.stdout.split("nvrtc ")[1].split()[0]) > len(tuned)  # the candidates too
    assert "replays as a CUDA graph" in first.stdout  # max-autotune replays CUDA graphs too
    second = run_python(code, DYNVM_LOGS="kernels")
    assert second.returncode == 0, second.stderr
    assert ": tuned: " not in second.stderr  # nothing timed again
    assert ": tuned before: " in second.stderr
    assert "nvrtc 0" in second.stdout, second.stdout


MODELS_DIR = pathlib.Path(__file__).resolve().parents[1]


def _model_names():
    sys.path.insert(0, str(MODELS_DIR))
    from models import registry

    return registry.ALL_NAMES


@pytest.mark.parametrize("name", _model_names())
def test_vm_suite_model_on_cuda_matches_eager(name):
    # Every model of the VM suite on the GPU under no_grad: fused CUDA kernels ran, one
    # graph, and the output within 1e-4 of eager's (relative to its scale).
    from models import registry

    if name in registry.TORCHVISION_NAMES and not registry.torchvision_available():
        pytest.skip("torchvision is not installed")
    spec = registry.spec(name)
    model = spec.build().cuda()
    inputs = tuple(t.cuda() for t in spec.make_inputs(2, 0))
    dynvm.reset()
    # Full float32 convolutions: TF32 (cuDNN's default) rounds a convolution's inputs to 10
    # bits, so a last-bit difference upstream (a fused batch norm against cuDNN's) becomes
    # a TF32-sized one, and 1e-4 would measure TF32 rather than dynvm.
    with torch.no_grad(), torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        expected = model(*inputs)
        compiled = dynvm.compile(model)
        for _ in range(2):
            actual = compiled(*inputs)
            scale = max(expected.abs().max().item(), 1.0)
            assert (actual - expected).abs().max().item() <= 1e-4 * scale, name
    assert dynvm.counters["kernels"] > 0
    assert dynvm.counters["graph_breaks"] == 0
    assert dynvm.counters["graph_failures"] == 0


_CHANNELS_LAST_NET = """
import sys, torch, dynvm
sys.path.insert(0, %r)
from test_channels_last import Net, FeatureMaps
torch.manual_seed(0)
with torch.no_grad(), torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
    for model, x in ((Net().eval().cuda(), torch.randn(2, 3, 32, 32, device="cuda")),
                     (FeatureMaps().eval().cuda(), torch.randn(2, 4, 6, 6, device="cuda"))):
        expected = model(x)
        compiled = dynvm.compile(model)
        for _ in range(3):
            got = compiled(x)
        for e, g in zip(expected if isinstance(expected, tuple) else (expected,),
                        got if isinstance(got, tuple) else (got,)):
            torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-5)
            assert g.stride() == e.stride(), (g.stride(), e.stride())
print("kernels", dynvm.counters["kernels"])
""" % str(pathlib.Path(__file__).resolve().parent)


def test_convolutions_run_channels_last_on_cuda():
    # Mode auto (the default) converts CUDA convolution graphs to channels-last
    # (graph/channels_last.h): results and returned strides equal eager's, and every
    # fused group compiles for the layout it gets (none runs through ATen).
    result = run_python(_CHANNELS_LAST_NET, DYNVM_LOGS="graph,kernels")
    assert result.returncode == 0, result.stderr[-4000:]
    assert "memory_format=torch.channels_last" in result.stderr
    assert "runs through ATen" not in result.stderr
    assert int(result.stdout.split("kernels ")[1].split()[0]) > 0
    off = run_python(_CHANNELS_LAST_NET, DYNVM_LOGS="graph", DYNVM_CHANNELS_LAST="off")
    assert off.returncode == 0, off.stderr[-4000:]
    assert "memory_format=torch.channels_last" not in off.stderr


def test_the_gpu_s_capability_is_answered_when_traced():
    # torch.cuda.get_device_capability(weight.device) (transformers' MoE layers, each
    # call) was a graph break at the C function it ends in; Mixtral in bfloat16 on the
    # H200 had 17 graphs. A device's properties are fixed for the process.
    def fn(x):
        if torch.cuda.get_device_capability(x.device) >= (8, 0):
            return x * 2
        return x - 1

    x = torch.ones(4, device="cuda")
    report = dynvm.explain(fn)(x)
    assert report.graph_count == 1 and report.graph_break_count == 0, report.break_reasons
    torch.testing.assert_close(dynvm.compile(fn)(x), fn(x))
