"""Loads dynvm._C, the native core, on first use and after torch.

The core links libtorch and torch's Python bindings; torch must initialise them itself
before anything else loads them (the other order crashes torch 2.x at import), and
`import dynvm` stays light when nothing is compiled."""

_core = None


def core():
    """The dynvm._C extension module."""
    global _core
    if _core is None:
        import torch  # first: see the module docstring

        from dynvm import _version

        # libtorch's C++ interface changes between releases: _C runs only with the
        # torch it was built against (another one fails to load it, or worse).
        if _version.TORCH_VERSION and torch.__version__ != _version.TORCH_VERSION:
            raise ImportError(
                f"dynvm was built against torch {_version.TORCH_VERSION}, but this Python "
                f"has torch {torch.__version__}: build dynvm again for it "
                "(scripts/build.sh, or pip install --no-build-isolation .)")

        from dynvm import _C, _opcode_coverage

        _C.set_skip_prefixes(_skipped_directories(), installed_package_directories())
        _opcode_coverage.install_if_requested(_C)
        _core = _C
    return _core


def _skipped_directories():
    """Where the code lives that dynvm never compiles, not even below a compiled function:
    the standard library, torch and dynvm itself. Other installed packages (transformers,
    timm, ...) are compiled where a compiled function calls them: what a model calls is
    the model. (The standard library's directory may hold site-packages: the longest
    matching directory decides, see installed_package_directories.)"""
    import os
    import sysconfig

    import torch

    dirs = set()
    for key in ("stdlib", "platstdlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.add(path)
    dirs.add(os.path.dirname(torch.__file__))
    dirs.add(os.path.dirname(os.path.abspath(__file__)))
    return _as_prefixes(dirs)


def installed_package_directories():
    """Where installed packages live: `dynvm run` compiles the script's own frames, and
    leaves frames that start in these directories to CPython."""
    import site
    import sysconfig

    dirs = set()
    for key in ("purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.add(path)
    for path in site.getsitepackages() + [site.getusersitepackages()]:
        dirs.add(path)
    return _as_prefixes(dirs)


def _as_prefixes(dirs):
    """Each directory as a prefix of file names, resolved and as given."""
    import os

    return sorted(os.path.realpath(d) + os.sep for d in dirs if d) + sorted(
        os.path.abspath(d) + os.sep for d in dirs if d
    )


def loaded():
    """dynvm._C if it has been loaded already, else None (never loads it)."""
    return _core
