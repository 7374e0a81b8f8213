"""dynvm's Meta kernels for operators some torch releases lack (dynvm/_meta_kernels.py):
each gives the metadata the operator's real kernel gives, and where the running torch
lacks one, nn.TransformerEncoderLayer's fused path (eval mode, no_grad) is traced."""
import pytest
import torch

import dynvm
from dynvm import _meta_kernels

pytestmark = pytest.mark.skipif(not dynvm.vm_available(), reason="the VM is not built")


def _encoder(norm_first=False, activation="relu"):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, batch_first=True,
                                             norm_first=norm_first, activation=activation)
    return torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()


def _fused_arguments(layer, src):
    attn = layer.self_attn
    return (src, attn.embed_dim, attn.num_heads, attn.in_proj_weight, attn.in_proj_bias,
            attn.out_proj.weight, attn.out_proj.bias, layer.activation_relu_or_gelu == 2,
            layer.norm_first, layer.norm1.eps, layer.norm1.weight, layer.norm1.bias,
            layer.norm2.weight, layer.norm2.bias, layer.linear1.weight, layer.linear1.bias,
            layer.linear2.weight, layer.linear2.bias)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_encoder_layer_kernel_gives_the_real_kernels_metadata(dtype):
    layer = _encoder().layers[0].to(dtype)
    src = torch.randn(2, 5, 16, dtype=dtype)
    with torch.no_grad():
        real = torch._transformer_encoder_layer_fwd(*_fused_arguments(layer, src))
    meta_args = [a.to("meta") if isinstance(a, torch.Tensor) else a
                 for a in _fused_arguments(layer, src)]
    ours = _meta_kernels._KERNELS["_transformer_encoder_layer_fwd"](*meta_args)
    assert (ours.shape, ours.dtype, ours.stride()) == (real.shape, real.dtype, real.stride())
    assert ours.device.type == "meta"


def test_registration_fills_only_what_torch_lacks():
    registered = _meta_kernels.register()
    assert set(registered) <= set(_meta_kernels._KERNELS)
    for name in _meta_kernels._KERNELS:
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "Meta"), name
    assert _meta_kernels.missing() == []


@pytest.mark.parametrize("backend", ["eager", "dynvm"])
@pytest.mark.parametrize("norm_first,activation", [(False, "relu"), (True, "gelu")])
def test_a_transformer_encoder_in_eval_under_no_grad_is_one_graph(backend, norm_first,
                                                                 activation):
    model = _encoder(norm_first, activation)
    x = torch.randn(2, 7, 16)
    with torch.no_grad():
        report = dynvm.explain(dynvm.compile(model, backend=backend))(x)
        assert report.graph_count == 1 and report.graph_break_count == 0, str(report)
        compiled = dynvm.compile(model, backend=backend)
        for n in (7, 7, 9):
            x = torch.randn(2, n, 16)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
