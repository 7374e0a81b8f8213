"""dynvm: compiles PyTorch programs from their Python bytecode.

The API is shaped like torch.compile: dynvm.compile, dynvm.explain, dynvm.reset and
dynvm.disable. Importing dynvm does not import torch.
"""

from dynvm._version import __version__
from dynvm import config as _config
from dynvm.errors import GraphBreakError
from dynvm.api import (compile, counters, disable, explain, mark_dynamic, mark_static, reset,
                       vm_available)
from dynvm.explain_output import BreakReason, ExplainOutput

__all__ = [
    "BreakReason",
    "GraphBreakError",
    "counters",
    "vm_available",
    "ExplainOutput",
    "__version__",
    "compile",
    "disable",
    "explain",
    "mark_dynamic",
    "mark_static",
    "reset",
]

# A typo in DYNVM_LOGS or DYNVM_DISABLE fails here, at import, not silently later.
_config.enabled_logs()
_config.disabled()
