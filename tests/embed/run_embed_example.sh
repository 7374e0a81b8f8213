#!/usr/bin/env bash
# Installs the dev component of a dynvm build into a scratch prefix, builds
# examples/embed against it with find_package(dynvm), runs it and checks its output.
# Usage: run_embed_example.sh <dynvm build dir> <source dir> <python executable>
set -euo pipefail
build=$1 src=$2 python=$3
work="$build/embed-test"
rm -rf "$work"
cmake --install "$build" --prefix "$work/prefix" --component dev >/dev/null
cmake -S "$src/examples/embed" -B "$work/build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DPython3_EXECUTABLE="$python" >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
out=$("$work/build/embed_example")
echo "$out"
grep -q "^dynvm [0-9]\+\.[0-9]\+\.[0-9]\+$" <<<"$out"
grep -q "^embedded Python 3\.1[12]" <<<"$out"
