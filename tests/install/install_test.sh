#!/usr/bin/env bash
# install_test.sh SOURCE_DIR BUILD_DIR — install weft into a scratch prefix,
# then build examples/hello.c against it twice: with plain `cc` + pkg-config,
# and as a CMake project using find_package(weft). Run both under weft-run.
set -euo pipefail
src=$1
build=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig:$prefix/lib/x86_64-linux-gnu/pkgconfig"
cc -std=c99 -Wall -Wextra -Werror -pedantic "$src/examples/hello.c" -o "$prefix/hello_pc" \
   $(pkg-config --cflags --libs weft) -Wl,-rpath,"$(pkg-config --variable=libdir weft)"
cmake -S "$src/tests/install" -B "$prefix/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
   -DHELLO_C="$src/examples/hello.c" -DCMAKE_BUILD_RPATH="$(pkg-config --variable=libdir weft)" >/dev/null
cmake --build "$prefix/consumer" >/dev/null
"$prefix/bin/weft-run" --timeout 60 -n 3 "$prefix/hello_pc"
"$prefix/bin/weft-run" --timeout 60 -n 3 "$prefix/consumer/consumer"
echo "install test: passed"
