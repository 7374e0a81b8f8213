#!/usr/bin/env bash
# Runs one libFuzzer target for a fixed time from a fresh seed corpus, as a CTest test:
# any crash, sanitizer report, leak, timeout or out-of-memory fails it.
#   fuzz/run_fuzzer.sh FUZZER WORK_DIR SECONDS [PYTHON]
set -euo pipefail
fuzzer=$1 work=$2 seconds=$3 python=${4:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
case $(basename "$fuzzer") in
  trace_fuzzer)
    # Code objects made from seed functions (PYTHON must have torch). The tracer runs in an
    # embedded CPython with torch, about 1.3 GB before the first input; what the interpreter
    # holds until exit is not a leak.
    "$python" "$here/trace_fuzz_seeds.py" "$work/corpus" >/dev/null
    options=(-rss_limit_mb=4096 -max_len=4096 -detect_leaks=0)
    ;;
  *)
    "$here/make_seed_corpus.sh" "$work/corpus" "$python" >/dev/null
    options=(-rss_limit_mb=2048 -max_len=65536)
    ;;
esac
"$fuzzer" -max_total_time="$seconds" -timeout=10 "${options[@]}" \
  -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" 2>"$work/log" || {
  tail -n 60 "$work/log"
  exit 1
}
grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$work/log" || true
