#!/usr/bin/env bash
# main_job.sh BUILD_DIR [shm|ucx] — weft's main job (the README's first
# command runs it through scripts/demo.sh): 8 ranks under weft-run that
# construct a group, check and time traffic, checkpoint, lose rank 5 to a
# real SIGKILL, recover, and restart from the checkpoint in a second launch.
# Exit status 0 only if both launches passed every check.
set -euo pipefail
build=${1:?usage: main_job.sh BUILD_DIR [shm|ucx]}
transport=${2:-shm}
run=$build/tools/weft-run
demo=$build/examples/weft_demo
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# First launch: rank 5 is killed at the program's fault point "demo.kill";
# --keep-survivors lets the other ranks recover instead of being stopped.
first=("$run" --timeout 120 --transport "$transport" -n 8 --checkpoint-dir "$work/ckpt" --keep-survivors
       --fault kill:rank=5:at=demo.kill "$demo" --report "$work/report.tsv")
echo "\$ ${first[*]}" | sed "s#$work#\$WORK#g"
"${first[@]}"
echo
# Second launch: a new job restarts from the checkpoint the first one wrote.
second=("$run" --timeout 120 --transport "$transport" -n 8 --restart "$work/ckpt" "$demo" --restart
        --report "$work/report.tsv")
echo "\$ ${second[*]}" | sed "s#$work#\$WORK#g"
"${second[@]}"
