#!/usr/bin/env bash
# cli_test.sh PROGRAM... — every tool and benchmark's command line, outside
# any launcher: -h and --help print usage to stdout (first line
# "NAME: what it is") and exit 0 with nothing on stderr; an unknown flag is
# an error on stderr (naming it) with exit 2 and nothing on stdout.
set -u
out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
. "$(dirname "$0")/check.sh"
for prog in "$@"; do
    name=$(basename "$prog")
    for flag in --help -h; do
        timeout 20 "$prog" "$flag" >"$out" 2>"$err"
        check "$name $flag exits 0" 0 $?
        check "$name $flag: first line says what it is" 1 "$(head -1 "$out" | grep -c "^$name: ")"
        check "$name $flag: a usage line on stdout" 1 "$(grep -q "usage: .*$name" "$out" && echo 1 || echo 0)"
        check "$name $flag: nothing on stderr" 0 "$(wc -c <"$err")"
    done
    timeout 20 "$prog" --no-such-flag >"$out" 2>"$err"
    check "$name --no-such-flag exits 2" 2 $?
    check "$name --no-such-flag: nothing on stdout" 0 "$(wc -c <"$out")"
    check "$name --no-such-flag: named on stderr" 1 "$(grep -q -- '--no-such-flag' "$err" && echo 1 || echo 0)"
    case $name in
        weft-info)
            timeout 20 "$prog" >"$out" 2>"$err"
            check "weft-info alone reports (exit 0)" 0 $?
            check "weft-info alone reports" 1 "$(head -1 "$out" | grep -c '^weft ')"
            timeout 20 "$prog" extra >"$out" 2>"$err"
            check "weft-info with an argument exits 2" 2 $?
            ;;
        weft-run)
            timeout 20 "$prog" >"$out" 2>"$err"
            check "weft-run without a job exits 2" 2 $?
            check "weft-run without a job: usage on stderr" 1 "$(grep -c '^usage: weft-run' "$err")"
            timeout 20 "$prog" -n 2 --no-such-flag prog >"$out" 2>"$err"
            check "weft-run -n 2 --no-such-flag exits 2" 2 $?
            # Simulated hosts: counts and host faults are checked before anything
            # runs; so are the checkpoint options.
            for bad in "--hosts 0" "--hosts 65" "--hosts x" "--fault kill:host=0:after=1" \
                       "--hosts 2 --fault kill:host=2:after=1" "--hosts 2 --fault cut:rank=0:after=1" \
                       "--hosts 2 --fault kill:host=0:at=x" "--hosts 2 --fault kill:host=0:rank=1:after=1" \
                       "--hosts 2 --fault kill:host=0:after=1:for=2" \
                       "--checkpoint-on SIGUSR2" "--checkpoint-on SIGKILL --checkpoint-dir d" \
                       "--checkpoint-on USR1 --drain-on USR1 --checkpoint-dir d" "--checkpoint-dir" \
                       "--checkpoint-dir a --restart b" "--transport tcp"; do
                # shellcheck disable=SC2086
                timeout 20 "$prog" $bad -n 2 true >"$out" 2>"$err"
                check "weft-run $bad exits 2" 2 $?
                check "weft-run $bad: says why on stderr" 1 "$(grep -c '^weft-run: ' "$err" | awk '{print ($1 > 0)}')"
            done
            ;;
    esac
done
if [ $fail = 0 ]; then echo "cli tests: all passed"; fi
exit $fail
