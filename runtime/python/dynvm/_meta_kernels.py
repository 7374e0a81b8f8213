"""Meta kernels for ATen operators that some torch releases lack, registered when the
running torch has none, so that fake tensors can trace them (without one, the operator
is a graph break and its module runs eagerly).

torch 2.11, for example, has no Meta kernel for `aten::_transformer_encoder_layer_fwd`,
the fused kernel `nn.TransformerEncoderLayer` takes in eval mode under `torch.no_grad()`:
a BERT-style encoder built from it was not compiled there. The kernel itself still runs
eagerly's own code at run time (an ATen call in the graph); only its output's metadata
comes from here.
"""
import torch

_registered = []
_library = None


def _encoder_layer_output(src, *args, **kwargs):
    # The layer maps each position to a vector of the same width: the output has the
    # input's sizes, dtype and device (nested tensors never reach a fake trace).
    return torch.empty_like(src, memory_format=torch.contiguous_format)


_KERNELS = {
    "_transformer_encoder_layer_fwd": _encoder_layer_output,
}


def missing():
    """The operators of this module the running torch has no Meta kernel for."""
    return [name for name in _KERNELS
            if hasattr(torch.ops.aten, name)
            and not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "Meta")]


def register():
    """Registers the kernels the running torch lacks (once); returns their names."""
    global _library
    if _library is None:
        names = missing()
        _library = torch.library.Library("aten", "IMPL")
        for name in names:
            _library.impl(name, _KERNELS[name], "Meta")
            _registered.append(name)
    return list(_registered)
