"""A cache of operator results on fake tensors, keyed by what the result depends on.

Tracing hands every ATen operator to torch's `FakeTensorMode`, whose own dispatch cache
builds its key in Python at about 150 us an operator: that was most of the time dynvm
spends tracing a model. Models repeat themselves (twelve identical transformer blocks,
sixteen bottlenecks), so the same operator meets arguments of the same metadata again and
again. This cache answers those repeats from a key of plain tuples, built in a few
microseconds, and makes the outputs directly.

It answers only operators whose outputs are decided by their arguments' metadata alone:
- functional operators (no argument written, every output fresh), and
- views of their first argument (the outputs share its storage, at their own sizes,
  strides and offsets),
that are not data-dependent, random, or special in torch's fake mode (lifting constants,
`_unsafe_view`). Everything else, and the first call of each key, goes to the fake mode,
and what it returns becomes the cache entry when it has the expected form. The key holds
each tensor argument's dtype, sizes, strides, storage offset, device, layout, conj and neg
bits and requires_grad, every other argument by type and value, and the default dtype;
an argument of any other kind (a real tensor, a symbolic size, an object) is not cached.

DYNVM_FAKE_CACHE (dynvm.config.fake_cache_mode) turns it off, or makes every hit also run
the fake mode and compare the two ("verify", for tests).
"""
import torch

from . import config
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils._mode_utils import no_dispatch as _no_dispatch

FRESH = 1
VIEW = 2

# Arguments cached by value (after their type: True and 1 are different keys).
_VALUE_TYPES = frozenset({int, float, bool, str, type(None), torch.dtype, torch.device,
                          torch.layout, torch.memory_format})
# Operators the fake mode treats specially, or whose outputs share storage although
# their schema says otherwise.
_SPECIAL_NAMES = ("lift", "_unsafe_view", "_local_scalar_dense", "mkldnn", "as_strided",
                  "set_", "resize")
_SKIPPED_TAGS = tuple(getattr(torch.Tag, name) for name in (
    "data_dependent_output", "dynamic_output_shape", "inplace_view", "nondeterministic_seeded")
    if hasattr(torch.Tag, name))

_LIMIT = 100_000  # entries; past this the cache starts over

_kinds = {}    # operator -> FRESH, VIEW or None
_entries = {}  # key -> tuple of output descriptions, or None for "not cacheable"
_mode = config.fake_cache_mode()
enabled = _mode != "off"
verify = _mode == "verify"
hits = 0


class _NotCacheable(Exception):
    pass


def kind_of(func):
    """FRESH, VIEW, or None for an operator this cache never answers."""
    if not enabled:
        return None
    kind = _kinds.get(func, 0)
    if kind == 0:
        kind = _classify(func)
        _kinds[func] = kind
    return kind


def _classify(func):
    if not isinstance(func, torch._ops.OpOverload):
        return None
    schema = func._schema
    if any(word in schema.name for word in _SPECIAL_NAMES):
        return None
    if any(tag in func.tags for tag in _SKIPPED_TAGS):
        return None
    if any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments):
        return None
    aliased = [r.alias_info for r in schema.returns if r.alias_info is not None]
    if not aliased:
        return FRESH
    # Views of the first argument: every return aliases it (a list return, such as
    # split's, carries its elements' alias set inside its type). That the outputs do
    # share its storage is checked again on the fake mode's own result.
    first = schema.arguments[0].alias_info if schema.arguments else None
    if first is None or len(aliased) != len(schema.returns) or any(a.is_write for a in aliased):
        return None
    return VIEW


def _describe_argument(x, mode, out):
    t = type(x)
    if t in _VALUE_TYPES:
        out.append(t)
        out.append(x)
    elif t is FakeTensor:
        if x.fake_mode is not mode or x.constant is not None:
            raise _NotCacheable
        out.append(t)
        out.append((x.dtype, x.shape, x.stride(), x.storage_offset(), x.fake_device, x.layout,
                    x.requires_grad, x.is_conj(), x.is_neg()))
    elif t is list or t is tuple:
        out.append(t)
        out.append(len(x))
        for item in x:
            _describe_argument(item, mode, out)
    else:
        raise _NotCacheable


def key_of(func, args, kwargs, mode):
    """The cache key of a call, or None when an argument is of a kind not cached."""
    parts = [func, torch.get_default_dtype()]
    try:
        for a in args:
            _describe_argument(a, mode, parts)
        for name in sorted(kwargs):
            parts.append(name)
            _describe_argument(kwargs[name], mode, parts)
    except _NotCacheable:
        return None
    return tuple(parts)


def _storage_id(tensor):
    return tensor.untyped_storage()._cdata


def _describe_outputs(kind, args, out):
    """The entry for what the fake mode returned, or None when it is not of the form the
    operator's kind promises (then the key is never answered from the cache)."""
    if type(out) not in (FakeTensor, tuple, list):
        return None  # a number, or a named tuple type the entry would not rebuild
    tensors = out if type(out) is not FakeTensor else (out,)
    inputs = [a for a in args if isinstance(a, torch.Tensor)]
    base = _storage_id(args[0]) if kind == VIEW and inputs and args[0] is inputs[0] else None
    if kind == VIEW and base is None:
        return None
    taken = {_storage_id(a) for a in inputs} if kind == FRESH else set()
    described = []
    for t in tensors:
        if t is None:
            described.append(None)
            continue
        if (type(t) is not FakeTensor or t.layout is not torch.strided or t.is_conj()
                or t.is_neg() or t.constant is not None or any(t is a for a in inputs)):
            return None
        storage = _storage_id(t)
        if (kind == VIEW and storage != base) or (kind == FRESH and storage in taken):
            return None
        taken.add(storage)
        described.append((t.shape, t.stride(), t.storage_offset(), t.dtype, t.fake_device,
                          t.requires_grad))
    return (type(out), tuple(described))


def remember(key, kind, args, out):
    if len(_entries) >= _LIMIT:
        _entries.clear()
    _entries[key] = _describe_outputs(kind, args, out)


_MISSING = object()


def call(func, kind, key, args, kwargs, mode):
    """func(*args, **kwargs) on fake tensors, answered from the cache where it can be."""
    entry = _entries.get(key, _MISSING)
    if entry is _MISSING:
        out = func(*args, **kwargs)
        remember(key, kind, args, out)
        return out
    if entry is None:
        return func(*args, **kwargs)  # seen before, and not of a form the cache answers
    out = replay(entry, kind, args, mode)
    return check_hit(func, args, kwargs, out) if verify else out


def new_fake(mode, shape, stride, dtype, device, requires_grad):
    """A fake tensor with its own storage, made as the fake mode makes its outputs."""
    with _no_dispatch():
        meta = torch.empty_strided(shape, stride, dtype=dtype, device="meta",
                                   requires_grad=requires_grad)
        return FakeTensor(mode, meta, device)


def replay(entry, kind, args, mode):
    """The outputs an entry describes, made as the fake mode would make them."""
    container, described = entry
    storage = args[0].untyped_storage() if kind == VIEW else None
    outputs = []
    with _no_dispatch():
        for d in described:
            if d is None:
                outputs.append(None)
                continue
            shape, stride, offset, dtype, device, requires_grad = d
            if storage is None:
                outputs.append(new_fake(mode, shape, stride, dtype, device, requires_grad))
                continue
            meta = torch.empty((0,), dtype=dtype, device="meta")
            meta.set_(storage, offset, shape, stride)
            if requires_grad:
                meta.requires_grad_(True)
            outputs.append(FakeTensor(mode, meta, device))
    global hits
    hits += 1
    if container is tuple or container is list:
        return container(outputs)
    return outputs[0]


def check_hit(func, args, kwargs, cached):
    """For `verify`: the fake mode's own result of the call must equal the cached one."""
    real = func(*args, **kwargs)
    mine = cached if isinstance(cached, (tuple, list)) else (cached,)
    theirs = real if isinstance(real, (tuple, list)) else (real,)

    base = _storage_id(args[0]) if args and isinstance(args[0], torch.Tensor) else None

    def meta(t):
        if t is None:
            return None
        return (tuple(t.shape), t.stride(), t.storage_offset(), t.dtype, t.device,
                t.requires_grad, "shared" if _storage_id(t) == base else "fresh")

    if type(cached) is not type(real) or [meta(t) for t in mine] != [meta(t) for t in theirs]:
        raise AssertionError(f"fake cache of {func}: cached {[meta(t) for t in mine]}, "
                             f"fake mode {[meta(t) for t in theirs]}")
    return real
