#!/usr/bin/env bash
# weft_info_test.sh report|env SOURCE_DIR WEFT_INFO CONFIG_HPP — weft-info
# (docs/tools/weft-info.md) as a program reads it.
#   report: --json is valid JSON (also with odd bytes in a variable's value)
#           and says what this build has: shm, ucx and verbs built exactly as
#           the generated weft/config.hpp says, PMIx likewise; every viable
#           backend reports the capabilities of a one-rank job on it; the
#           text form names the same backends and variables; --help exits 0,
#           an unknown flag or a bad --caps exits 2.
#   env:    the environment table (tools/weft-info/env_vars.hpp) is the set
#           of variables the library and tools read: a getenv/env_string/
#           env_u64 of a literal name in transport/ group/ drain/ ckpt/
#           context/ tools/ that the table lacks, or a table entry nothing
#           reads, fails. A planted read in a copy proves the check can fail.
set -u
mode=$1 src=$2 info=$3 config=$4
. "$src/tests/mp/check.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# JSON_FILE EXPR: evaluates a Python expression over the parsed document `d`.
jq_py() {
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1], encoding="utf-8")); print(eval(sys.argv[2]))' "$1" "$2"
}
# 1 when config.hpp defines NAME as 1, else 0.
have() { grep -c "^#define $1 1\$" "$config"; }
py_bool() { if [ "$1" = 1 ]; then echo True; else echo False; fi; }

# The names read by the source under DIR: one per line, sorted.
names_read() {
    (cd "$1" && grep -rhoE '\b(secure_getenv|getenv|env_[a-z0-9_]+)\s*\(\s*"[A-Z][A-Z0-9_]*"' \
        transport group drain ckpt context tools 2>/dev/null) |
        sed -E 's/.*"([A-Z0-9_]+)"/\1/' | sort -u
}

case $mode in
report)
    timeout 60 "$info" --help >"$tmp/out" 2>"$tmp/err"
    check "--help exits 0" 0 $?
    check "--help: usage names --json" 1 "$(grep -c -- '^  --json ' "$tmp/out")"
    for bad in "--no-such-flag" "--caps" "--caps nosuch" "--json --job" "extra"; do
        # shellcheck disable=SC2086
        timeout 60 "$info" $bad >"$tmp/out" 2>"$tmp/err"
        check "weft-info $bad exits 2" 2 $?
        check "weft-info $bad: nothing on stdout" 0 "$(wc -c <"$tmp/out")"
        check "weft-info $bad: says why on stderr" 1 "$(head -1 "$tmp/err" | grep -c '^weft-info: ')"
    done

    # A value with a quote, a backslash, a tab, a newline and a byte that is
    # not UTF-8, in a variable a one-rank job only warns about.
    odd=$(printf 'a"b\\c\td\ne\xff')
    env -u WEFT_CKPT_KEEP WEFT_DRAIN_OBSERVE="$odd" WEFT_FT_WATCH=7 timeout 60 "$info" --json >"$tmp/json" 2>"$tmp/err"
    check "--json exits 0" 0 $?
    check "--json is valid JSON" ok "$(jq_py "$tmp/json" '"ok"' 2>&1)"
    check "--json: version" 1 "$(jq_py "$tmp/json" 'int(bool(d["version"]))')"
    check "--json: backends in registry order" "['shm', 'ucx', 'verbs']" \
        "$(jq_py "$tmp/json" '[b["name"] for b in d["backends"]]')"
    check "--json: shm built and viable" "True True" \
        "$(jq_py "$tmp/json" '" ".join(str(b[k]) for b in d["backends"] if b["name"] == "shm" for k in ("built", "viable"))')"
    check "--json: ucx built as config.hpp says" "$(py_bool "$(have WEFT_HAVE_UCX)")" \
        "$(jq_py "$tmp/json" '[b["built"] for b in d["backends"] if b["name"] == "ucx"][0]')"
    check "--json: verbs built as config.hpp says" "$(py_bool "$(have WEFT_HAVE_VERBS)")" \
        "$(jq_py "$tmp/json" '[b["built"] for b in d["backends"] if b["name"] == "verbs"][0]')"
    check "--json: verbs section says built likewise" "$(py_bool "$(have WEFT_HAVE_VERBS)")" \
        "$(jq_py "$tmp/json" 'd["verbs"]["built"]')"
    check "--json: PMIx bootstrap as config.hpp says" "$(py_bool "$(have WEFT_HAVE_PMIX)")" \
        "$(jq_py "$tmp/json" 'd["pmix_bootstrap"]')"
    check "--json: a not-built backend says why" True \
        "$(jq_py "$tmp/json" 'all(b["built"] or b["why"] for b in d["backends"])')"
    check "--json: every viable backend has its one-rank job's caps" True \
        "$(jq_py "$tmp/json" 'all((b["caps"] or {}).get("transport") == b["name"] for b in d["backends"] if b["viable"])')"
    check "--json: no caps where not viable" True \
        "$(jq_py "$tmp/json" 'all(b["caps"] is None and b["caps_error"] for b in d["backends"] if not b["viable"])')"
    check "--json: shm's caps are CPU atomics, global scope" "cpu global" \
        "$(jq_py "$tmp/json" '[b["caps"]["atomics"] + " " + b["caps"]["atomic_scope"] for b in d["backends"] if b["name"] == "shm"][0]')"
    check "--json: auto takes shm on one host" shm "$(jq_py "$tmp/json" 'd["auto"]["one_host"]')"
    check "--json: topology loaded with a NUMA node and PUs" True \
        "$(jq_py "$tmp/json" 'd["topology"]["loaded"] and len(d["topology"]["numa_nodes"]) > 0 and d["topology"]["pus"] > 0')"
    check "--json: NUMA nodes' PUs add up" True \
        "$(jq_py "$tmp/json" 'sum(n["pus"] for n in d["topology"]["numa_nodes"]) == d["topology"]["pus"]')"
    check "--json: verbs devices listed, or why not" True \
        "$(jq_py "$tmp/json" 'd["verbs"]["listed"] or bool(d["verbs"]["why"])')"
    check "--json: a set variable's value" 7 \
        "$(jq_py "$tmp/json" '[e["value"] for e in d["environment"] if e["name"] == "WEFT_FT_WATCH"][0]')"
    check "--json: an odd value escaped, the bad byte replaced" True \
        "$(jq_py "$tmp/json" '[e["value"] for e in d["environment"] if e["name"] == "WEFT_DRAIN_OBSERVE"][0] == "a\"b\\c\td\ne\ufffd"')"
    check "--json: an unset variable is null with its default" True \
        "$(jq_py "$tmp/json" '[e["value"] is None and e["default"] == "2" for e in d["environment"] if e["name"] == "WEFT_CKPT_KEEP"][0]')"

    # The text form: the same backends and every variable of the table.
    timeout 60 "$info" >"$tmp/text" 2>"$tmp/err"
    check "text exits 0" 0 $?
    check "text: first line is the version" 1 "$(head -1 "$tmp/text" | grep -c '^weft ')"
    for b in shm ucx verbs; do
        check "text: a $b line" 1 "$(grep -c "^  $b  *\(built\|not built\)" "$tmp/text")"
    done
    check "text: every viable backend has a one-rank job line" \
        "$(grep -c '^  [a-z]* *built, viable (' "$tmp/text")" "$(grep -c '^         one-rank job: atomics ' "$tmp/text")"
    missing=0
    for name in $(jq_py "$tmp/json" '" ".join(e["name"] for e in d["environment"])'); do
        grep -q "^  $name " "$tmp/text" || { echo "  $name missing from the text"; missing=$((missing + 1)); }
    done
    check "text: every variable of the table" 0 $missing
    check "text: NUMA node lines" 1 "$(grep -c '^  NUMA node [0-9]*: PUs ' "$tmp/text" | awk '{print ($1 > 0)}')"

    # --caps: the key-value form of one backend.
    timeout 60 "$info" --caps shm >"$tmp/out" 2>"$tmp/err"
    check "--caps shm exits 0" 0 $?
    check "--caps shm: transport shm" 1 "$(grep -c '^transport shm$' "$tmp/out")"
    check "--caps shm: eight fields" 8 "$(wc -l <"$tmp/out")"
    ;;
env)
    check_tree() {  # DIR JSON: prints names read but not in the table, and table names nothing reads
        names_read "$1" >"$tmp/read"
        jq_py "$2" '"\n".join(sorted(e["name"] for e in d["environment"]))' >"$tmp/table"
        comm -23 "$tmp/read" "$tmp/table" | sed 's/^/read but not in the table: /'
        comm -13 "$tmp/read" "$tmp/table" | sed 's/^/in the table but read nowhere: /'
    }
    timeout 60 "$info" --json >"$tmp/json" 2>"$tmp/err"
    check "--json exits 0" 0 $?
    check "the source reads some variables" 1 "$(names_read "$src" | grep -c '^WEFT_TRANSPORT$')"
    check_tree "$src" "$tmp/json" >"$tmp/diff"
    cat "$tmp/diff"
    check "the table is exactly the variables the source reads" 0 "$(wc -l <"$tmp/diff")"
    # The check itself: a copy of the source with one more read is caught.
    mkdir -p "$tmp/copy"
    cp -r "$src/transport" "$src/group" "$src/drain" "$src/ckpt" "$src/context" "$src/tools" "$tmp/copy/"
    printf 'const char* v = std::getenv("WEFT_PLANTED_FOR_THE_TEST");\n' >"$tmp/copy/drain/planted.cpp"
    check "a planted read is caught" "read but not in the table: WEFT_PLANTED_FOR_THE_TEST" \
        "$(check_tree "$tmp/copy" "$tmp/json")"
    ;;
*)
    echo "weft_info_test.sh: unknown mode '$mode' (report or env)" >&2
    exit 2
    ;;
esac
if [ $fail = 0 ]; then echo "weft-info $mode tests: all passed"; fi
exit $fail
