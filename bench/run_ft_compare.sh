#!/usr/bin/env bash
# run_ft_compare.sh BUILD_DIR [REPS] — the fault-tolerance numbers in
# one run: bench/ft_bench at 2, 4, 8 and 16 ranks over shm, failure-free and
# with the last rank SIGKILLed by weft-run at a fault point; then the same
# failure-free workload on MPICH (bench/mpi/ft_mpi.c), which records that it
# aborted when it does. RUNS (3) runs per rank count; rank 0's RESULT lines
# of every run are printed, then a table of the medians over the runs.
set -u -o pipefail
BUILD=$(cd "${1:?usage: run_ft_compare.sh BUILD_DIR [REPS]}" && pwd)
REPS=${2:-200}
RUNS=${RUNS:-3}
SRC=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
for n in 2 4 8 16; do
  for run in $(seq 1 "$RUNS"); do
    timeout 300 "$BUILD/tools/weft-run" --timeout 280 --transport shm -n "$n" --keep-survivors \
      --fault "kill:rank=$((n - 1)):at=ft_bench.victim" "$BUILD/bench/ft_bench" --reps "$REPS" --kill \
      2>"$out/weft-$n-$run.err" | grep '^RESULT' | tee -a "$out/results"
  done
done
if command -v mpicc.mpich > /dev/null && mpicc.mpich -O2 "$SRC/mpi/ft_mpi.c" -o "$out/ft_mpich" 2>"$out/build.err"; then
  for n in 2 4 8 16; do
    if ! timeout 120 mpiexec.mpich -n "$n" "$out/ft_mpich" --reps "$REPS" >"$out/mpich-$n.out" 2>&1; then
      echo "mpich n=$n: aborted: $(grep -m1 -i 'assert\|error' "$out/mpich-$n.out")"
    fi
    grep '^RESULT' "$out/mpich-$n.out" | tee -a "$out/results"
  done
else
  echo "mpich: not built (mpicc.mpich missing or failed)"
fi
python3 - "$out/results" <<'PY'
import collections, re, statistics, sys
cells = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = dict(kv.split("=", 1) for kv in line.split()[1:])
    cells[(f["lib"], f["failures"], f["op"], int(f["ranks"]))].append(float(f["median_us"]))
rows = sorted({k[:3] for k in cells})
print("| lib | failures | op | 2 | 4 | 8 | 16 |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    vals = [cells.get(r + (n,)) for n in (2, 4, 8, 16)]
    print("| " + " | ".join(r) + " | " + " | ".join(f"{statistics.median(v):.1f}" if v else "n/a" for v in vals) + " |")
PY
rm -rf "$out"
