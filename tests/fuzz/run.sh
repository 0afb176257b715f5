#!/usr/bin/env bash
# run.sh BUILD_DIR SECONDS — run every fuzzer for SECONDS from the checked-in
# seeds; fails if any finds a crash (the reproducer is left in the work dir).
set -euo pipefail
build=$(cd "$1" && pwd)
seconds=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
status=0
for f in fuzz_bootstrap_wire fuzz_am_ring fuzz_ckpt_image; do
  mkdir -p "$work/$f"
  cp -r "$here/corpus/$f/." "$work/$f/" 2>/dev/null || true
  echo "fuzzing $f for ${seconds}s"
  if ! (cd "$work" && "$build/tests/fuzz/$f" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 \
          -print_final_stats=1 "$work/$f" >"$work/$f.log" 2>&1); then
    echo "FAILED: $f found a crash; see $work/$f.log"; tail -40 "$work/$f.log"; status=1
  else
    grep -E "stat::number_of_executed_units|Done" "$work/$f.log" | tail -2
  fi
done
[ $status = 0 ] && rm -rf "$work"
exit $status
