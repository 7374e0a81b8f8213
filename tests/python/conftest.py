"""Shared pytest setup of the Python suites: every test starts from a clean dynvm
(no compiled variants, counters at zero)."""

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
