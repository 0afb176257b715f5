#!/usr/bin/env bash
# drain_signal_test.sh KIND LAUNCHER LIB RANKS MIN_DRAINS TARGET RESULT PROGRAM [ARGS...]
# libweft-mpi drains a real MPI program, over and over, while it runs
# (issue 18):
#   1. PROGRAM without the layer: its result, the stdout lines that match
#      the extended regex RESULT (a checksum, LAMMPS's thermo lines);
#   2. PROGRAM with LIB preloaded, sent SIGUSR1 every 0.25 s until it ends:
#        TARGET "ranks": one rank after another, each by its pid (the
#          program writes DIR/pid.RANK where WEFT_MPI_TEST_PIDDIR says);
#        TARGET "launcher:READY": the launcher (mpirun, mpiexec), which
#          forwards it to every rank, once stdout matches READY (before the
#          layer's handler is installed SIGUSR1 would end a rank), and no
#          longer once a rank entered MPI_Finalize (the layer creates
#          DIR/finalizing.RANK there);
#   3. the layered run must exit 0 with the same result, and at least
#      MIN_DRAINS drains must reach a quiescent point. A launcher's signal
#      reaches every rank but must make one drain, not one per rank: no
#      more drains than signals.
# A program that writes its results to a file in its working directory
# (HPCC: hpccoutf.txt) names it in DRAIN_TEST_RESULT_FILE: RESULT and READY
# are then matched there; DRAIN_TEST_INPUT=SOURCE:NAME is copied into the
# working directory as NAME before each run (HPCC's hpccinf.txt).
# KIND is openmpi (LAUNCHER = mpirun) or mpich (LAUNCHER = mpiexec). Every
# launch is bounded by timeout; a hang is a failure naming the step.
set -u
usage="usage: drain_signal_test.sh openmpi|mpich LAUNCHER LIB RANKS MIN_DRAINS ranks|launcher:READY RESULT PROGRAM..."
KIND=${1:?$usage} LAUNCHER=${2:?$usage} LIB=${3:?$usage} RANKS=${4:?$usage} MIN_DRAINS=${5:?$usage}
TARGET=${6:?$usage} RESULT=${7:?$usage}
shift 7
[ $# -ge 1 ] || { echo "$usage"; exit 2; }
NAME=$(basename "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL drain_signal_test ($KIND, $NAME): $*"; exit 1; }
. "$(dirname "$0")/launch.sh"
MPI_ENV=("WEFT_MPI_TEST_PIDDIR=$tmp/pids")
mkdir -p "$tmp/pids" "$tmp/cwd"
cd "$tmp/cwd" || exit 1 # programs that write files (LAMMPS's log) write them here
RESULT_FILE=${DRAIN_TEST_RESULT_FILE:-}
fresh() { # before a launch, in the foreground: nothing of the last run to be mistaken for this one's
    rm -f "$tmp"/pids/* "$tmp"/cwd/*
    [ -z "${DRAIN_TEST_INPUT:-}" ] || cp "${DRAIN_TEST_INPUT%%:*}" "$tmp/cwd/${DRAIN_TEST_INPUT#*:}"
}
launch() { # launch 0|1 OUT PROGRAM...: the job, with the layer preloaded when 1
    local lib=- out=$2
    [ "$1" = 1 ] && lib=$LIB
    shift 2
    mpi_launch "$KIND" "$LAUNCHER" "$RANKS" "$lib" "$out" "$@"
    local rc=$?
    [ -z "$RESULT_FILE" ] || cp "$tmp/cwd/$RESULT_FILE" "$out" 2>/dev/null || : >"$out"
    return $rc
}
# Where the program writes what READY and RESULT look for while it runs.
progress_file() { if [ -n "$RESULT_FILE" ]; then echo "$tmp/cwd/$RESULT_FILE"; else echo "$tmp/layered"; fi; }
# The pid of the launcher started under the background job $1 (through
# timeout): its descendant whose name is the launcher's.
launcher_pid() {
    local name c
    name=$(basename "$LAUNCHER" | cut -c1-15)
    for c in $(pgrep -P "$1"); do
        if [ "$(cat /proc/"$c"/comm 2>/dev/null)" = "$name" ]; then
            echo "$c"
            return 0
        fi
        launcher_pid "$c" && return 0
    done
    return 1
}

fresh
launch 0 "$tmp/ref" "$@"
rc=$?
[ $rc = 0 ] || { tail -20 "$tmp/ref.err"; fail "the run without the layer failed (exit $rc)"; }
grep -E "$RESULT" "$tmp/ref" >"$tmp/ref.result"
[ -s "$tmp/ref.result" ] || fail "the run without the layer printed no result line (/$RESULT/)"

fresh
launch 1 "$tmp/layered" "$@" &
job=$!
signals=0
deadline=$((SECONDS + 60))
case $TARGET in
    ranks) until [ "$(ls "$tmp/pids"/pid.* 2>/dev/null | wc -l)" -ge "$RANKS" ]; do
        kill -0 $job 2>/dev/null || break
        [ $SECONDS -lt $deadline ] || break
        sleep 0.05
    done ;;
    launcher:*) until grep -qE "${TARGET#launcher:}" "$(progress_file)" 2>/dev/null; do
        kill -0 $job 2>/dev/null || break
        [ $SECONDS -lt $deadline ] || break
        sleep 0.05
    done ;;
    *) fail "TARGET must be ranks or launcher:READY, not '$TARGET'" ;;
esac
# How many of the program's ranks run now (by process name: the only job
# of this test at the time).
ranks_running() {
    local n
    n=$(pgrep -c -x "$(basename "$1" | cut -c1-15)" 2>/dev/null) # prints 0 (and fails) for none
    echo "${n:-0}"
}
r=0
while kill -0 $job 2>/dev/null; do
    if [ "$TARGET" = ranks ]; then
        pid=$(cat "$tmp/pids/pid.$r" 2>/dev/null)
        r=$(((r + 1) % RANKS))
    else
        # A launcher whose job is tearing down no longer forwards a signal:
        # Open MPI's mpirun dies of it (exit 138; CI rehearsals: LAMMPS once
        # when a rank had exited, HPCC once when none had yet). Signal it
        # only while every rank runs and none has entered MPI_Finalize (the
        # layer creates DIR/finalizing.RANK there).
        if ls "$tmp/pids"/finalizing.* >/dev/null 2>&1 || [ "$(ranks_running "$1")" -lt "$RANKS" ]; then
            sleep 0.05
            continue
        fi
        pid=$(launcher_pid $job)
    fi
    [ -n "$pid" ] && kill -USR1 "$pid" 2>/dev/null && signals=$((signals + 1))
    sleep 0.25
done
wait $job
rc=$?
grep -E "$RESULT" "$tmp/layered" >"$tmp/layered.result"
drains=$(grep -o 'drain [0-9]* quiescent' "$tmp/layered.err" | sort -u | wc -l)
echo "drain_signal_test ($KIND, $NAME, $RANKS ranks): $signals SIGUSR1 sent to the $TARGET, $drains drain(s) quiescent"
grep 'weft-mpi rank 0: drain' "$tmp/layered.err" | head -5
grep -o 'drain [0-9]* quiescent: [0-9.]* ms' "$tmp/layered.err" | awk '{print $4}' | sort -n |
    awk '{v[NR] = $1} END {if (NR) printf "request to quiescent: median %.3f ms, max %.3f ms over %d drains\n", v[int((NR + 1) / 2)], v[NR], NR}'
buffered=$(grep -o 'point: [0-9]* MPI message(s) in this rank' "$tmp/layered.err" | awk '{s += $2} END {print s + 0}')
echo "MPI messages in the layer's buffer at quiescent points (summed over ranks and drains): $buffered"
if [ $rc != 0 ] || ! cmp -s "$tmp/ref.result" "$tmp/layered.result" || [ "$drains" -lt "$MIN_DRAINS" ] ||
    { [ "$TARGET" != ranks ] && [ "$drains" -gt "$signals" ]; }; then
    echo "--- layered run's stderr (last 40 lines):"
    tail -40 "$tmp/layered.err"
    [ $rc = 0 ] || fail "the layered run exited $rc (124: timed out)"
    cmp -s "$tmp/ref.result" "$tmp/layered.result" ||
        { diff "$tmp/ref.result" "$tmp/layered.result" | head -20; fail "the result differs from the run without the layer"; }
    [ "$drains" -ge "$MIN_DRAINS" ] || fail "only $drains drain(s) reached a quiescent point ($signals signals)"
    fail "$drains drains for $signals signals to the launcher: a forwarded signal must make one drain, not one per rank"
fi
echo "ok   drain_signal_test ($KIND, $NAME): $(wc -l <"$tmp/ref.result") result line(s) under the layer as without it, across $drains drains"
