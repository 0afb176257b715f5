# check.sh — sourced by the shell tests here: `check NAME EXPECTED ACTUAL`
# prints "ok   NAME" or "FAIL NAME: ..." and sets fail=1 on a mismatch, so a
# script reports every check before it exits with $fail.
fail=0
check() {
    if [ "$2" = "$3" ]; then echo "ok   $1"; else
        echo "FAIL $1: expected $2, got $3"
        fail=1
    fi
}
