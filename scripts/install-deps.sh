#!/usr/bin/env bash
# Installs what dynvm needs to build and test on Debian 12, through apt-get. Idempotent:
# when everything is present it only checks and returns (a second or two).
set -euo pipefail

PACKAGES=(
  # toolchain
  g++ cmake ninja-build ccache git clang-format clang-16 libclang-rt-16-dev
  # CPython 3.11 (the interpreter that has torch) and its headers
  python3 python3-dev python3-pytest python3-numpy
  # PyTorch: the Python package and libtorch for C++
  python3-torch python3-torchvision libtorch-dev
  # LLVM 16 for the CPU backend (ORC JIT): see docs/dependencies.md
  llvm-16-dev
  # graph analyses and unit tests
  libboost-graph-dev catch2
  # pybind11 headers: torch's python_variable.h (THPVariable_Wrap/Unpack) includes them
  pybind11-dev
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
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" \
  >/dev/null
echo "install-deps: done"
if [ -d /usr/local/cuda ]; then
  echo "install-deps: CUDA toolkit found at /usr/local/cuda (the GPU backend is built)"
else
  echo "install-deps: no CUDA toolkit at /usr/local/cuda: the GPU backend is off"
fi
