"""Opcode coverage dumps: with DYNVM_OPCODE_COVERAGE=DIR in the environment, every process
that loads dynvm's native core writes, when it exits, what its VM did with each opcode
(dynvm._C.opcode_coverage()) to DIR/opcodes-<pid>.json. scripts/coverage.py runs test
suites and the fuzzers with it set and merges the dumps into the per-opcode report."""

import atexit
import json
import os
import sys

ENVIRONMENT_VARIABLE = "DYNVM_OPCODE_COVERAGE"


def install_if_requested(core):
    """Registers the exit-time dump when the environment asks for one."""
    directory = os.environ.get(ENVIRONMENT_VARIABLE, "").strip()
    if directory:
        atexit.register(write, core, directory)


def write(core, directory):
    """Writes this process's counts to `directory`/opcodes-<pid>.json."""
    os.makedirs(directory, exist_ok=True)
    record = {
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "opcodes": core.opcode_coverage(),
    }
    path = os.path.join(directory, f"opcodes-{os.getpid()}.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(record, f)
    os.replace(path + ".tmp", path)
