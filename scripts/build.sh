#!/usr/bin/env bash
# Configures and builds dynvm in build/ (RelWithDebInfo), then installs it into
# /usr/local: the `dynvm` command, the Python package for /usr/bin/python3, and
# libdynvm.a with its CMake package.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${DYNVM_BUILD_DIR:-build}
PREFIX=${DYNVM_PREFIX:-/usr/local}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_INSTALL_PREFIX="$PREFIX" >"$BUILD_DIR.configure.log" 2>&1 ||
  { cat "$BUILD_DIR.configure.log"; exit 1; }
grep -E "^-- (dynvm|  )" "$BUILD_DIR.configure.log" || true
cmake --build "$BUILD_DIR"
SUDO=""
if [ "$(id -u)" -ne 0 ] && [ ! -w "$PREFIX" ]; then
  SUDO="sudo"
fi
$SUDO cmake --install "$BUILD_DIR" >/dev/null
echo "build: installed into $PREFIX ($(command -v dynvm || echo "$PREFIX/bin/dynvm"))"
