#!/usr/bin/env bash
# Fails when a C/C++ file of the repository is not formatted by .clang-format.
set -euo pipefail
cd "$(dirname "$0")/.."
FORMAT=${CLANG_FORMAT:-clang-format}
if ! command -v "$FORMAT" >/dev/null; then
  echo "check_format: $FORMAT not found"; exit 1
fi
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files --cached --others --exclude-standard \
    '*.h' '*.cpp' '*.c' '*.inc' | grep -v '^tests/data/' || true)
else
  mapfile -t files < <(find frontend graph vm codegen runtime include tests fuzz examples bench \
    -name '*.h' -o -name '*.cpp' -o -name '*.c' 2>/dev/null | grep -v '^tests/data/')
fi
existing=()
for f in "${files[@]}"; do [ -f "$f" ] && existing+=("$f"); done
"$FORMAT" --dry-run --Werror "${existing[@]}"
echo "check_format: ${#existing[@]} files formatted"
