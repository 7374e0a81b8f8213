#!/usr/bin/env bash
# The README's second command (and CI's): install dependencies, build and install
# dynvm, then run every test: first the C++ unit tests and fuzzers in a separate
# AddressSanitizer + UndefinedBehaviorSanitizer build (build-asan/), then the frontend
# and frame access under Python 3.13 (scripts/test-python313.sh), then the whole suite
# in build/ through CTest, whose summary ends the output.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
PYTHON=$(scripts/setup-venv.sh 2>/dev/null)

echo "== sanitizer build (ASan + UBSan, clang-16): C++ unit tests and fuzzers =="
# No Python package here, but libtorch still comes from the environment's torch.
CC=clang-16 CXX=clang++-16 cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DDYNVM_SANITIZE=ON -DDYNVM_BUILD_PYTHON=OFF -DDYNVM_BUILD_FUZZERS=ON \
  -DPython3_EXECUTABLE="$PYTHON" >build-asan.configure.log 2>&1 ||
  { cat build-asan.configure.log; exit 1; }
cmake --build build-asan
(cd build-asan && ctest --output-on-failure -j2)

echo "== Python 3.13: listings and frame access (build-py313/, no torch) =="
scripts/test-python313.sh

echo "== test suite (build/) =="
cd build
ctest --output-on-failure -j2
