"""Checks of the corpus itself, run eagerly: the ATen ops a call executes (through a
TorchDispatchMode), which of them depend on tensor data, and a structural signature
of inputs for comparing two draws."""

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# Ops whose result (a Python scalar or an output shape) depends on tensor data: each
# would force a graph break, so no corpus function may run one.
DATA_DEPENDENT_OPS = frozenset({
    "aten::_local_scalar_dense",
    "aten::nonzero",
    "aten::masked_select",
    "aten::_unique",
    "aten::_unique2",
    "aten::unique_dim",
    "aten::unique_consecutive",
    "aten::bincount",
    "aten::equal",
    "aten::is_nonzero",
    "aten::allclose",
})
# Reading through a boolean mask gives a shape that depends on data (writing through
# one does not).
_BOOL_INDEXED = frozenset({"aten::index"})


def _has_bool_index(args):
    for arg in args:
        if isinstance(arg, (list, tuple)):
            if any(isinstance(a, torch.Tensor) and a.dtype in (torch.bool, torch.uint8)
                   for a in arg):
                return True
    return False


class OpRecorder(TorchDispatchMode):
    """Records the name of every ATen op run under it, and the data-dependent ones."""

    def __init__(self):
        super().__init__()
        self.ops = []
        self.data_dependent = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._schema.name
        self.ops.append(name)
        if name in DATA_DEPENDENT_OPS or (name in _BOOL_INDEXED and _has_bool_index(args)):
            self.data_dependent.append(name)
        return func(*_wrap_numbers(func, args), **(kwargs or {}))


def _wrap_numbers(func, args):
    # torch 1.13 hands some operators (Tensor.__or__, __xor__ with a Python int) to a
    # dispatch mode with the number unwrapped while the overload expects a Tensor.
    wrapped = list(args)
    for index, (arg, formal) in enumerate(zip(args, func._schema.arguments)):
        if isinstance(arg, (bool, int, float)) and str(formal.type) == "Tensor":
            wrapped[index] = torch.tensor(arg)
    return wrapped


def signature(obj):
    """A hashable description of `obj`'s structure: container types and lengths, dict
    keys, tensor dtype/shape/strides/requires_grad, module types and their tensors,
    and the values of everything that is not a tensor."""
    if isinstance(obj, torch.Tensor):
        return ("tensor", obj.dtype, tuple(obj.shape), obj.stride(), obj.requires_grad)
    if isinstance(obj, torch.nn.Module):
        tensors = tuple((name, signature(t)) for name, t in obj.state_dict().items())
        return ("module", type(obj), obj.training, tensors)
    if isinstance(obj, (list, tuple)):
        return (type(obj), tuple(signature(item) for item in obj))
    if isinstance(obj, dict):
        return (type(obj), tuple((key, signature(value)) for key, value in obj.items()))
    if hasattr(obj, "__dict__") and not callable(obj):
        return (type(obj), signature(vars(obj)))
    return (type(obj), obj)


def float_leaves_finite(obj):
    """True when every floating tensor reachable in `obj` holds only finite values."""
    if isinstance(obj, torch.Tensor):
        return not obj.is_floating_point() or bool(torch.isfinite(obj.detach()).all())
    if isinstance(obj, (list, tuple)):
        return all(float_leaves_finite(item) for item in obj)
    if isinstance(obj, dict):
        return all(float_leaves_finite(item) for item in obj.values())
    if hasattr(obj, "__dict__") and not callable(obj) and not isinstance(obj, torch.nn.Module):
        return float_leaves_finite(vars(obj))
    return True
