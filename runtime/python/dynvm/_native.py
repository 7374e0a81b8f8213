"""Loads dynvm._C, the native core, on first use and after torch.

The core links libtorch and torch's Python bindings; torch must initialise them itself
before anything else loads them (the other order crashes torch 2.x at import), and
`import dynvm` stays light when nothing is compiled."""

_core = None


def core():
    """The dynvm._C extension module."""
    global _core
    if _core is None:
        import torch  # noqa: F401  (first: see the module docstring)

        from dynvm import _C

        _core = _C
    return _core


def loaded():
    """dynvm._C if it has been loaded already, else None (never loads it)."""
    return _core
