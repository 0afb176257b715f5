#!/usr/bin/env bash
# The main job: install dependencies, build weft, run the demo on 4 ranks
# under weft-run (this machine, shared memory), then over UCX.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
# Only what the demo runs (the library, weft-run, weft_demo): about 40 s on
# 2 cores, where the whole tree (tests, benchmarks) takes about 2 minutes.
cmake --build build -j"$(nproc)" --target weft-run weft_demo
./build/tools/weft-run --timeout 300 --transport shm -n 4 ./build/examples/weft_demo
if [ -x build/examples/weft_demo ] && grep -q 'WEFT_HAVE_UCX 1' build/generated/weft/config.hpp; then
  UCX_TLS=shm ./build/tools/weft-run --timeout 300 --transport ucx -n 4 ./build/examples/weft_demo 500
fi
