#!/usr/bin/env bash
# Python 3.13, which dynvm reads but whose bytecode its VM does not execute yet (no torch
# is installed for it either): builds the probe (-DDYNVM_PROBE_ONLY=ON: the frontend, the
# runtime's frame access and the _dynvm_probe module, no torch) in build-py313/ against
# pyenv's CPython 3.13, then runs under 3.13 the suites that need no torch:
# tests/python/test_frame_access.py (a frame resumed mid-way, an exception raised into it,
# a callee seeing it) and tests/python/test_dis_parity.py (live code and .pyc against
# 3.13's dis). scripts/test.sh runs it; alone it needs only that CPython and pytest,
# which it installs into a small environment ($DYNVM_VENV313, default /opt/dynvm-venv-313).
# Prints "SKIPPED" and succeeds where there is no CPython 3.13 with its headers.
set -euo pipefail
cd "$(dirname "$0")/.."

find_python313() {
  local c candidates=()
  [ -n "${DYNVM_PYTHON313:-}" ] && candidates+=("$DYNVM_PYTHON313")
  if command -v pyenv >/dev/null 2>&1; then
    local root v
    root=$(pyenv root)
    while read -r v; do
      candidates+=("$root/versions/$v/bin/python3.13")
    done < <(ls "$root/versions" 2>/dev/null | grep -E '^3\.13\.[0-9]+$' | sort -t. -k3 -n -r)
  fi
  candidates+=(python3.13)
  for c in "${candidates[@]}"; do
    c=$(command -v "$c" 2>/dev/null) || continue
    if "$c" - <<'PY' >/dev/null 2>&1; then
import os, sys, sysconfig
assert sys.version_info[:2] == (3, 13)
inc = sysconfig.get_paths()["include"]
assert os.path.isfile(os.path.join(inc, "internal", "pycore_frame.h"))
PY
      echo "$c"
      return 0
    fi
  done
  return 1
}

PYTHON313=$(find_python313) || {
  echo "test-python313: SKIPPED: no CPython 3.13 with its headers (pyenv install 3.13, or set DYNVM_PYTHON313)"
  exit 0
}
VENV=${DYNVM_VENV313:-/opt/dynvm-venv-313}
PYTEST_PIN=$(grep -E '^pytest==' scripts/venv-requirements.txt)
if ! "$VENV/bin/python3" -c "import pytest" >/dev/null 2>&1; then
  "$PYTHON313" -m venv "$VENV"
  "$VENV/bin/python3" -m pip install -q "$PYTEST_PIN" 2>&1 |
    sed '/is ignored: it is neither a file nor a directory/d' >&2
fi

BUILD_DIR=${DYNVM_BUILD_DIR313:-build-py313}
cmake -S . -B "$BUILD_DIR" -G Ninja -DPython3_EXECUTABLE="$PYTHON313" -DDYNVM_PROBE_ONLY=ON \
  >"$BUILD_DIR.configure.log" 2>&1 || { cat "$BUILD_DIR.configure.log"; exit 1; }
cmake --build "$BUILD_DIR"
echo "test-python313: $("$PYTHON313" -c 'import sys; print(sys.version.split()[0])') ($PYTHON313)"
DYNVM_PROBE_ONLY=1 PYTHONPATH="$PWD/$BUILD_DIR/python" "$VENV/bin/python3" -m pytest -q \
  -p no:cacheprovider tests/python/test_frame_access.py tests/python/test_dis_parity.py
