#!/usr/bin/env bash
# Makes the Python environment dynvm builds against and runs in: a virtual environment
# of CPython 3.11 with torch 2.14.1 and the packages of scripts/venv-requirements.txt,
# at $DYNVM_VENV (default /opt/dynvm-venv), once per machine and outside the clone.
# Idempotent: when the environment is there with the listed versions it only checks
# (well under a second). Prints the environment's python as its last line.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${DYNVM_VENV:-/opt/dynvm-venv}
REQUIREMENTS=scripts/venv-requirements.txt
STAMP="$VENV/dynvm-requirements.sha256"
want=$(sha256sum <"$REQUIREMENTS" | cut -d' ' -f1)

say() { echo "setup-venv: $*" >&2; }

# The environment is ready when its interpreter runs, has torch, and was filled from
# this very requirements file.
ready() {
  [ -x "$VENV/bin/python3" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] &&
    "$VENV/bin/python3" -c "from importlib.metadata import version; version('torch')" \
      >/dev/null 2>&1
}

if ready; then
  say "$VENV is ready ($("$VENV/bin/python3" -c "import sys; from importlib.metadata import version as v; print(f'Python {sys.version.split()[0]}, torch {v(\"torch\")}')"))"
  echo "$VENV/bin/python3"
  exit 0
fi

# A CPython 3.11 that can make a venv and has the headers dynvm compiles against
# (including the internal ones, for the frame hook). $DYNVM_PYTHON wins; then pyenv's
# newest 3.11; then python3.11 on PATH (Debian's, with python3-dev and python3-venv).
usable_python() {
  "$1" - <<'PY' >/dev/null 2>&1
import os, sys, sysconfig, venv, ensurepip
assert sys.version_info[:2] in ((3, 11), (3, 12))
inc = sysconfig.get_paths()["include"]
assert os.path.isfile(os.path.join(inc, "Python.h"))
assert os.path.isfile(os.path.join(inc, "internal", "pycore_frame.h"))
PY
}

find_python() {
  local candidates=()
  if [ -n "${DYNVM_PYTHON:-}" ]; then
    candidates+=("$DYNVM_PYTHON")
  else
    local root=${PYENV_ROOT:-$HOME/.pyenv}
    if command -v pyenv >/dev/null 2>&1; then root=$(pyenv root); fi
    local v
    while read -r v; do
      candidates+=("$root/versions/$v/bin/python3.11")
    done < <(ls "$root/versions" 2>/dev/null | grep -E '^3\.11\.[0-9]+$' | sort -t. -k3 -n -r)
    candidates+=(python3.11 /usr/bin/python3.11)
  fi
  local c
  for c in "${candidates[@]}"; do
    c=$(command -v "$c" 2>/dev/null) || continue
    # A pyenv shim is a script: ask it for the interpreter it runs.
    c=$("$c" -c "import sys; print(sys.executable)" 2>/dev/null) || continue
    if usable_python "$c"; then
      echo "$c"
      return 0
    fi
  done
  return 1
}

SUDO=""
parent=$(dirname "$VENV")
if [ "$(id -u)" -ne 0 ] && { [ -e "$VENV" ] && [ ! -w "$VENV" ] || [ ! -e "$VENV" ] && [ ! -w "$parent" ]; }; then
  sudo mkdir -p "$VENV"
  sudo chown "$(id -u):$(id -g)" "$VENV"
fi
mkdir -p "$parent"

# One set-up at a time (quickstart.sh and test.sh may start together).
exec 9>"$VENV.lock"
flock 9
if ready; then
  echo "$VENV/bin/python3"
  exit 0
fi

start=$SECONDS
# A venv whose base interpreter has gone is made again.
if [ -e "$VENV/pyvenv.cfg" ] && ! "$VENV/bin/python3" -c "" >/dev/null 2>&1; then
  say "$VENV no longer runs: making it again"
  rm -rf "$VENV"
fi
if [ ! -x "$VENV/bin/python3" ]; then
  base=$(find_python) || {
    say "no usable CPython 3.11 (with headers and venv) found: install one (pyenv, or" \
        "Debian's python3-dev and python3-venv) or set DYNVM_PYTHON"
    exit 1
  }
  say "making $VENV from $base"
  "$base" -m venv "$VENV"
fi
say "installing scripts/venv-requirements.txt into $VENV (the first time, several minutes)"
# (pip's warnings about local index folders without a package are dropped.)
pip_quietly() {
  "$VENV/bin/python3" -m pip "$@" 2>&1 | sed '/is ignored: it is neither a file nor a directory/d' >&2
}
pip_quietly install -q -r "$REQUIREMENTS"
pip_quietly check || say "pip check reported conflicts (above)"
echo "$want" >"$STAMP"
say "done in $((SECONDS - start)) s"
echo "$VENV/bin/python3"
