"""The objects dynvm.compile returns: a compiled function and a compiled nn.Module."""

import collections
import functools
import sys
import types

from dynvm import _native, backends, config


class CompileOptions(collections.namedtuple("CompileOptions", "backend mode fullgraph dynamic")):
    """The validated arguments of one dynvm.compile call (immutable): backend and mode
    (str), fullgraph (bool), dynamic (None, True or False). A named tuple rather than a
    dataclass: `dynvm run` imports this module, and dataclasses cost 30 ms of start-up."""

    __slots__ = ()


def is_module(obj):
    """True for a torch.nn.Module; never imports torch (a module implies torch is loaded)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.nn.Module)


class CompiledFunction:
    """A callable compiled by dynvm.compile; calling it runs its compiled variants.

    Once the native core is loaded, the class's __call__ is dynvm._C.wrapper_call, which
    calls the instance's native object (`_dynvm_native`) directly: no Python frame of
    dynvm's own, on the first call (which makes the native object through
    `_dynvm_make_native`) as on a cache hit. Until the core is loaded, calls go through
    `_dynvm_slow_call`; a compile made while torch is imported loads it."""

    # Traced code that calls this object is traced as calling _orig_fn (vm/calls.cpp).
    __dynvm_traced_target__ = "_orig_fn"

    def __init__(self, fn, options):
        self._orig_fn = fn
        self._options = options
        self._native = None
        self._bound_self = ()
        functools.update_wrapper(self, fn, updated=())
        if _native.loaded() is None and "torch" in sys.modules:
            try:
                _native.core()
            except ImportError:
                pass  # said again by the first call, which needs the core
        if _native.loaded() is not None:
            _use_native_call(CompiledFunction, _native.loaded())

    @property
    def options(self):
        return self._options

    def native(self):
        """The dynvm._C.CompiledFunction behind this callable, made on first use. It
        passes the bound object of a compiled method or callable object itself."""
        if self._native is None:
            backends.check_available(self._options.backend)
            target = self._orig_fn
            if isinstance(target, types.MethodType):
                self._bound_self = (target.__self__,)
                target = target.__func__
            if not isinstance(target, types.FunctionType):
                call = getattr(type(target), "__call__", None)
                if not isinstance(call, types.FunctionType):
                    raise TypeError(
                        f"dynvm.compile: cannot compile {target!r}: it is not a Python "
                        "function, a method or an object with a Python __call__"
                    )
                self._bound_self = (target,)
                target = call
            core = _native.core()
            self._native = core.CompiledFunction(
                target, self._options.backend, self._options.fullgraph,
                config.cache_size_limit(), self._options.mode,
                bound=self._bound_self[0] if self._bound_self else None,
                dynamic={None: -1, False: 0, True: 1}[self._options.dynamic],
            )
            self._dynvm_native = self._native
            _use_native_call(CompiledFunction, core)
        return self._native

    def _dynvm_slow_call(self, *args, **kwargs):
        return self.native()(*args, **kwargs)

    __call__ = _dynvm_slow_call
    # dynvm._C.wrapper_call makes the native object with this, then calls it itself.
    _dynvm_make_native = native

    def explain_call(self, args, kwargs):
        """What dynvm makes of one call: the native explain() dictionary."""
        return self.native().explain(args, kwargs or None)

    def __get__(self, instance, owner=None):
        # Lets @dynvm.compile decorate methods: binds like a plain function would.
        if instance is None:
            return self
        return types.MethodType(self, instance)

    def __repr__(self):
        return f"<dynvm compiled {self._orig_fn!r} backend={self._options.backend!r}>"


def _use_native_call(cls, core):
    """Makes dynvm._C.wrapper_call the __call__ of `cls` (once the core is loaded)."""
    if cls.__dict__.get("__call__") is not core.wrapper_call:
        cls.__call__ = core.wrapper_call


# Besides the hook dicts (the native core's list, which its NO_HOOKS guard reads), the
# attributes of a compiled module that must be absent, None or empty for its call to skip
# nn.Module.__call__: Module.compile()'s, and a forward set on the instance.
_MODULE_REROUTING_ATTRIBUTES = ("_compiled_call_impl", "forward")
_module_idle_attributes = None  # set with the class

_compiled_module_class = None


def compiled_module_class():
    """The nn.Module subclass wrapping compiled modules, made on first use (imports torch)."""
    global _compiled_module_class
    if _compiled_module_class is None:
        import torch
        import torch.nn.modules.module as module_module

        core = _native.core()
        module_globals = vars(module_module)
        # The hook dicts of a module and torch's global ones (Module._call_impl reads
        # both), as the native core's guards name them; names this torch lacks are skipped.
        module_hooks, global_hooks = core.hook_names()
        if "_global_forward_hooks" not in module_globals:
            raise ImportError(
                "dynvm: torch.nn.modules.module has no _global_forward_hooks; this torch's "
                "module hooks are not the ones dynvm knows")
        core.configure_wrapper_call(
            module_globals, tuple(n for n in global_hooks if n in module_globals),
            torch._C._get_tracing_state)
        global _module_idle_attributes
        _module_idle_attributes = module_hooks + _MODULE_REROUTING_ATTRIBUTES

        class CompiledModule(torch.nn.Module):
            """An nn.Module whose calls go through dynvm; attributes are the original's.

            The original module is the submodule `_orig_mod`, so parameters, train() and
            eval() reach it; attribute reads the wrapper does not have fall through to it.

            Calling it runs dynvm._C.wrapper_call: while the wrapper has no hooks of its own
            and torch has no global module hooks, the call goes straight to the native
            compiled function, skipping nn.Module.__call__ and this class's forward, which
            would do nothing else; otherwise through them, as any module's call.
            """

            __call__ = core.wrapper_call
            _dynvm_slow_call = torch.nn.Module.__call__
            # Traced code that calls this module is traced as calling _orig_mod.
            __dynvm_traced_target__ = "_orig_mod"

            def __init__(self, module, options):
                super().__init__()
                self._orig_mod = module
                self.__dict__["_dynvm_options"] = options
                if isinstance(module, torch.nn.parallel.DistributedDataParallel):
                    # DDP's own forward (its reducer's bookkeeping, buffer broadcasts)
                    # runs eagerly around the module it wraps, which is compiled.
                    self._compiled_call = DistributedCall(module, options)
                else:
                    # Calls the original module the way user code would, so its hooks
                    # and forward are what the VM traces (hooks make it break).
                    self._compiled_call = CompiledFunction(_module_caller(module), options)
                    self.__dict__["_dynvm_idle"] = _module_idle_attributes

            def forward(self, *args, **kwargs):
                call = self._compiled_call
                result = call(*args, **kwargs)
                native = getattr(call, "_native", None)
                if native is not None and "_dynvm_idle" in self.__dict__:
                    # From now on wrapper_call calls the native object directly.
                    self.__dict__["_dynvm_native"] = native
                return result

            def __reduce__(self):
                # A copy or an unpickled wrapper compiles its copy of the original module
                # afresh (copy.deepcopy, pickle, torch.save); native objects are not copied.
                return (_compile_module_again, (self._orig_mod, self.__dict__["_dynvm_options"]))

            def __getattr__(self, name):
                # Reached only when normal lookup failed. Reads __dict__ directly so a
                # half-built instance (copy, pickle) raises instead of recursing.
                modules = self.__dict__.get("_modules")
                if modules is None or "_orig_mod" not in modules:
                    raise AttributeError(name)
                original = modules["_orig_mod"]
                if name == "_orig_mod":
                    return original
                return getattr(original, name)

        _compiled_module_class = CompiledModule
    return _compiled_module_class


def _compile_module_again(module, options):
    """The compiled module a copy or pickle of one rebuilds: `module` wrapped afresh."""
    return compiled_module_class()(module, options)


class DistributedCall:
    """A DistributedDataParallel module called with the module it wraps compiled.

    DDP's forward prepares its reducer (which parameters to expect gradients for), may
    broadcast buffers and wraps the outputs; that runs eagerly on every call, as under
    torch.compile. Only the wrapped module's forward is compiled: for the duration of the
    call it is the module's `forward` (an instance attribute, which Module.__call__ reads),
    so the module's hooks still run around it. The gradients the compiled backward gives
    the parameters reach DDP's autograd hooks, which all-reduce them as in eager."""

    def __init__(self, ddp, options):
        self._ddp = ddp
        inner = ddp.module
        self._forward = CompiledFunction(inner.forward, options)

    def _swapped_in(self):
        inner = self._ddp.module
        saved = inner.__dict__.get("forward", _MISSING)
        inner.__dict__["forward"] = self._forward
        return inner, saved

    @staticmethod
    def _restore(inner, saved):
        if saved is _MISSING:
            inner.__dict__.pop("forward", None)
        else:
            inner.__dict__["forward"] = saved

    def __call__(self, *args, **kwargs):
        inner, saved = self._swapped_in()
        try:
            return self._ddp(*args, **kwargs)
        finally:
            self._restore(inner, saved)

    def explain_call(self, args, kwargs):
        """What dynvm makes of the wrapped module's forward for these arguments (DDP's
        scatter of the inputs is the identity on one device per process)."""
        return self._forward.explain_call(args, kwargs)


_MISSING = object()


def _module_caller(module):
    """A function calling `module`, for the VM to trace: module(*args, **kwargs).

    Each gets a code object of its own: compiled variants are cached per code object, and
    one shared by every compiled module would hold all their variants under one
    cache_size_limit (the ninth module compiled ran eagerly). Its name is the module's
    class, as logs and reports show it."""

    def call_module(*args, **kwargs):
        return module(*args, **kwargs)

    name = type(module).__qualname__ + ".__call__"
    call_module.__code__ = call_module.__code__.replace(co_qualname=name)
    call_module.__qualname__ = name
    return call_module


def disabled_function(fn):
    """A wrapper of `fn` that dynvm never compiles and that always runs `fn` plainly."""

    @functools.wraps(fn)
    def run_plainly(*args, **kwargs):
        return fn(*args, **kwargs)

    run_plainly._dynvm_disabled = True
    return run_plainly


def is_disabled(obj):
    """True for what dynvm.disable returned (or marked)."""
    return getattr(obj, "_dynvm_disabled", False) is True
