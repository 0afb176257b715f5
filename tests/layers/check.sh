#!/usr/bin/env bash
# check.sh SOURCE_DIR MANIFEST CXX — proves the layers link only downward
# (docs/architecture.md): transport <- group <- drain <- ckpt <- context.
#  1. No source file of a layer names a header of a layer above it.
#  2. With a layer's own include path, a header of the layer above does not
#     compile and one of the layer below does (the build itself enforces 1).
#  3. No object of a layer needs a symbol that only a layer above defines.
set -uo pipefail
src=$1 manifest=$2 cxx=$3
fail=0
bad() { echo "layers.check: FAILED: $*"; fail=1; }

mapfile -t layers < <(awk '$1 == "layer" {print $2}' "$manifest")
field() { awk -v l="$1" -v f="$2" '$1 == "layer" {cur = $2} cur == l && $1 == f {print $2}' "$manifest"; }
[ "${#layers[@]}" -ge 4 ] || { echo "layers.check: no layers in $manifest"; exit 1; }

# 1. includes
for ((i = 0; i < ${#layers[@]}; i++)); do
  above=("${layers[@]:i+1}")
  [ "${#above[@]}" = 0 ] && continue
  pattern="#include \"($(IFS='|'; echo "${above[*]}"))/"
  hits=$(grep -rnE "$pattern" "$src/${layers[i]}" --include='*.cpp' --include='*.hpp' || true)
  [ -z "$hits" ] || bad "${layers[i]} includes a layer above it:"$'\n'"$hits"
done
echo "1. no layer's source names a header of a layer above it"

# 2. the include path enforces it
probe() {  # probe LAYER HEADER -> compiler exit status
  local flags=() d
  IFS=: read -ra dirs <<<"$(field "$1" includes)"
  for d in "${dirs[@]}"; do flags+=(-I "$d"); done
  echo "#include \"$2\"" | "$cxx" -std=c++20 -fsyntax-only "${flags[@]}" -x c++ - >/dev/null 2>&1
}
first_header=(transport/runtime.hpp group/layer.hpp drain/layer.hpp ckpt/layer.hpp context/context.hpp)
for ((i = 0; i + 1 < ${#layers[@]}; i++)); do
  up=${first_header[i+1]}
  if probe "${layers[i]}" "$up"; then bad "${layers[i]} compiles #include \"$up\""; fi
  if ! probe "${layers[i+1]}" "${first_header[i]}"; then bad "${layers[i+1]} cannot include \"${first_header[i]}\""; fi
done
echo "2. with a layer's include path, the layer above is out of reach and the one below in reach"

# 3. symbols
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for l in "${layers[@]}"; do
  IFS=: read -ra objs <<<"$(field "$l" objects)"
  [ "${#objs[@]}" -gt 0 ] || bad "$l has no objects"
  nm --defined-only -g "${objs[@]}" 2>/dev/null | awk 'NF >= 3 && $2 != "U" && $2 != "V" && $2 != "W" {print $3}' | sort -u >"$tmp/$l.def"
  nm -u "${objs[@]}" 2>/dev/null | awk '$1 == "U" {print $2}' | sort -u >"$tmp/$l.undef"
done
for ((i = 0; i < ${#layers[@]}; i++)); do
  for ((j = i + 1; j < ${#layers[@]}; j++)); do
    up=$(comm -12 "$tmp/${layers[i]}.undef" "$tmp/${layers[j]}.def")
    [ -z "$up" ] || bad "${layers[i]} needs symbols that ${layers[j]} defines:"$'\n'"$(echo "$up" | c++filt | head -20)"
  done
done
echo "3. no layer's objects need a symbol defined only above it"
[ $fail = 0 ] && echo "layers.check: ok"
exit $fail
