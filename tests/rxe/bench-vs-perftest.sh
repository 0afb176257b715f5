#!/usr/bin/env bash
# bench-vs-perftest.sh BUILD_DIR — inside the soft-RoCE VM (run-in-vm.sh):
# weft's verbs put and fetch-add latency next to perftest's ib_write_lat and
# ib_atomic_lat, measured in the same boot on the same device and GID.
# Under TCG latencies are emulation artefacts; only the ratios mean
# something, and nothing here asserts on time.
#
# Conventions (as perftest prints them): ib_write_lat is an 8-byte write
# ping-pong reported as HALF a round trip; weft's put_pingpong counters are
# halved the same way. ib_atomic_lat is one blocking fetch-add, a FULL
# round trip; so is weft's fadd_latency.
set -euo pipefail
B=$(cd "${1:-.}" && pwd)
DEV=${WEFT_VERBS_DEVICE:-rxe0}
GID=$(("$B"/tools/weft-info | sed -n 's/.*weft uses gid\[\([0-9]*\)\].*/\1/p' | head -n1) || true)
GID=${GID:-1}
ITERS=${PERFTEST_ITERS:-5000}
OUT=$(mktemp -d)

perftest_pair() {  # tool args... -> prints the client's result line
  local tool=$1
  shift
  "$tool" -d "$DEV" -x "$GID" -n "$ITERS" -F "$@" >"$OUT/$tool.server" 2>&1 &
  local spid=$!
  sleep 1
  timeout 120 "$tool" -d "$DEV" -x "$GID" -n "$ITERS" -F "$@" localhost >"$OUT/$tool.client" 2>&1
  wait "$spid" || true
  # The result row: bytes, iterations, t_min, t_max, t_typical, t_avg, ...
  awk '$1 ~ /^[0-9]+$/ && NF >= 6 {print; exit}' "$OUT/$tool.client"
}
# perftest converts cycles to time with the CPU frequency it reads; under
# TCG a run now and then comes out as inf/nan. Such a run is repeated.
perftest() {
  local r i
  for i in 1 2 3; do
    r=$(perftest_pair "$@")
    if [ -n "$r" ] && ! grep -qiE 'inf|nan' <<<"$r"; then echo "$r"; return; fi
  done
  echo "$r"
}

echo "=== perftest (device $DEV, gid $GID, $ITERS iterations)"
W=$(perftest ib_write_lat -s 8 -p 18515)
A=$(perftest ib_atomic_lat -A FETCH_AND_ADD -p 18516)
[ -n "$W" ] || { cat "$OUT/ib_write_lat.client"; echo "ib_write_lat failed"; exit 1; }
[ -n "$A" ] || { cat "$OUT/ib_atomic_lat.client"; echo "ib_atomic_lat failed"; exit 1; }
echo "ib_write_lat  (half round trip): $W"
echo "ib_atomic_lat (full round trip): $A"

echo "=== weft verbs (weft_bench under weft-run -n 2)"
WEFT_TRANSPORT=verbs timeout 300 "$B"/tools/weft-run --timeout 280 --transport verbs -n 2 \
  "$B"/bench/weft_bench --benchmark_filter='^verbs/(put_pingpong|fadd_latency)/' \
  --benchmark_min_time=2 --benchmark_out="$OUT/weft.json" --benchmark_out_format=json >"$OUT/weft.txt" 2>&1 ||
  { cat "$OUT/weft.txt"; exit 1; }

cat "$OUT/weft.txt"
python3 - "$OUT/weft.json" "$W" "$A" <<'PY'
import json, sys
bench = {b["name"].split("/real_time")[0]: b for b in json.load(open(sys.argv[1]))["benchmarks"]}
w = sys.argv[2].split(); a = sys.argv[3].split()
# perftest columns: bytes iters t_min t_max t_typical t_avg ...
pw_typ, pw_avg = float(w[4]) * 1000, float(w[5]) * 1000
pa_typ, pa_avg = float(a[4]) * 1000, float(a[5]) * 1000
put = bench["verbs/put_pingpong"]; fadd = bench["verbs/fadd_latency"]
rows = [
    ("put 8 B, half round trip", put["p50_ns"], put["mean_ns"], "ib_write_lat -s 8", pw_typ, pw_avg),
    ("fetch-add, full round trip", fadd["p50_ns"], fadd["mean_ns"], "ib_atomic_lat -A FETCH_AND_ADD", pa_typ, pa_avg),
]
print("| operation | weft p50 ns | weft mean ns | perftest | typical ns | avg ns | ratio p50/typical | ratio mean/avg |")
print("|---|---|---|---|---|---|---|---|")
for name, wp, wm, tool, pt, pa in rows:
    print(f"| {name} | {wp:.0f} | {wm:.0f} | {tool} | {pt:.0f} | {pa:.0f} | {wp/pt:.2f} | {wm/pa:.2f} |")
PY
rm -rf "$OUT"
