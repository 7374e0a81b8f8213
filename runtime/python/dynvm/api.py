"""dynvm's public functions, shaped like torch.compile: compile, explain, reset, disable."""

import functools

from dynvm import _native, backends, config, stats, wrappers
from dynvm.explain_output import ExplainOutput


def _check_callable(obj, who):
    if not callable(obj):
        raise TypeError(
            f"{who} expects a function or an nn.Module, got {type(obj).__name__}"
        )


def compile(  # shadows the builtin on purpose: the name users know from torch.compile
    fn_or_module=None,
    *,
    backend=config.DEFAULT_BACKEND,
    mode=config.DEFAULT_MODE,
    fullgraph=False,
    dynamic=None,
):
    """Compiles a function or an nn.Module with dynvm.

    Use it as a call, `dynvm.compile(fn)`, or as a decorator, `@dynvm.compile` or
    `@dynvm.compile(backend="eager")`. A module comes back as a module whose calls are
    compiled and whose attributes are the original's. Compilation is lazy: it happens
    at the first call. With DYNVM_DISABLE=1, or for what dynvm.disable returned, the
    input comes back unchanged.
    """
    options = wrappers.CompileOptions(
        backend=config.check_backend(backend),
        mode=config.check_mode(mode),
        fullgraph=_check_flag(fullgraph, "fullgraph"),
        dynamic=_check_dynamic(dynamic),
    )
    if fn_or_module is None:
        return functools.partial(_compile_with, options=options)
    return _compile_with(fn_or_module, options=options)


def _check_flag(value, name):
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def _check_dynamic(value):
    """None: a dimension whose size changes between calls is traced symbolically from
    the recompile on; True: every dimension is symbolic from the first trace; False:
    sizes are always fixed (docs/dynamic_shapes.md)."""
    if value is not None and not isinstance(value, bool):
        raise TypeError(f"dynamic must be None, True or False, got {value!r}")
    return value


def mark_dynamic(tensor, dim, min=None, max=None):
    """Traces dimension `dim` (an int or a list of them) of `tensor` with a symbolic size
    the first time a compiled function receives it as an argument, instead of waiting for
    the size to change. `min` and `max`, when given, bound the sizes that trace serves
    (guarded); a size outside them gets a trace of its own."""
    import torch
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"mark_dynamic expects a tensor, got {type(tensor).__name__}")
    dims = [dim] if isinstance(dim, int) else list(dim)
    for d in dims:
        if not isinstance(d, int) or not -tensor.dim() <= d < tensor.dim():
            raise IndexError(f"mark_dynamic: dimension {d!r} out of range for a "
                             f"{tensor.dim()}-dimensional tensor")
    if min is not None and max is not None and min > max:
        raise ValueError(f"mark_dynamic: min {min} is above max {max}")
    dims = {d % tensor.dim() for d in dims}
    tensor._dynvm_dynamic_dims = set(getattr(tensor, "_dynvm_dynamic_dims", ())) | dims
    tensor._dynvm_static_dims = set(getattr(tensor, "_dynvm_static_dims", ())) - dims
    if min is not None or max is not None:
        ranges = dict(getattr(tensor, "_dynvm_dynamic_ranges", {}))
        ranges.update({d: (min, max) for d in dims})
        tensor._dynvm_dynamic_ranges = ranges


def mark_static(tensor, dim=None):
    """Keeps dimension `dim` (all of them when None) of `tensor` at a fixed size, undoing
    mark_dynamic and exempting it from dynamic=None's automatic dynamic dimensions."""
    import torch
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"mark_static expects a tensor, got {type(tensor).__name__}")
    dims = range(tensor.dim()) if dim is None else ([dim] if isinstance(dim, int) else dim)
    dims = {d % tensor.dim() for d in dims}
    tensor._dynvm_dynamic_dims = set(getattr(tensor, "_dynvm_dynamic_dims", ())) - dims
    tensor._dynvm_static_dims = set(getattr(tensor, "_dynvm_static_dims", ())) | dims


def _compile_with(fn_or_module, *, options):
    _check_callable(fn_or_module, "dynvm.compile")
    if config.disabled() or wrappers.is_disabled(fn_or_module):
        return fn_or_module
    if isinstance(fn_or_module, wrappers.CompiledFunction):
        # Compiling again replaces the options instead of stacking wrappers.
        fn_or_module = fn_or_module.__wrapped__
    if wrappers.is_module(fn_or_module):
        module_class = wrappers.compiled_module_class()
        if isinstance(fn_or_module, module_class):
            fn_or_module = fn_or_module._orig_mod
        return module_class(fn_or_module, options)
    return wrappers.CompiledFunction(fn_or_module, options)


def explain(fn, *args, **kwargs):
    """Returns a function that, called like `fn`, reports what dynvm makes of that call.

    The call runs (so that the parts after each graph break are traced from the values
    they really see), with every part traced afresh. The report is an ExplainOutput:
    graph_count, graph_break_count, break_reasons (each with reason, filename, lineno),
    ops_per_graph, guards and, under mode="reduce-overhead", cuda_graphs (per graph: whether
    it replays as a CUDA graph, or why not).

    `explain(fn, *args, **kwargs)`, the older form torch._dynamo.explain still takes, makes
    that call at once and returns its report.
    """
    _check_callable(fn, "dynvm.explain")
    if args or kwargs:
        return explain(fn)(*args, **kwargs)

    @functools.wraps(fn)
    def explain_call(*args, **kwargs):
        if config.disabled():
            return ExplainOutput(
                note="DYNVM_DISABLE is set: dynvm compiled nothing and did not run the call"
            )
        if wrappers.is_disabled(fn):
            return ExplainOutput(
                note="the function is marked with dynvm.disable: dynvm compiles nothing "
                "in it and did not run the call"
            )
        backends.require_vm("dynvm.explain")
        target = fn
        if wrappers.is_module(target):
            module_class = wrappers.compiled_module_class()
            target = target if isinstance(target, module_class) else module_class(
                target, wrappers.CompileOptions("eager", "default", False, None))
            target = target._compiled_call
        elif not isinstance(target, wrappers.CompiledFunction):
            target = wrappers.CompiledFunction(
                target, wrappers.CompileOptions("eager", "default", False, None))
        return ExplainOutput.from_native(target.explain_call(args, kwargs))

    return explain_call


def reset():
    """Forgets everything compiled so far: caches and the counters of the run report."""
    stats.clear()
    _native.core().reset()


def vm_available():
    """True when this build traces bytecode (the VM is wired into the package)."""
    return getattr(_native.core(), "has_vm", False) is True


class _Counters:
    """dynvm.counters: a read-only mapping of the process-wide compilation counters."""

    def _values(self):
        return _native.core().counters()

    def __getitem__(self, key):
        return self._values()[key]

    def __iter__(self):
        return iter(self._values())

    def __len__(self):
        return len(self._values())

    def keys(self):
        return self._values().keys()

    def items(self):
        return self._values().items()

    def get(self, key, default=None):
        return self._values().get(key, default)

    def __repr__(self):
        return f"dynvm.counters({self._values()!r})"


counters = _Counters()


def disable(fn=None):
    """Marks `fn` so that dynvm never compiles it; it always runs in plain Python.

    Use it as a call or as a decorator (`@dynvm.disable` or `@dynvm.disable()`). A
    function comes back as a wrapper; an nn.Module is marked and comes back as itself.
    """
    if fn is None:
        return disable
    _check_callable(fn, "dynvm.disable")
    if wrappers.is_module(fn):
        fn._dynvm_disabled = True
        return fn
    if wrappers.is_disabled(fn):
        return fn
    return wrappers.disabled_function(fn)
