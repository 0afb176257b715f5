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
# WEFT_BENCH_ROUNDS (default 1) rounds, WEFT_PERFTEST_ITERS (5000) perftest iterations:
#   WEFT_BENCH_ROUNDS=3 bash tests/rxe/run-in-vm.sh build tests/rxe/bench-vs-perftest.sh .
set -euo pipefail
B=$(cd "${1:-.}" && pwd)
DEV=${WEFT_VERBS_DEVICE:-rxe0}
GID=$(("$B"/tools/weft-info | sed -n 's/.*weft uses gid\[\([0-9]*\)\].*/\1/p' | head -n1) || true)
GID=${GID:-1}
ITERS=${WEFT_PERFTEST_ITERS:-5000}
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

ROUNDS=${WEFT_BENCH_ROUNDS:-1}
# Rounds alternate perftest and weft, so a burst of host load (TCG shares
# the host's cores) hits both sides of a ratio alike; the summary takes the
# median over rounds.
for r in $(seq "$ROUNDS"); do
  echo "=== round $r/$ROUNDS: perftest (device $DEV, gid $GID, $ITERS iterations)"
  W=$(perftest ib_write_lat -s 8 -p 18515)
  A=$(perftest ib_atomic_lat -A FETCH_AND_ADD -p 18516)
  [ -n "$W" ] || { cat "$OUT/ib_write_lat.client"; echo "ib_write_lat failed"; exit 1; }
  [ -n "$A" ] || { cat "$OUT/ib_atomic_lat.client"; echo "ib_atomic_lat failed"; exit 1; }
  echo "ib_write_lat  (half round trip): $W"
  echo "ib_atomic_lat (full round trip): $A"
  echo "$W" >"$OUT/write.$r"
  echo "$A" >"$OUT/atomic.$r"
  echo "=== round $r/$ROUNDS: weft verbs (weft_bench under weft-run -n 2)"
  WEFT_TRANSPORT=verbs timeout 300 "$B"/tools/weft-run --timeout 280 --transport verbs -n 2 \
    "$B"/bench/weft_bench --benchmark_filter='^verbs/(put_pingpong|fadd_latency)/' \
    --benchmark_min_time=2 --benchmark_out="$OUT/weft.$r.json" --benchmark_out_format=json >"$OUT/weft.txt" 2>&1 ||
    { cat "$OUT/weft.txt"; exit 1; }
  grep -E '^verbs/' "$OUT/weft.txt" || true
done

python3 - "$OUT" "$ROUNDS" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
rows = {"put": [], "fadd": []}
for r in range(1, rounds + 1):
    bench = {b["name"].split("/real_time")[0]: b for b in json.load(open(f"{out}/weft.{r}.json"))["benchmarks"]}
    # perftest columns: bytes iters t_min t_max t_typical t_avg ...
    w = open(f"{out}/write.{r}").read().split()
    a = open(f"{out}/atomic.{r}").read().split()
    put, fadd = bench["verbs/put_pingpong"], bench["verbs/fadd_latency"]
    rows["put"].append((put["p50_ns"], put["mean_ns"], float(w[4]) * 1000, float(w[5]) * 1000))
    rows["fadd"].append((fadd["p50_ns"], fadd["mean_ns"], float(a[4]) * 1000, float(a[5]) * 1000))
names = {"put": ("put 8 B, half round trip", "ib_write_lat -s 8"),
         "fadd": ("fetch-add, full round trip", "ib_atomic_lat -A FETCH_AND_ADD")}
print("| operation | round | weft p50 ns | weft mean ns | perftest | typical ns | avg ns | p50/typical | mean/avg |")
print("|---|---|---|---|---|---|---|---|---|")
for k, (name, tool) in names.items():
    for i, (wp, wm, pt, pa) in enumerate(rows[k], 1):
        print(f"| {name} | {i} | {wp:.0f} | {wm:.0f} | {tool} | {pt:.0f} | {pa:.0f} | {wp/pt:.2f} | {wm/pa:.2f} |")
for k, (name, tool) in names.items():
    med_typ = statistics.median(wp / pt for wp, wm, pt, pa in rows[k])
    med_avg = statistics.median(wm / pa for wp, wm, pt, pa in rows[k])
    print(f"RATIO {name} vs {tool}: median p50/typical {med_typ:.2f}, median mean/avg {med_avg:.2f} over {rounds} round(s)")
PY
rm -rf "$OUT"
