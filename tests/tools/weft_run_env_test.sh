#!/usr/bin/env bash
# weft_run_env_test.sh SOURCE_DIR WEFT_RUN WEFT_INFO — what weft-run sets
# for its ranks wins over the same variables in its own environment (getenv
# takes the first of two entries): --transport over an inherited
# WEFT_TRANSPORT, and the rank identity over a launcher's around weft-run
# (weft-run run inside a job).
set -u
src=$1 run=$2 info=$3
. "$src/tests/mp/check.sh"
out=$(mktemp)
trap 'rm -f "$out"' EXIT

WEFT_TRANSPORT=ucx timeout 60 "$run" --timeout 50 --transport shm -n 2 "$info" --job >"$out" 2>&1
check "--transport shm beats WEFT_TRANSPORT=ucx (exit 0)" 0 $?
check "--transport shm beats WEFT_TRANSPORT=ucx" 1 "$(grep -c '^job: 2 rank(s) on 1 host(s), transport shm$' "$out")"
WEFT_JOB=3 WEFT_RANK=7 WEFT_SIZE=9 WEFT_JOB_SIZES=9,9,9,9 timeout 60 "$run" --timeout 50 -n 2 "$info" --job >"$out" 2>&1
check "an outer job's identity is not inherited (exit 0)" 0 $?
check "an outer job's identity is not inherited" 1 "$(grep -c '^job: 2 rank(s) on 1 host(s), ' "$out")"
[ $fail = 0 ] || cat "$out"
if [ $fail = 0 ]; then echo "weft-run env tests: all passed"; fi
exit $fail
