#!/usr/bin/env bash
# Installs what dynvm needs to build and test on Debian 12: Debian packages through
# apt-get, then the Python environment with torch through scripts/setup-venv.sh.
# Idempotent: when everything is present it only checks and returns (a second or two).
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  # toolchain
  g++ cmake ninja-build ccache git clang-format clang-16 libclang-rt-16-dev
  # CPython 3.11 with headers and venv: the base of the Python environment where no
  # pyenv 3.11 is found (torch and the Python packages come from scripts/setup-venv.sh)
  python3 python3-dev python3-venv
  # LLVM 16 for the CPU backend (ORC JIT): see docs/dependencies.md
  llvm-16-dev
  # graph analyses and unit tests
  libboost-graph-dev catch2
  # Graphviz `dot` for drawing graphs as SVG
  graphviz
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
else
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
  fi
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
  echo "install-deps: done"
  if [ -d /usr/local/cuda ]; then
    echo "install-deps: CUDA toolkit found at /usr/local/cuda (the GPU backend is built)"
  else
    echo "install-deps: no CUDA toolkit at /usr/local/cuda: the GPU backend is off"
  fi
fi

# torch 2.14.1 and the rest of the Python side, in a virtual environment outside the clone.
scripts/setup-venv.sh >/dev/null
