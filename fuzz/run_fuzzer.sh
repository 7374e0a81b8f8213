#!/usr/bin/env bash
# Runs one libFuzzer target for a fixed time from a fresh seed corpus, as a CTest test:
# any crash, sanitizer report, leak, timeout or out-of-memory fails it.
#   fuzz/run_fuzzer.sh FUZZER WORK_DIR SECONDS [PYTHON]
set -euo pipefail
fuzzer=$1 work=$2 seconds=$3 python=${4:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
"$here/make_seed_corpus.sh" "$work/corpus" "$python" >/dev/null
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
  -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" 2>"$work/log" || {
  tail -n 60 "$work/log"
  exit 1
}
grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$work/log" || true
