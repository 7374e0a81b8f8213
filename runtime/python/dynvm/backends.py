"""What each backend needs from the native core, and the error when this build lacks it."""

from dynvm import _native, _version

# The layers each backend needs, in pipeline order.
_NEEDS = {
    "eager": ("vm",),
    "dynvm": ("vm", "codegen"),
}

_DESCRIPTIONS = {
    "vm": "the bytecode VM (vm/)",
    "codegen": "code generation (codegen/)",
}


# The layers this build wires into dynvm._C, known without loading it (the report at the
# end of `dynvm run` must not import torch).
_BUILT = {"vm": True, "codegen": _version.HAS_CODEGEN}


def _has(piece, load=True):
    # dynvm._C exports has_<piece> = True once that layer is wired into the package.
    if not load:
        return _BUILT.get(piece, False)
    return getattr(_native.core(), f"has_{piece}", False) is True


def missing_pieces(backend, load=True):
    """The descriptions of the layers `backend` needs that this build lacks."""
    return [_DESCRIPTIONS[piece] for piece in _NEEDS[backend] if not _has(piece, load)]


def unavailable_reason(backend, load=True):
    """Why `backend` cannot compile in this build, or None when it can."""
    missing = missing_pieces(backend, load)
    if not missing:
        return None
    return (
        f"backend {backend!r} needs {' and '.join(missing)}, "
        "which this build does not have yet"
    )


def check_available(backend):
    """Raises NotImplementedError naming what `backend` needs and this build lacks:
    dynvm never runs a compiled function eagerly while pretending to have compiled it."""
    reason = unavailable_reason(backend)
    if reason is not None:
        raise NotImplementedError(f"dynvm: {reason}")


def require_vm(what):
    """Raises NotImplementedError unless this build can trace bytecode."""
    if not _has("vm"):
        raise NotImplementedError(
            f"dynvm: {what} needs {_DESCRIPTIONS['vm']}, which this build does not have yet"
        )
