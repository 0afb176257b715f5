#!/usr/bin/env bash
# prterun_test.sh MP_PGROUP [RANKS] — weft's PMIx bootstrap under PRRTE's
# prterun (the anchors' OpenPMIx + PRRTE master, a second real launcher
# beside Open MPI's mpirun), running the process-group suite. Skips (77)
# with the reason when the anchors are not built on this machine
# (bench/run_group_compare.sh builds them once into $WEFT_ANCHORS_PREFIX).
set -u
bin=$1 ranks=${2:-4}
prefix=${WEFT_ANCHORS_PREFIX:-$HOME/.cache/weft-anchors}
if [ ! -x "$prefix/bin/prterun" ]; then
    echo "SKIP: no prterun at $prefix/bin (the anchors are not built here: bench/run_group_compare.sh builds them)"
    exit 77
fi
# weft loads the anchors' libpmix, the one prterun speaks (docs/testing.md).
LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
GTEST_FILTER="Groups.*:Invites.*" WEFT_TIMEOUT_MS=${WEFT_TIMEOUT_MS:-60000} \
    timeout 300 "$prefix/bin/prterun" --allow-run-as-root --map-by :OVERSUBSCRIBE -n "$ranks" "$bin"
