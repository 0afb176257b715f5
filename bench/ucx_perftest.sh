# ucx_perftest.sh — sourced by run_all.sh and run_ucx_paired.sh: perftest(),
# one ucx_perftest test over loopback (127.0.0.1). Needs OUT (the run's
# folder: commands.txt, perftest.txt and the logs go there), PORT (the last
# port used; each test takes the next), FAILED and log() from the caller.
# perftest TLS TEST ITERS: one server and one client per test (the server
# answers one test, then exits). Appends "TLS TEST p50_us avg_us" to
# perftest.txt.
perftest() {
    local tls=$1 test=$2 iters=$3
    PORT=$((PORT + 1))
    local srv_cmd="UCX_TLS=$tls timeout 120 ucx_perftest -p $PORT"
    local cli_cmd="UCX_TLS=$tls timeout 120 ucx_perftest 127.0.0.1 -p $PORT -t $test -n $iters -s 8 -f"
    printf '%s &\n%s\n' "$srv_cmd" "$cli_cmd" >> "$OUT/commands.txt"
    log "perftest $tls $test"
    UCX_TLS=$tls timeout 120 ucx_perftest -p "$PORT" > "$OUT/perftest-$tls-$test.server.log" 2>&1 &
    local srv=$!
    local ok=0 i
    # The client fails fast while the server is not listening yet.
    for i in 1 2 3 4 5 6 7 8 9 10; do
        sleep 0.3
        if UCX_TLS=$tls timeout 120 ucx_perftest 127.0.0.1 -p "$PORT" -t "$test" -n "$iters" -s 8 -f \
            > "$OUT/perftest-$tls-$test.log" 2>&1; then
            ok=1
            break
        fi
        kill -0 "$srv" 2>/dev/null || break
    done
    if kill -0 "$srv" 2>/dev/null; then kill "$srv" 2>/dev/null; fi
    wait "$srv" 2>/dev/null
    if [ $ok = 1 ]; then
        # -f: the last line is "iterations p50 avg overall bw bw rate rate" (latency in usec).
        tail -1 "$OUT/perftest-$tls-$test.log" | awk -v t="$tls" -v n="$test" '{print t, n, $2, $3}' >> "$OUT/perftest.txt"
    else
        log "perftest $tls $test FAILED"
        echo "$tls $test nan nan" >> "$OUT/perftest.txt"
        FAILED=1
    fi
}

