#!/usr/bin/env bash
# run_osu_overhead.sh [BUILD_DIR] — libweft-mpi's overhead with no drain
# pending (issue 18): OSU Micro-Benchmarks 7.4 under Debian's Open MPI,
# 2 ranks, without and with the layer preloaded, alternating, ROUNDS rounds
# (default 5); prints each pair and the medians' ratio (time with / time
# without; for osu_bw, bandwidth without / bandwidth with). OSU is the one
# .ci/run builds beside the PMIx anchors (WEFT_OSU_DIR, default
# ~/.cache/weft-anchors/osu-openmpi); without it the script says so.
set -u
BUILD=${1:-build}
OSU=${WEFT_OSU_DIR:-$HOME/.cache/weft-anchors/osu-openmpi}/libexec/osu-micro-benchmarks/mpi
LIB=$(realpath "$BUILD/mpi/libweft-mpi-openmpi.so" 2>/dev/null)
[ -x "$OSU/pt2pt/osu_latency" ] || { echo "no OSU Micro-Benchmarks at $OSU: skipped"; exit 0; }
[ -f "$LIB" ] || { echo "no $BUILD/mpi/libweft-mpi-openmpi.so: build first"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
value() { # the last number OSU prints (one size per run)
    timeout 120 mpirun.openmpi --oversubscribe -n 2 "$@" 2>/dev/null | awk '/^ *[0-9]/ {v=$NF} END {print v}'
}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "uptime before: $(uptime)"
for r in $(seq 1 "${ROUNDS:-5}"); do
    for b in "pt2pt/osu_latency -m 8:8 -i 200000 -x 20000" "pt2pt/osu_bw -m 8192:8192 -i 2000 -x 200" \
        "collective/osu_allreduce -m 8:8 -i 200000 -x 20000" "collective/osu_barrier -i 200000 -x 20000"; do
        read -r -a words <<<"$b"
        prog=${words[0]}
        args=("${words[@]:1}")
        without=$(value "$OSU/$prog" "${args[@]}")
        with=$(value -x "LD_PRELOAD=$LIB" "$OSU/$prog" "${args[@]}")
        echo "round $r $(basename "$prog") without $without with $with" | tee -a "$log"
    done
done
echo "uptime after: $(uptime)"
python3 - "$log" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(lambda: ([], []))
for line in open(sys.argv[1]):
    f = line.split()
    runs[f[2]][0].append(float(f[4]))
    runs[f[2]][1].append(float(f[6]))
print("| benchmark | without (median) | with the layer (median) | ratio |")
print("|---|---|---|---|")
for name, (without, with_) in runs.items():
    a, w = statistics.median(without), statistics.median(with_)
    ratio = a / w if name == "osu_bw" else w / a
    unit = "MB/s" if name == "osu_bw" else "us"
    print(f"| {name} | {a} {unit} | {w} {unit} | {ratio:.2f} |")
PY
