"""Autocast and compiled code: every trace guards the autocast state (on or off per
device type, and the dtype where it is on), and `with torch.autocast(...)` is traced where
it asks for the state already in force; a block that changes the state breaks the graph.
Each case compares the compiled call with eager: values and dtypes."""
import pytest
import torch

import dynvm
from conftest import codegen_built

pytestmark = pytest.mark.skipif(not dynvm.vm_available(), reason="the VM is not built")

BACKENDS = ["eager"] + (["dynvm"] if codegen_built() else [])


def _matmul_relu(x, w):
    return (x @ w).relu() + 1


def _attention_in_float32(q, k):
    # timm's EfficientViT (MIT) keeps its attention out of autocast this way.
    with torch.autocast(device_type=q.device.type, enabled=False):
        scores = (q @ k.transpose(-1, -2)).softmax(-1)
    return scores * 2


def _prints_inside_autocast(q, k):
    with torch.autocast(device_type="cpu", enabled=False):
        y = q @ k.transpose(-1, -2)
        print("", end="")  # a graph break inside the block
        y = y.relu()
    return y + 1


def _check(compiled, fn, *args):
    expected = fn(*args)
    actual = compiled(*args)
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual, expected, rtol=1e-2, atol=1e-2)


def _bfloat16_autocast():
    return torch.autocast("cpu", dtype=torch.bfloat16)


DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device"))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_autocast_state_is_guarded(backend, device):
    # Before the guard, a variant traced under autocast ran outside it (bfloat16 results
    # where eager gives float32), and one traced outside ran under it.
    x, w = torch.randn(8, 8, device=device), torch.randn(8, 8, device=device)
    compiled = dynvm.compile(_matmul_relu, backend=backend)
    with torch.autocast(device, dtype=torch.bfloat16):
        _check(compiled, _matmul_relu, x, w)
    _check(compiled, _matmul_relu, x, w)
    with torch.autocast(device, dtype=torch.bfloat16):
        _check(compiled, _matmul_relu, x, w)
    with torch.autocast(device, dtype=torch.float16):
        _check(compiled, _matmul_relu, x, w)


def test_autocast_guard_is_listed():
    report = dynvm.explain(_matmul_relu)(torch.randn(2, 2), torch.randn(2, 2))
    assert "AUTOCAST cpu=False cuda=False" in report.guards, report.guards
    with _bfloat16_autocast():
        report = dynvm.explain(_matmul_relu)(torch.randn(2, 2), torch.randn(2, 2))
    assert "AUTOCAST cpu=True(bfloat16) cuda=False" in report.guards, report.guards


@pytest.mark.parametrize("backend", BACKENDS)
def test_autocast_block_in_the_state_already_in_force_is_traced(backend):
    q, k = torch.randn(4, 8), torch.randn(4, 8)
    report = dynvm.explain(_attention_in_float32)(q, k)
    assert report.graph_count == 1 and report.graph_break_count == 0, str(report)
    _check(dynvm.compile(_attention_in_float32, backend=backend), _attention_in_float32, q, k)


@pytest.mark.parametrize("backend", BACKENDS)
def test_autocast_block_that_changes_the_state_breaks(backend):
    q, k = torch.randn(4, 8), torch.randn(4, 8)
    with _bfloat16_autocast():
        report = dynvm.explain(_attention_in_float32)(q, k)
        assert report.graph_break_count >= 1, str(report)
        assert "autocast" in report.break_reasons[0].reason, str(report)
        compiled = dynvm.compile(_attention_in_float32, backend=backend)
        _check(compiled, _attention_in_float32, q, k)
        _check(compiled, _attention_in_float32, q, k)


@pytest.mark.parametrize("backend", BACKENDS)
def test_graph_break_inside_an_autocast_block_resumes(backend):
    q, k = torch.randn(4, 8), torch.randn(4, 8)
    compiled = dynvm.compile(_prints_inside_autocast, backend=backend)
    for _ in range(2):
        _check(compiled, _prints_inside_autocast, q, k)
    assert torch.is_autocast_enabled("cpu") is False


def test_autocast_with_traced_arguments_breaks_cleanly():
    def fn(x, flag):
        with torch.autocast("cpu", enabled=bool(x.sum() > 0)):
            return x * 2

    x = torch.ones(3)
    torch.testing.assert_close(dynvm.compile(fn, backend="eager")(x, True), fn(x, True))


def _returns_an_autocast(x):
    manager = torch.autocast("cpu", enabled=False)
    return x * 2, manager


def _raises_inside_autocast(x):
    with torch.autocast("cpu", enabled=False):
        raise ValueError("inside the block")


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_autocast_object_that_escapes_is_the_real_one(backend):
    x = torch.randn(3)
    result, manager = dynvm.compile(_returns_an_autocast, backend=backend)(x)
    assert isinstance(manager, torch.autocast)
    assert torch.equal(result, x * 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_exception_inside_an_autocast_block_leaves_the_state_alone(backend):
    compiled = dynvm.compile(_raises_inside_autocast, backend=backend)
    for _ in range(2):
        with pytest.raises(ValueError, match="inside the block"):
            compiled(torch.randn(3))
    assert torch.is_autocast_enabled("cpu") is False
