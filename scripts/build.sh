#!/usr/bin/env bash
# Configures and builds dynvm in build/ (RelWithDebInfo) against the torch of the Python
# environment scripts/setup-venv.sh makes, then installs it: the Python package and the
# `dynvm` command into that environment (`pip install .`, driving this same build tree),
# `dynvm` on PATH as a link in <prefix>/bin, and libdynvm.a with its CMake package into
# <prefix> (/usr/local).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${DYNVM_BUILD_DIR:-build}
PREFIX=${DYNVM_PREFIX:-/usr/local}
PYTHON=$(scripts/setup-venv.sh)
VENV_BIN=$(dirname "$PYTHON")

# -U: a configure by `pip install` (below) left scikit-build-core's settings in the
# cache; a plain configure is not a wheel build.
cmake -S . -B "$BUILD_DIR" -G Ninja -U 'SKBUILD*' -DPython3_EXECUTABLE="$PYTHON" \
  -DCMAKE_INSTALL_PREFIX="$PREFIX" >"$BUILD_DIR.configure.log" 2>&1 ||
  { cat "$BUILD_DIR.configure.log"; exit 1; }
grep -E "^-- (dynvm|  )" "$BUILD_DIR.configure.log" || true
cmake --build "$BUILD_DIR"

# The Python package and the executable, as a wheel of this build tree (nothing is
# compiled again), installed into the environment.
"$PYTHON" -m pip install --no-build-isolation --no-deps --no-index -q \
  -C build-dir="$BUILD_DIR" -C cmake.define.DYNVM_BUILD_TESTS=ON . >"$BUILD_DIR.pip.log" 2>&1 ||
  { cat "$BUILD_DIR.pip.log"; exit 1; }

SUDO=""
if [ "$(id -u)" -ne 0 ] && [ ! -w "$PREFIX" ]; then
  SUDO="sudo"
fi
$SUDO cmake --install "$BUILD_DIR" --component dev --prefix "$PREFIX" >/dev/null
$SUDO mkdir -p "$PREFIX/bin"
$SUDO ln -sfn "$VENV_BIN/dynvm" "$PREFIX/bin/dynvm"
echo "build: installed into $(dirname "$VENV_BIN") (dynvm, Python package) and $PREFIX" \
  "($PREFIX/bin/dynvm -> $VENV_BIN/dynvm)"
