"""Shared pytest setup of the Python suites: every test starts from a clean dynvm
(no compiled variants, counters at zero)."""

import os
import subprocess
import sys

import pytest

try:
    import dynvm
except ImportError:  # the suites that need dynvm fail on their own import
    dynvm = None


@pytest.fixture(autouse=True)
def _reset_dynvm():
    """Calls dynvm.reset() before each test, where this build has it."""
    reset = getattr(dynvm, "reset", None)
    if reset is not None:
        reset()
    yield


def codegen_built():
    """This build has the CPU code generator behind backend "dynvm" (LLVM was found)."""
    from dynvm import _version

    return _version.HAS_CPU_CODEGEN


# For tests of backend "dynvm" itself: a build without LLVM (the GPU machine's) has none.
needs_codegen = pytest.mark.skipif(
    dynvm is None or not codegen_built(),
    reason="this build has no CPU code generator (LLVM was not found)",
)


def run_python(code, **env):
    """Runs `code` in a fresh interpreter (this one) with `env` added to the environment."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, **env), timeout=300)


def in_place_ops(fn):
    """The in-place ATen operators `fn()` calls itself (not those inside other operators,
    such as the index_put_ of a functional index_put), write-backs (copy_) left out: what
    shows that a traced optimizer update runs fused rather than operator by operator."""
    import torch

    activities = [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(activities=activities) as prof:
        fn()

    def called_by_an_operator(e):
        return e.cpu_parent is not None and e.cpu_parent.name.startswith("aten::")

    return {e.name for e in prof.events()
            if e.name.startswith("aten::") and e.name.endswith("_") and e.name != "aten::copy_"
            and not called_by_an_operator(e)}
