"""dynvm's settings: the valid backend, mode and log names, the DYNVM_* variables, and the
code-generation targets this build has (`targets()`)."""

import os

BACKENDS = ("eager", "dynvm")
MODES = ("default", "reduce-overhead", "max-autotune")
LOG_NAMES = ("graph", "guards", "breaks", "recompiles", "kernels", "loops", "glue", "perf",
             "cudagraphs")

DEFAULT_BACKEND = "dynvm"
DEFAULT_MODE = "default"

_TRUE_WORDS = ("1", "true", "yes", "on")
_FALSE_WORDS = ("", "0", "false", "no", "off")


def _quoted(names):
    return ", ".join(repr(name) for name in names)


def check_backend(backend):
    """Returns `backend` if it names a backend; raises otherwise."""
    if not isinstance(backend, str):
        raise TypeError(
            f"backend must be a backend name ({_quoted(BACKENDS)}), "
            f"got {type(backend).__name__}"
        )
    if backend not in BACKENDS:
        raise ValueError(
            f"unknown backend {backend!r}; valid backends: {_quoted(BACKENDS)}"
        )
    return backend


def check_mode(mode):
    """Returns the mode `mode` names (None means the default); raises otherwise."""
    if mode is None:
        return DEFAULT_MODE
    if not isinstance(mode, str):
        raise TypeError(
            f"mode must be a mode name ({_quoted(MODES)}), got {type(mode).__name__}"
        )
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; valid modes: {_quoted(MODES)}")
    return mode


def parse_disable(text):
    """Parses a DYNVM_DISABLE value: 1/true/yes/on or 0/false/no/off (or empty)."""
    word = text.strip().lower()
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    raise ValueError(
        f"DYNVM_DISABLE: cannot read {text!r} as a switch; "
        f"use one of {_quoted(_TRUE_WORDS)} or {_quoted(_FALSE_WORDS[1:])}"
    )


def parse_logs(text):
    """Parses a DYNVM_LOGS value, comma-separated log names, into a frozenset."""
    names = [name.strip() for name in text.split(",")]
    names = [name for name in names if name]
    unknown = [name for name in names if name not in LOG_NAMES]
    if unknown:
        raise ValueError(
            f"DYNVM_LOGS: unknown log name {unknown[0]!r}; "
            f"valid names: {', '.join(LOG_NAMES)}"
        )
    return frozenset(names)


def disabled(environ=None):
    """True when DYNVM_DISABLE turns dynvm off: compile() then returns its input."""
    environ = os.environ if environ is None else environ
    return parse_disable(environ.get("DYNVM_DISABLE", ""))


def enabled_logs(environ=None):
    """The log names DYNVM_LOGS turns on, as a frozenset."""
    environ = os.environ if environ is None else environ
    return parse_logs(environ.get("DYNVM_LOGS", ""))


def cache_size_limit():
    """Variants per part of a function before it runs eagerly for good (a recompile
    limit): DYNVM_CACHE_SIZE_LIMIT, a positive integer, 8 when unset."""
    text = os.environ.get("DYNVM_CACHE_SIZE_LIMIT", "").strip()
    if not text:
        return 8
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"DYNVM_CACHE_SIZE_LIMIT: expected a positive integer, got {text!r}")
    return value


FAKE_CACHE_MODES = ("on", "off", "verify")


def fake_cache_mode(environ=None):
    """DYNVM_FAKE_CACHE: "on" (default) answers repeated operators on fake tensors from
    dynvm's metadata cache while tracing, "off" sends every one to torch's fake mode, and
    "verify" answers from the cache and checks each answer against the fake mode (raising
    on a difference), for tests."""
    environ = os.environ if environ is None else environ
    text = environ.get("DYNVM_FAKE_CACHE", "").strip().lower() or "on"
    if text not in FAKE_CACHE_MODES:
        raise ValueError(f"DYNVM_FAKE_CACHE: expected one of {', '.join(FAKE_CACHE_MODES)}, "
                         f"got {text!r}")
    return text


def targets():
    """The code-generation targets, in a fixed order ("cpu", "cuda"): for each a dict with
    `name`, `built` (compiled into this build), `usable` (and what it needs at run time,
    such as a CUDA driver and GPU for "cuda", is on this machine), `toolchain` ("LLVM 16.0.6
    ORC JIT", "NVRTC 13.0") and `why_not` (why it is not built, or not usable here; empty
    when it is). Loads dynvm's native core."""
    from . import _native

    return _native.core().targets()
