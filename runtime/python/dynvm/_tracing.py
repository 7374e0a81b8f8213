"""Runs torch callables on fake tensors during tracing and records the ATen operators
they reach, for the VM (vm/torch_bridge.cpp) to turn into graph nodes.

The VM is C++; it calls into this module with the GIL held. Fake tensors carry dtype,
device, sizes, strides and requires_grad and compute shapes through the dispatcher's
Meta kernels, so tracing touches no data. A recording dispatch mode sits on top of the
fake mode and sees every operator as autograd hands it to the backends.
"""
import contextlib
import inspect
import logging
import threading
import warnings

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

from torch.func import functional_call as _functional_call
from torch.utils._pytree import tree_leaves as _tree_leaves, tree_map as _tree_map

from torch._subclasses import fake_tensor as _fake_tensor

from . import _fake_cache
from . import _meta_kernels

_meta_kernels.register()  # what this torch lacks for fake tensors (torch 2.11's encoder layer)

# Exceptions that mean "this needs real data": the VM turns them into graph breaks.
DATA_DEPENDENT = tuple(
    getattr(_fake_tensor, name)
    for name in ("DataDependentOutputException", "DynamicOutputShapeException",
                 "UnsupportedFakeTensorException")
    if hasattr(_fake_tensor, name))


_trace_state = threading.local()


class _QuietWhileTracing(logging.Filter):
    """Drops what torch's fake-tensor module logs about a kernel that raised (torch 2 logs
    "failed while attempting to run meta for ..." before re-raising) while this thread
    traces: the exception itself reaches the VM, which breaks the graph there, and eager
    execution raises it to the user as plain torch would, with nothing logged."""

    def filter(self, record):
        return not getattr(_trace_state, "depth", 0)


logging.getLogger(_fake_tensor.__name__).addFilter(_QuietWhileTracing())


@contextlib.contextmanager
def _tracing():
    _trace_state.depth = getattr(_trace_state, "depth", 0) + 1
    try:
        yield
    finally:
        _trace_state.depth -= 1


class _SessionFakeMode(FakeTensorMode):
    """A fake mode that asks whether a device (CUDA, ...) is available once, when the
    trace starts, rather than each time it is entered: the VM enters it for every torch
    call it traces, and torch's own property calls torch.cuda.is_available() (about a
    tenth of a traced call where torch was built with CUDA)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._avoid_device_init = FakeTensorMode.avoid_device_init.fget(self)

    @property
    def avoid_device_init(self):
        return self._avoid_device_init


def _make_fake_mode(shape_env=None):
    mode_class = (_SessionFakeMode
                  if isinstance(FakeTensorMode.__dict__.get("avoid_device_init"), property)
                  else FakeTensorMode)
    params = inspect.signature(FakeTensorMode.__init__).parameters
    kwargs = {}
    if "throw_on_data_dependent_ops" in params:
        kwargs["throw_on_data_dependent_ops"] = True
    if "allow_non_fake_inputs" in params:
        kwargs["allow_non_fake_inputs"] = False
    if "static_shapes" in params:
        kwargs["static_shapes"] = True
    if shape_env is not None:
        kwargs["shape_env"] = shape_env
    return mode_class(**kwargs)


def _qualified_name(func):
    schema = func._schema
    return schema.name + ("." + schema.overload_name if schema.overload_name else "")


# In-place operators that change their input's sizes or strides by design.
_RESHAPING_IN_PLACE = frozenset({
    "aten::as_strided_", "aten::resize_", "aten::resize_as_", "aten::set_", "aten::squeeze_",
    "aten::swapaxes_", "aten::swapdims_", "aten::t_", "aten::transpose_", "aten::unsqueeze_",
})


def _in_place_layout(func, args):
    """The sizes, strides and dtype of the tensor an in-place operator writes (its first
    argument), or None for other operators and for those that reshape it by design."""
    schema = func._schema
    first = schema.arguments[0] if schema.arguments else None
    if (not schema.name.endswith("_") or schema.name.endswith("__") or first is None
            or first.alias_info is None or not first.alias_info.is_write
            or schema.name in _RESHAPING_IN_PLACE or "resize" in schema.name
            or not args or not isinstance(args[0], torch.Tensor)):
        return None
    return tuple(args[0].shape), args[0].stride(), args[0].dtype


class InPlaceLayoutChanged(RuntimeError):
    """A fake in-place operator changed its input's layout, which the real one never does
    (it raises instead): the VM turns this into a graph break."""


_PRIM_DEVICE = torch.ops.prim.device.default
_FakeTensor = _fake_tensor.FakeTensor


class _Recorder(TorchDispatchMode):
    """Appends (operator name, schema, args, kwargs, out) for every top-level op."""

    def __init__(self, records, fake_mode, symbols=None):
        super().__init__()
        self.records = records
        self.fake_mode = fake_mode
        self.symbols = symbols  # a symbolic session's SymbolTable, else None
        self.cached = symbols is None  # answer repeats from _fake_cache (not when symbolic)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is _PRIM_DEVICE and len(args) == 1 and type(args[0]) is _FakeTensor and \
                args[0].fake_mode is self.fake_mode and not self.fake_mode.in_kernel_invocation:
            # A device query that C++ code (indexing, TensorIterator) makes of a fake tensor:
            # its answer is the fake's device, as the fake mode would give after building a
            # cache key, and it is no operator of the graph. GPT-2 makes about 450 of them.
            return args[0].fake_device
        kwargs = kwargs or {}
        kind = _fake_cache.kind_of(func) if self.cached else None
        key = None if kind is None else _fake_cache.key_of(func, args, kwargs, self.fake_mode)
        if key is not None:
            out = _fake_cache.call(func, kind, key, args, kwargs, self.fake_mode)
            self.records.append((func, args, kwargs, out))
            return out
        layout = _in_place_layout(func, args)
        unguarded = None if self.symbols is None else \
            self.symbols.unguarded_conv_backend(func, args, kwargs)
        with unguarded or _NO_CONTEXT:
            out = func(*args, **kwargs)
        # torch 1.13's reference meta kernels resize an in-place operator's input like an
        # out= tensor: a [5, 1] tensor's logical_and_ with a [5, 5] one became [5, 5] where
        # eager raises.
        if layout is not None and _in_place_layout(func, args) != layout:
            raise InPlaceLayoutChanged(
                f"{_qualified_name(func)} changed its input from {list(layout[0])} to "
                f"{list(args[0].shape)} on fake tensors")
        self.records.append((func, args, kwargs, out))
        return out


# Tensor methods (and torch functions) whose Scalar multiplier (`alpha=`, `value=`) Python
# reads with .item() when it is given a 0-dim tensor: an optimizer's step size, computed
# from its step count under torch.compiler.is_compiling(). That value is data the trace does
# not know, so the call is traced as the same arithmetic with the multiplier as a tensor.
_TENSOR_MULTIPLIERS = {
    "add": ("alpha", lambda a, b, m: torch.add(a, torch.mul(b, m))),
    "sub": ("alpha", lambda a, b, m: torch.sub(a, torch.mul(b, m))),
    "addcmul": ("value", lambda a, b, c, m: torch.add(a, torch.mul(torch.mul(b, m), c))),
    "addcdiv": ("value", lambda a, b, c, m: torch.add(a, torch.div(torch.mul(b, m), c))),
}


def _foreach_per_tensor(fn, args, kwargs):
    """torch._foreach_<op>(lists, ...) (what optimizers run with foreach=True) as <op> on
    each tensor in turn, so that the graph holds per-tensor operators the fusion pipeline
    knows; None when fn is not such a function."""
    name = getattr(fn, "__name__", "")
    if not name.startswith("_foreach_") or getattr(fn, "__self__", None) is not None:
        return None
    op = name[len("_foreach_"):]
    inplace = op.endswith("_")
    lists = [a for a in args if isinstance(a, (list, tuple))]
    # An in-place op without a tensor method (_foreach_maximum_): the operator's result
    # copied into the first tensor.
    copied = inplace and not hasattr(torch.Tensor, op) and hasattr(torch, op[:-1])
    if not lists or not (hasattr(torch.Tensor, op) or copied):
        return None
    count = len(lists[0])
    # addcdiv/addcmul take their multiplier (keyword `value=` of the tensor method) as a
    # fourth argument: one number, a list, or one 1-D tensor of them (`scalars`).
    multiplier = None
    if op.rstrip("_") in ("addcdiv", "addcmul") and len(args) == 4:
        args, multiplier = args[:3], args[3]

    def nth(i, a):
        return a[i] if isinstance(a, (list, tuple)) else a

    def run():
        results = []
        for i in range(count):
            each = [nth(i, a) for a in args]
            keywords = dict(kwargs)
            if multiplier is not None:
                keywords["value"] = multiplier[i] if isinstance(multiplier, (list, tuple)) or \
                    _is_tensor(multiplier) else multiplier
            first = next(a for a in each if _is_tensor(a))
            if copied:
                first.copy_(getattr(torch, op[:-1])(*each, **keywords))
                continue
            if inplace or _is_tensor(each[0]):
                method = getattr(first, op)
                rest = each[1:] if each[0] is first else each
            else:
                method, rest = getattr(torch, op), each
            as_tensor = _tensor_multiplier_call(method, rest, keywords)
            results.append(as_tensor() if as_tensor is not None else method(*rest, **keywords))
        return None if inplace else results

    return run


def _tensor_multiplier_call(fn, args, kwargs):
    """A call equal to fn(*args, **kwargs) whose 0-dim tensor multiplier stays a tensor, or
    None when fn is not such a call."""
    name = getattr(fn, "__name__", "")
    inplace = name.endswith("_") and not name.endswith("__")
    entry = _TENSOR_MULTIPLIERS.get(name[:-1] if inplace else name)
    if entry is None:
        return None
    keyword, compute = entry
    multiplier = kwargs.get(keyword)
    if not (_is_tensor(multiplier) and multiplier.dim() == 0) or \
            set(kwargs) - {keyword}:
        return None
    owner = getattr(fn, "__self__", None)
    operands = ((owner,) if _is_tensor(owner) else ()) + tuple(args)
    if len(operands) != compute.__code__.co_argcount - 1 or \
            not all(_is_tensor(o) for o in operands):
        return None
    if not inplace:
        return lambda: compute(*operands, multiplier)
    return lambda: operands[0].copy_(compute(*operands, multiplier))


def _is_tensor(x):
    return isinstance(x, torch.Tensor)


_SYMBOLIC_NUMBERS = (torch.SymInt, torch.SymFloat, torch.SymBool)
_NO_CONTEXT = contextlib.nullcontext()  # reusable: enters and leaves doing nothing


def _hint(size):
    """The value a size (an int or a torch.SymInt) has at the trace's input sizes."""
    if isinstance(size, int):
        return size
    return size.node.hint


def _tensors_in(value):
    """The tensors in a torch function's result, in order: a tensor, a tuple or list of
    them (nested), or anything pytree flattens (the general case, slower)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        found = []
        for item in value:
            found.extend(_tensors_in(item))
        return found
    if value is None or isinstance(value, (bool, int, float)):
        return []
    return [x for x in _tree_leaves(value) if _is_tensor(x)]


# Operators whose result is not a function of their arguments' values: never folded.
_NOT_FOLDED = ("empty", "rand", "normal", "bernoulli", "uniform", "dropout", "multinomial",
               "exponential", "geometric", "cauchy", "poisson", "seed")
# A folded tensor holds at most this many elements (scales and the like, not data).
_FOLDED_NUMEL = 64


_PLAIN_TYPES = (torch.Tensor, torch.nn.Parameter)
_is_functorch_wrapped = getattr(torch._C._functorch, "is_functorch_wrapped_tensor",
                                lambda t: True)


def _plain_fake(fake_mode, tensor):
    """The fake of a plain dense tensor that owns exactly its storage (a parameter, a
    buffer, a model's input: nearly every tensor a trace starts from), made directly from
    its metadata; None for every other tensor, which goes through torch's general
    converter. That converter describes each tensor in full (views, storage sharing,
    subclasses, functorch wrappers) and costs about 200 us a tensor, which was a quarter of
    tracing a CNN. Both give the same fake: sizes, strides, dtype, device, requires_grad,
    leafness and the parameter mark."""
    t = tensor
    if (type(t) not in _PLAIN_TYPES or t.layout is not torch.strided or t.device.type not in
            ("cpu", "cuda") or t._is_view() or t.storage_offset() != 0 or t.is_quantized
            or t.is_nested or t.is_conj() or t.is_neg() or t.is_inference()
            or (t.requires_grad and not t.is_leaf) or _is_functorch_wrapped(t)
            or torch._is_functional_tensor(t)):
        return None
    sizes, strides = t.shape, t.stride()
    span = 0 if 0 in sizes else 1 + sum((n - 1) * s for n, s in zip(sizes, strides))
    if t.untyped_storage().nbytes() != span * t.element_size():
        return None  # a storage shared with other tensors, or resized under the tensor
    fake = _fake_cache.new_fake(fake_mode, sizes, strides, t.dtype, t.device, t.requires_grad)
    if type(t) is torch.nn.Parameter:
        fake._is_param = True
    if getattr(t, "_is_buffer", False):
        fake._is_buffer = True
    return fake


class TraceSession:
    """State of one trace: the fake mode and the operators recorded so far.

    Tensors computed from Python constants alone (`torch.tensor(0.25).log2().round()`, as
    torchvision's RoI pooler computes its scales) are also computed for real, small ones
    on the CPU only, so that float(), int(), bool() and .item() of them are constants, as
    their inputs are (guarded where they came from)."""

    def __init__(self, symbolic=False):
        # Dynamic shapes: symbols for the sizes the VM asks to keep dynamic (_symbolic).
        self.symbols = None
        if symbolic:
            from . import _symbolic
            self.symbols = _symbolic.SymbolTable()
        self.fake_mode = _make_fake_mode(self.symbols.shape_env if symbolic else None)
        self.records = []
        self.recorder = _Recorder(self.records, self.fake_mode, self.symbols)
        self.folded = {}  # id(fake) -> (fake, its real value)

    def fake_from_real(self, tensor, dims=None, source_text=None):
        """The fake of an input tensor; with `dims` (a symbolic session), those of its
        dimensions have symbolic sizes."""
        fake = None
        if dims and self.symbols is not None:
            fake = self.symbols.symbolic_fake(self.fake_mode, tensor, set(dims), source_text)
        if fake is None:
            fake = _plain_fake(self.fake_mode, tensor)
        if fake is None:
            fake = self.fake_mode.from_tensor(tensor)
        # torch 2 keeps the value of a real 0-d CPU integer or float64 tensor on its fake
        # (item_memo), so item() would hand the trace data that no guard checks: forget
        # it, so that item() needs real data (a graph break) as on every other tensor.
        if getattr(fake, "item_memo", None) is not None:
            fake.item_memo = None
        if tensor.is_leaf and tensor.grad is not None and fake.grad is None:
            # A fake has no gradient, so a torch function called on fakes that reads
            # `.grad` would see none and do nothing with it, silently. Its fake stands in,
            # a tensor the graph does not know unless the VM read it from its source: an
            # operator that reads it is a graph break, never a computation left out.
            try:
                fake.grad = self.fake_mode.from_tensor(tensor.grad)
            except RuntimeError:
                pass
        return fake

    def _dispatcher(self):
        """With symbolic sizes, torch's Python dispatcher, as Dynamo traces: composite
        operators then decompose through their Python (SymInt-aware) implementations,
        where some C++ ones would read a concrete numel()."""
        if self.symbols is None:
            return _NO_CONTEXT
        from torch._dispatch.python import enable_python_dispatcher
        return enable_python_dispatcher()

    # --- dynamic shapes (a symbolic session)
    def symbolic_meta(self, fake):
        """None for a fake of fixed sizes; else (sizes, strides) at the symbols' hints and
        their expressions as text."""
        if not fake._has_symbolic_sizes_strides:
            return None
        shape, stride = fake.shape, fake.stride()
        return ([int(_hint(s)) for s in shape], [int(_hint(s)) for s in stride],
                [self.symbols.text(s) for s in shape], [self.symbols.text(s) for s in stride])

    def sym_argument(self, value):
        """A torch.SymInt, SymFloat or SymBool as an operator argument: the number the
        guards fix it to, else a SymInt's expression in the graph IR's text form, else
        None (a symbolic float or bool, which the graph cannot take)."""
        fixed = self.symbols.constant(value)
        if fixed is not None:
            return fixed
        return self.symbols.text(value) if isinstance(value, torch.SymInt) else None

    def symbolic_summary(self):
        """([(source text, hint)] per symbol, [relation text]) at the end of a trace."""
        return self.symbols.symbol_list(), self.symbols.relation_texts()

    def call(self, fn, args, kwargs, grad_enabled):
        """Calls fn(*args, **kwargs) on fake tensors; returns (result, new records)."""
        per_tensor = _foreach_per_tensor(fn, args, kwargs)
        if per_tensor is not None:
            return self.call(per_tensor, (), {}, grad_enabled)
        start = len(self.records)
        try:
            with torch.set_grad_enabled(grad_enabled):
                with _tracing(), self._dispatcher(), self.fake_mode, self.recorder:
                    result = fn(*args, **kwargs)
        except DATA_DEPENDENT:
            del self.records[start:]
            rewritten = _tensor_multiplier_call(fn, args, kwargs)
            if rewritten is not None:
                return self.call(rewritten, (), {}, grad_enabled)
            value = self._call_folded(fn, args, kwargs)
            if value is None or any(_is_tensor(v) for v in _tree_leaves(value)):
                raise
            return value, []  # .item() of a folded tensor: a constant, no operator
        self._fold(fn, args, kwargs, result, start)
        return result, self._take(start)

    def folded_value(self, fake):
        """The real value of a fake tensor computed from constants alone, or None."""
        entry = self.folded.get(id(fake))
        return entry[1] if entry is not None and entry[0] is fake else None

    def _real_arguments(self, args, kwargs):
        """(args, kwargs) with every fake replaced by its folded value, or None when one
        has none."""
        missing = []

        def real(x):
            if not _is_tensor(x):
                return x
            value = self.folded_value(x)
            if value is None:
                missing.append(x)
            return value

        real_args, real_kwargs = _tree_map(real, (tuple(args), dict(kwargs)))
        return None if missing else (real_args, real_kwargs)

    def _call_folded(self, fn, args, kwargs):
        arguments = self._real_arguments(args, kwargs)
        if arguments is None:
            return None
        with torch.no_grad():
            return fn(*arguments[0], **arguments[1])

    def _fold(self, fn, args, kwargs, result, start):
        records = self.records[start:]
        outputs = _tensors_in(result)
        # (A tensor with symbolic sizes is never small: comparing its numel would guard it.)
        small = bool(outputs) and all(
            o.device.type == "cpu" and not o._has_symbolic_sizes_strides
            and o.numel() <= _FOLDED_NUMEL for o in outputs)
        # A write (with nothing folded and no small result, there is nothing to forget or
        # to fold: a model's activations, the common case, skip the scan).
        if (self.folded or small) and any(_mutates(func._schema) for func, _, _, _ in records):
            self.folded.clear()  # whatever was written, no folded value is trusted after it
            return
        if not small:
            return
        leaves = _tree_leaves((args, kwargs))
        if not self.folded and any(_is_tensor(a) for a in leaves):
            return  # tensors that come from the graph's inputs
        if self.symbols is not None and any(isinstance(a, _SYMBOLIC_NUMBERS) for a in leaves):
            return  # a size of the inputs (dynamic shapes): not a constant
        for func, _, _, _ in records:
            name = func._schema.name
            if any(word in name for word in _NOT_FOLDED) or \
                    torch.Tag.nondeterministic_seeded in func.tags:
                return
        real = self._call_folded(fn, args, kwargs)
        if real is None:
            return
        real_outputs = [x for x in _tree_leaves(real) if _is_tensor(x)]
        if len(real_outputs) != len(outputs):
            return
        for fake, value in zip(outputs, real_outputs):
            if tuple(fake.shape) == tuple(value.shape) and fake.dtype == value.dtype:
                self.folded[id(fake)] = (fake, value)

    def call_module(self, module, fake_state, args, kwargs, grad_enabled):
        """Calls a leaf nn.Module with its parameters and buffers replaced by fakes."""
        start = len(self.records)
        with torch.set_grad_enabled(grad_enabled):
            with _tracing(), self._dispatcher(), self.fake_mode, self.recorder:
                result = _functional_call(module, fake_state, tuple(args), kwargs)
        return result, self._take(start)

    def _take(self, start):
        """The records from `start` on, as (name, [(arg name, kwarg-only, value)],
        [outputs]) with tensors left as fake tensor objects for the VM to map."""
        out = []
        for func, args, kwargs, result in self.records[start:]:
            schema = func._schema
            bound = []
            for i, a in enumerate(schema.arguments):
                if i < len(args):
                    bound.append((a.name, a.kwarg_only, args[i]))
                elif a.name in kwargs:
                    bound.append((a.name, a.kwarg_only, kwargs[a.name]))
            if isinstance(result, (tuple, list)):
                outputs = list(result)
            else:
                outputs = [result]
            if not any(_is_tensor(o) for o in outputs) and not _mutates(schema):
                continue  # a pure query such as prim::device: nothing to run
            out.append((_qualified_name(func), bound, outputs))
        del self.records[start:]
        return out


def _mutates(schema):
    return any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)


class GradModeExit:
    """The __exit__ of a grad-mode `with` block rebuilt after a graph break: called as
    __exit__ is, it sets the grad mode back to `restore` and lets exceptions propagate,
    as torch.no_grad does. The VM knows this type and traces a call of it."""

    __slots__ = ("restore",)

    def __init__(self, restore):
        self.restore = restore

    def __call__(self, exc_type=None, exc_value=None, traceback=None):
        torch._C._set_grad_enabled(self.restore)
        return False


def grad_mode_exit(restore):
    return GradModeExit(bool(restore))


def autocast_is_unchanged(device_type, dtype=None, enabled=True, cache_enabled=None):
    """Whether torch.autocast(device_type, dtype, enabled, cache_enabled) asks for the
    autocast state the thread is in already (so entering and leaving it change nothing).
    cache_enabled only decides whether casts of weights are cached, not any result."""
    if device_type not in ("cpu", "cuda"):
        return False  # the AUTOCAST guard covers these two
    on = torch.is_autocast_enabled(device_type)
    if not enabled:
        return not on
    return on and (dtype is None or dtype == torch.get_autocast_dtype(device_type))


def unchanged_exit(exc_type=None, exc_value=None, traceback=None):
    """The __exit__ of a `with torch.autocast(...)` that asked for the state autocast
    already had (the trace guards that state): there is nothing to restore. The VM traces
    a call of it and a graph break inside the block rebuilds it as it is."""
    return False


class NoGradFunctionContext:
    """The `ctx` a traced torch.autograd.Function.forward receives when no gradient can flow
    (grad mode off, or no input requires grad): what forward records for backward is never
    used, so these calls do nothing, and attributes forward sets are kept as on any object."""

    def save_for_backward(self, *tensors):
        pass

    def save_for_forward(self, *tensors):
        pass

    def mark_dirty(self, *tensors):
        pass

    def mark_non_differentiable(self, *tensors):
        pass

    def set_materialize_grads(self, value):
        pass


def emit_log(logger, level, filename, lineno, function, msg, *args):
    """A log call the trace deferred to after the graph (vm/logging_calls.cpp): what
    `logger.log(level, msg, *args)` does at `filename:lineno` in `function`, the place
    logging would have found in the caller's frame, which the graph's caller is not."""
    if not logger.isEnabledFor(level):
        return
    if not logging._srcfile:
        filename, lineno, function = "(unknown file)", 0, "(unknown function)"
    record = logger.makeRecord(logger.name, level, filename, lineno, msg, args, None, function,
                               None, None)
    logger.handle(record)


def prep_reraise_star(orig, raised):
    """What the end of a `try ... except*` statement re-raises, as CPython 3.11 computes it
    (Objects/exceptions.c, not exported there; 3.12's is called directly): `orig` the
    exception the statement caught (a plain ExceptionGroup tree, vm/inline_frame.cpp),
    `raised` what its clauses raised and the part none matched, None for none. A clause
    that re-raised its part leaves an exception with orig's metadata; those parts are kept
    as one projection of orig, the others raised beside it in a new group."""
    if not raised:
        return None
    if not isinstance(orig, BaseExceptionGroup):
        return raised[0]  # a bare exception, wrapped: one clause at most ran

    def same_metadata(a, b):
        return all(getattr(a, name, None) is getattr(b, name, None)
                   for name in ("__notes__", "__traceback__", "__cause__", "__context__"))

    def leaf_ids(exception, into):
        if isinstance(exception, BaseExceptionGroup):
            for member in exception.exceptions:
                leaf_ids(member, into)
        else:
            into.add(id(exception))
        return into

    new = [e for e in raised if e is not None and not same_metadata(e, orig)]
    kept = set()
    for e in raised:
        if e is not None and same_metadata(e, orig):
            leaf_ids(e, kept)
    reraised = orig.split(lambda leaf: id(leaf) in kept)[0] if kept else None
    if not new:
        return reraised
    if reraised is not None:
        new.append(reraised)
    return BaseExceptionGroup("", new) if len(new) > 1 else new[0]


def warning_action(category, text, module, lineno):
    """What warnings' filters say a warning of `category` with message `text`, made at
    line `lineno` of module `module`, does ("error", "ignore", "default", ...): the
    first matching filter's action, else the default action, as warnings.warn decides.
    The trace asks so that an error is raised where eager raises it and an ignored
    warning leaves nothing to run (vm/warning_calls.cpp)."""
    for action, message, cls, mod, ln in warnings.filters:
        if ((message is None or message.match(text)) and issubclass(category, cls) and
                (mod is None or mod.match(module)) and (ln == 0 or lineno == ln)):
            return action
    return warnings.defaultaction


def emit_warning(message, category, filename, lineno, module_globals):
    """A warnings.warn call the trace deferred to after the graph (vm/warning_calls.cpp):
    what warn does for the frame at its stacklevel, whose file, line and globals the
    trace recorded: the registry is the globals' `__warningregistry__` (made when
    missing), the module their `__name__`."""
    if "__warningregistry__" not in module_globals:
        module_globals["__warningregistry__"] = {}
    registry = module_globals["__warningregistry__"]
    module = module_globals.get("__name__", "<string>")
    if module is not None and not isinstance(module, str):
        module = "<string>"
    warnings.warn_explicit(message, category, filename, lineno, module, registry)


class AutogradFunctionOp:
    """A torch.autograd.Function applied under grad mode, as one operator of the graph
    (vm/calls.cpp): `dynvm_fn::apply_<n>(Tensor[] tensors) -> Tensor[]`, whose tensors are
    the call's tensor arguments in order, its other arguments fixed per operator. Below
    autograd it runs the Function's forward with no graph recorded (and on fake tensors
    when traced); at the Autograd key it calls `Function.apply`, so a backward through
    it is the Function's own, as in eager. `single` says, once it has run, whether the
    Function returns one tensor rather than a tuple."""

    _library = None
    _made = {}

    def __init__(self, cls, template, name):
        self.cls = cls
        self.template = template  # per argument: None for a tensor, else (constant,)
        self.single = None
        self.aliases = False
        self.op = None
        self._register(name)

    def _arguments(self, tensors):
        it = iter(tensors)
        return [next(it) if slot is None else slot[0] for slot in self.template]

    def _outputs(self, out, tensors):
        single = isinstance(out, torch.Tensor)
        outs = [out] if single else list(out) if isinstance(out, tuple) else None
        if outs is None or not all(isinstance(o, torch.Tensor) for o in outs):
            raise TypeError(f"{self.cls.__name__}.apply returned something other than "
                            "tensors")
        self.single = single
        return outs

    def _register(self, name):
        lib = AutogradFunctionOp._library
        if lib is None:
            lib = AutogradFunctionOp._library = torch.library.Library("dynvm_fn", "DEF")
        lib.define(f"{name}(Tensor[] tensors) -> Tensor[]")

        def forward_only(tensors):
            with torch.no_grad():
                outs = self._outputs(self.cls.apply(*self._arguments(tensors)), tensors)
            # An output that is an argument or a view of one: not one graph value of its
            # own. The trace refuses the call (aliases); a run below autograd copies it.
            same = [any(o is t or (o._is_view() and o._base is t) for t in tensors)
                    for o in outs]
            self.aliases = self.aliases or any(same)
            return [o.clone() if s else o for o, s in zip(outs, same)]

        def with_autograd(tensors):
            if any(isinstance(t, _fake_tensor.FakeTensor) for t in tensors):
                # The trace records this operator: it runs below autograd, and its outputs
                # require grad as Function.apply's would (the graph's metadata says so).
                with torch._C._AutoDispatchBelowAutograd():
                    outs = self.op(tensors)
                if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
                    for o in outs:
                        if o.dtype.is_floating_point or o.dtype.is_complex:
                            o.requires_grad_(True)
                return outs
            if not torch.is_grad_enabled():
                with torch._C._AutoDispatchBelowAutograd():
                    return self.op(tensors)
            return self._outputs(self.cls.apply(*self._arguments(tensors)), tensors)

        lib.impl(name, forward_only, "CompositeExplicitAutograd")
        lib.impl(name, with_autograd, "Autograd")
        torch.library.register_fake(f"dynvm_fn::{name}", forward_only, lib=lib)
        self.op = getattr(torch.ops.dynvm_fn, name).default

    @classmethod
    def of(cls, function_class, arguments):
        """The operator for `function_class.apply(*arguments)`, tensors among `arguments`
        taken as its inputs, the rest as fixed; made once per class and fixed values."""
        template = tuple(None if isinstance(a, torch.Tensor) else (a,) for a in arguments)
        key = (function_class, repr([(type(s[0]).__qualname__, s[0]) if s else None
                                     for s in template]))
        made = cls._made.get(key)
        if made is None:
            made = cls._made[key] = cls(function_class, template, f"apply_{len(cls._made)}")
        return made
