#!/usr/bin/env bash
# embed_test.sh SOURCE_DIR BUILD_DIR — build a project that embeds weft with
# add_subdirectory (no GoogleTest, no Google Benchmark found or built), then
# run its program under the weft-run of BUILD_DIR. The project disables
# find_package(GTest) and find_package(benchmark): were weft's tests or
# benchmarks on, its configure would fail.
set -euo pipefail
src=$1
build=$2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cmake -S "$src/tests/install/embed" -B "$scratch" -G Ninja -DWEFT_SOURCE="$src" -DHELLO_C="$src/examples/hello.c" \
  >"$scratch/configure.log" 2>&1 || { cat "$scratch/configure.log"; exit 1; }
cmake --build "$scratch" --target embedder -j"$(nproc)" >"$scratch/build.log" 2>&1 || { tail -40 "$scratch/build.log"; exit 1; }
"$build/tools/weft-run" --timeout 60 -n 2 "$scratch/embedder"
echo "embed test: passed"
