"""Convolutions run channels-last under backend "dynvm" (graph pass `channels_last`,
graph/channels_last.h). On CUDA the pass is on by default; here DYNVM_CHANNELS_LAST=on
runs the same rewrite on the CPU, so that results, output strides and the executor's
layout handling are checked in CI: every result equals eager's, every returned tensor is
laid out as eager's, and no fused group falls back to ATen for a layout it did not expect."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import dynvm
from conftest import needs_codegen, run_python

pytestmark = needs_codegen


@pytest.fixture
def channels_last_on(monkeypatch):
    monkeypatch.setenv("DYNVM_CHANNELS_LAST", "on")
    dynvm.reset()
    yield
    dynvm.reset()


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, groups=c)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(y)))


class Net(nn.Module):
    """Stem, pooling, a residual block with a depthwise convolution, global pooling and a
    classifier: everything a CNN's inference graph holds."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(16)
        self.pool = nn.MaxPool2d(2)
        self.block = Block(16)
        self.avg = nn.AvgPool2d(2)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.bn(self.stem(x))))
        x = self.avg(self.block(x))
        return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1))


class FeatureMaps(nn.Module):
    """Returns feature maps, upsamples one and flattens one with a view that a
    channels-last tensor does not allow: each is converted back to the traced layout."""

    def __init__(self, view=True):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.view = view

    def forward(self, x):
        a = torch.sigmoid(self.conv(x))
        b = self.conv2(a) * 2
        flat = b.view(b.size(0), -1) if self.view else b.reshape(b.size(0), -1)
        return a, F.interpolate(b, scale_factor=2.0), flat


def _compare(model, *args, rtol=1e-4, atol=1e-5):
    compiled = dynvm.compile(model)
    with torch.no_grad():
        expected = model(*args)
        for _ in range(3):  # the trace, the first compiled run and a cached one
            got = compiled(*args)
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = got if isinstance(got, tuple) else (got,)
    for e, g in zip(expected, got):
        torch.testing.assert_close(g, e, rtol=rtol, atol=atol)
        assert g.stride() == e.stride(), (g.stride(), e.stride())


def test_a_convolution_network_equals_eager(channels_last_on):
    torch.manual_seed(0)
    _compare(Net().eval(), torch.randn(2, 3, 32, 32))


def test_returned_feature_maps_keep_eager_strides(channels_last_on):
    torch.manual_seed(0)
    _compare(FeatureMaps().eval(), torch.randn(2, 4, 6, 6))


def test_a_channels_last_input_stays_channels_last(channels_last_on):
    # The user converted the model and its input: no conversion is added, and the result
    # keeps the layout eager gives it (eager cannot view it flat: reshape copies).
    torch.manual_seed(0)
    model = FeatureMaps(view=False).eval().to(memory_format=torch.channels_last)
    _compare(model, torch.randn(2, 4, 6, 6).contiguous(memory_format=torch.channels_last))


def test_resnet18_equals_eager(channels_last_on):
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    _compare(torchvision.models.resnet18().eval(), torch.randn(2, 3, 64, 64), rtol=1e-4,
             atol=1e-4)


def _clones(fn):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    return sum(1 for e in prof.events() if e.name == "aten::clone")


def test_weights_are_converted_once_and_again_when_they_change(channels_last_on):
    # Each 3x3 weight is converted on the first call and kept (dynvm::kept_clone); the
    # image is converted on every call. A weight changed in place, or given new data,
    # is converted again: results stay equal to eager's.
    torch.manual_seed(0)
    model = Net().eval()
    compiled = dynvm.compile(model)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        first = _clones(lambda: compiled(x))
        steady = _clones(lambda: compiled(x))
        assert steady == 1 and first == 1 + 2, (first, steady)
        model.stem.weight.mul_(2.0)
        assert _clones(lambda: torch.testing.assert_close(compiled(x), model(x))) == 2
        model.block.conv1.weight.data = torch.randn_like(model.block.conv1.weight)
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
        assert _clones(lambda: compiled(x)) == 1


def test_training_step_gradients_equal_eager(channels_last_on):
    # Forward/backward halves keep the recorded layouts (FusionOptions::channels_last).
    torch.manual_seed(0)
    model = Net().train()
    reference = Net().train()
    reference.load_state_dict(model.state_dict())
    x = torch.randn(4, 3, 32, 32)
    compiled = dynvm.compile(model)
    for _ in range(2):
        compiled(x).square().mean().backward()
        reference(x).square().mean().backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-6, msg=name)
    for b, r in zip(model.buffers(), reference.buffers()):
        torch.testing.assert_close(b, r)


_SHOW = """
import torch, dynvm
from torch import nn
m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                  nn.Conv2d(8, 8, 3, padding=1), nn.ReLU()).eval()
x = torch.randn(2, 3, 16, 16)
with torch.no_grad():
    y = dynvm.compile(m)(x)
    assert torch.allclose(y, m(x), rtol=1e-4, atol=1e-5)
print("ok")
"""


@pytest.mark.parametrize("mode, converted", [("on", True), ("auto", False), ("off", False)])
def test_the_mode_decides_whether_the_graph_changes(mode, converted):
    # Mode auto changes only CUDA graphs. With the pass on, every fused group still
    # compiles (none runs through ATen for a layout it was not made for).
    result = run_python(_SHOW, DYNVM_CHANNELS_LAST=mode, DYNVM_LOGS="graph,kernels")
    assert result.returncode == 0, result.stderr
    assert "ok" in result.stdout
    assert ("memory_format=torch.channels_last" in result.stderr) == converted
    assert "runs through ATen" not in result.stderr


def test_an_unknown_mode_is_reported():
    result = run_python(_SHOW, DYNVM_CHANNELS_LAST="sometimes")
    assert result.returncode == 0, result.stderr
    assert "DYNVM_CHANNELS_LAST=sometimes is not one of auto, on, off" in result.stderr
