#!/usr/bin/env bash
# All tests: install dependencies, build (warnings are errors), run ctest.
# BUILD_DIR and extra CMake arguments can be given in the environment:
#   BUILD_DIR=build-asan CMAKE_ARGS="-DWEFT_SANITIZE=address,undefined" scripts/test.sh
# BUILD_TARGETS (CI's sanitizer stages) builds only those targets, for a
# CTEST_ARGS that runs only their tests.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${SKIP_DEPS:-0}" != 1 ]; then bash scripts/install-deps.sh; fi
BUILD_DIR=${BUILD_DIR:-build}
# shellcheck disable=SC2086
cmake -S . -B "$BUILD_DIR" -G Ninja -DWEFT_WERROR=ON ${CMAKE_ARGS:-}
# shellcheck disable=SC2086
cmake --build "$BUILD_DIR" -j"$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS}
ctest --test-dir "$BUILD_DIR" --output-on-failure ${CTEST_ARGS:-}
