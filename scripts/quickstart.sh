#!/usr/bin/env bash
# The README's first command: install dependencies (Debian packages and the Python
# environment with torch), build and install dynvm, and run the example model through
# `dynvm run`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
dynvm run examples/quickstart.py
