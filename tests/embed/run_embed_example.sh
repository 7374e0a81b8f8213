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
# The embedded interpreter finds the dynvm package of this build, and torch where the
# build's Python has it (a venv's site-packages too).
site=$("$python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
out=$(PYTHONPATH="$build/python:$site${PYTHONPATH:+:$PYTHONPATH}" "$work/build/embed_example")
echo "$out"
grep -q "^embedded Python 3\.1[12].*, dynvm [0-9]\+\.[0-9]\+\.[0-9]\+$" <<<"$out"
grep -q "aten::mm" <<<"$out"                      # the live function's graph
grep -q "aten::relu" <<<"$out"
grep -q "TENSOR_MATCH L\['x'\]: torch.Tensor float32 cpu \[2, 3\]" <<<"$out"
grep -q "aten::mul.Tensor(%x, 3)" <<<"$out"       # the marshal function, k = 3 baked in
grep -q "CONSTANT_MATCH L\['k'\] == 3" <<<"$out"
! grep -q "not captured" <<<"$out"
