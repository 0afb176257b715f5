#!/usr/bin/env bash
# The main job: install dependencies, build what it runs, then run it —
# 8 ranks under weft-run (this machine, shared memory) that construct a
# process group, check and time their traffic, checkpoint, lose a rank to a
# real SIGKILL, recover, and restart from the checkpoint (examples/main_job.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
# Only what the main job runs (the library, weft-run, weft_demo): about 40 s
# on 2 cores, where the whole tree (tests, benchmarks) takes about 2 minutes.
cmake --build build -j"$(nproc)" --target weft-run weft_demo
bash examples/main_job.sh build shm
