#!/usr/bin/env bash
# launcher_test.sh WEFT_RUN HELPER — weft-run's behaviour as a user sees it:
# exit statuses, killing the rest, timeouts, foreign connections, two jobs,
# signal forwarding, and that nothing of a job is left behind after SIGKILL.
set -u
run=$1
helper=$2
fail=0
check() {  # check NAME EXPECTED ACTUAL
    if [ "$2" = "$3" ]; then echo "ok   $1"; else
        echo "FAIL $1: expected $2, got $3"
        fail=1
        ls -l /dev/shm; pgrep -a -x launch_helper; pgrep -a weft-run
    fi
}
leftovers() {  # weft objects in /dev/shm or /tmp, and processes of this helper
    local n=0
    n=$((n + $(ls /dev/shm 2>/dev/null | grep -c weft)))
    n=$((n + $(find /tmp -maxdepth 1 -type s -name 'weft*' 2>/dev/null | wc -l)))
    n=$((n + $(pgrep -x launch_helper | wc -l)))
    echo $n
}

timeout 60 "$run" --timeout 30 -n 3 "$helper" exit 7 >/dev/null 2>&1
check "first non-zero exit status is returned" 7 $?

timeout 60 "$run" -n 3 --timeout 30 "$helper" exit 5 >/dev/null 2>&1
check "launcher options may follow -n N" 5 $?

timeout 60 "$run" --timeout 2 -n 2 "$helper" hang >/dev/null 2>&1
check "--timeout kills the job and returns 124" 124 $?

timeout 60 "$run" --timeout 30 -n 2 "$helper" foreign >/dev/null 2>/tmp/weft_launcher_test.err
check "foreign connections refused, job still runs" 0 $?
grep -q "refused a bootstrap connection" /tmp/weft_launcher_test.err
check "a refusal is logged" 0 $?
rm -f /tmp/weft_launcher_test.err

out=$(timeout 60 "$run" --timeout 30 -n 2 "$helper" jobs : -n 2 "$helper" jobs 2>&1)
check "two jobs address each other" 0 $?
check "four ranks of two jobs report" 4 "$(echo "$out" | grep -c ': ok')"

# Signal forwarding: SIGUSR1 to weft-run reaches every rank.
coproc LAUNCH { exec "$run" --timeout 30 -n 2 "$helper" signal; }
pid=$LAUNCH_PID  # bash unsets LAUNCH_PID once the coprocess ends
for _ in 1 2; do read -r -t 20 _line <&"${LAUNCH[0]}"; done
kill -USR1 "$pid"
wait "$pid"
check "SIGUSR1 forwarded to the ranks" 0 $?

# SIGKILL of a rank kills the rest (no --keep-survivors): 128 + SIGKILL.
timeout 60 "$run" --timeout 30 --fault kill:rank=1:after=0.5 -n 3 "$helper" hang >/dev/null 2>&1
check "a killed rank takes the job down" 137 $?

# SIGKILL of the launcher itself: ranks die with it and leave nothing.
coproc LAUNCH2 { exec "$run" -n 4 "$helper" hang; }
pid=$LAUNCH2_PID
for _ in 1 2 3 4; do read -r -t 20 _line <&"${LAUNCH2[0]}"; done
kill -KILL "$pid"
wait "$pid" 2>/dev/null
for _ in $(seq 50); do [ "$(leftovers)" = 0 ] && break; sleep 0.1; done
check "nothing left after SIGKILL of weft-run" 0 "$(leftovers)"

# SIGKILL of one rank with survivors kept: survivors finish normally. The
# rank dies once its init is done (a timed kill at 0.3 s landed inside init
# when the machine was loaded, and the survivors' init failed).
timeout 60 "$run" --timeout 30 --keep-survivors --fault kill:rank=0:at=transport.init.done -n 3 "$helper" sleep 2 \
  >/dev/null 2>&1
check "survivors kept and finish (victim excluded from the status)" 0 $?
check "nothing left after a killed rank" 0 "$(leftovers)"

timeout 10 "$run" -n 2 /nonexistent/program >/dev/null 2>&1
check "an unrunnable program fails the launch" 127 $?
timeout 10 "$run" --fault explode:rank=0 -n 2 "$helper" hang >/dev/null 2>&1
check "a bad --fault is rejected" 2 $?
timeout 10 "$run" --fault kill:rank=5:after=1 -n 2 "$helper" hang >/dev/null 2>&1
check "a fault on a rank outside the job is rejected" 2 $?
timeout 10 "$run" --fault delay:rank=0:after=1 -n 2 "$helper" hang >/dev/null 2>&1
check "a delay needs at=NAME" 2 $?
timeout 10 "$run" --fault delay:host=0:at=x --hosts 1 -n 2 "$helper" hang >/dev/null 2>&1
check "a delay needs a rank, not a host" 2 $?

if [ $fail = 0 ]; then echo "launcher tests: all passed"; fi
exit $fail
