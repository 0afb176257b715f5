// env_vars.hpp — the one table of every environment variable weft's library
// and tools read: what it does and its default. weft-info prints it with each
// variable's value here; tests/tools/env_table_test.sh fails when the source
// reads a variable this table lacks, or the table names one nothing reads, so
// the table cannot silently fall behind the code.
#pragma once

namespace weft::info {

struct EnvVar {
    const char* name;
    const char* read_in;   // the module whose code reads it
    const char* fallback;  // the value weft assumes when it is unset
    const char* meaning;
};

inline constexpr EnvVar env_vars[] = {
    // transport: selection, deadlines, logging
    {"WEFT_TRANSPORT", "transport", "auto", "backend: shm | ucx | verbs | auto (docs/transports.md)"},
    {"WEFT_TIMEOUT_MS", "transport", "30000", "deadline of every blocking call, in ms"},
    {"WEFT_LOG", "transport", "warn", "log level: error | warn | info | debug"},
    {"WEFT_AM_HOLD_BYTES", "transport", "67108864",
     "bytes of active messages held for ids with no handler yet; past it, an error"},
    {"WEFT_PIDFD_MONITOR", "transport", "1", "0: same-host deaths are not watched through pidfd (tests)"},
    {"WEFT_FT_FENCE", "transport", "kill",
     "a declared same-host peer: kill (SIGKILL it) | drop (only drop what it sends)"},
    {"WEFT_FAULT_POINTS", "transport", "(none)",
     "fault points armed in this rank: kill@NAME#K;stop@NAME#K;delayMS@NAME#K (set by weft-run --fault)"},
    // transport: bootstrap (set by weft-run; PMIX_* by a PMIx launcher)
    {"WEFT_BOOTSTRAP", "transport", "(none: PMIx, else a job of one)",
     "the launcher's socket, unix:@NAME or unix:/PATH (set by weft-run)"},
    {"WEFT_SECRET", "transport", "(none)", "64 hex digits proving this rank to the launcher (set by weft-run)"},
    {"WEFT_JOB", "transport", "(none)", "this rank's job in the launch (set by weft-run)"},
    {"WEFT_RANK", "transport", "(none)", "this rank in its job (set by weft-run)"},
    {"WEFT_JOB_SIZES", "transport", "(none)", "ranks of every job of the launch, comma-separated (set by weft-run)"},
    {"PMIX_RANK", "transport", "(none)", "present: bootstrap through PMIx (set by a PMIx launcher)"},
    {"PMIX_NAMESPACE", "transport", "(none)", "present: bootstrap through PMIx (set by a PMIx launcher)"},
    // transport: backends
    {"WEFT_SHM_RING_KB", "transport/shm", "64", "size of each shm message ring, in KiB"},
    {"WEFT_SHM_HEAP_MB", "transport/shm", "128", "size of each rank's shm heap, in MiB"},
    {"UCX_TLS", "transport/ucx", "(UCX's default)",
     "UCX's transports; weft enables UCX peer error handling to peers on other hosts, and to all when it excludes "
     "shared memory"},
    {"WEFT_VERBS_DEVICE", "transport/verbs", "(first device with an ACTIVE port)",
     "RDMA device, optionally with a port: mlx5_0, rxe0:1"},
    {"WEFT_VERBS_GID_INDEX", "transport/verbs", "(chosen: RoCE v2 IPv4-mapped first)", "GID table index to use"},
    {"WEFT_VERBS_CONNECT", "transport/verbs", "exchange",
     "how QPs connect: exchange (through the bootstrap) | rdma_cm"},
    {"WEFT_VERBS_CM_ADDR", "transport/verbs", "(from the chosen GID)",
     "the IP address rdma_cm listens on (WEFT_VERBS_CONNECT=rdma_cm)"},
    {"WEFT_VERBS_TIMEOUT", "transport/verbs", "14", "QP local ACK timeout exponent (4.096 us * 2^N; at most 31)"},
    {"WEFT_VERBS_RETRY", "transport/verbs", "6", "QP retry count (at most 6)"},
    // group: progress and the failure detector
    {"WEFT_PROGRESS_THREAD", "group", "0", "1: a progress thread runs while the application is not in weft"},
    {"WEFT_FT_DETECTOR", "group", "auto", "failure detector's path: auto | channel | progress (tests)"},
    {"WEFT_FT_PERIOD_MS", "group", "100", "heartbeat period, in ms"},
    {"WEFT_FT_TIMEOUT_MS", "group", "1000", "a heartbeat silent this long is a failure, in ms; 0: not observed"},
    {"WEFT_FT_WATCH", "group", "3", "live successors each rank observes"},
    // drain
    {"WEFT_DRAIN", "drain", "1", "0: no drain thread"},
    {"WEFT_DRAIN_MODE", "drain", "polling", "polling | blocking (docs/drain.md)"},
    {"WEFT_DRAIN_OBSERVE", "drain", "auto", "how a drain round observes: auto | reads | tree (tree from 64 ranks)"},
    {"WEFT_DRAIN_ATTEMPT_MS", "drain", "5000", "an attempt not converged by then is abandoned and retried, in ms"},
    {"WEFT_DRAIN_FREE_RUN_MS", "drain", "100", "the job runs freely this long between attempts, in ms"},
    {"WEFT_DRAIN_TIMEOUT_MS", "drain", "60000", "a drain not done by then fails, in ms"},
    {"WEFT_DRAIN_IDLE_US", "drain", "1000 (10000 on verbs)",
     "how often an idle drain thread looks for a request off shm, in us"},
    {"WEFT_DRAIN_FD", "drain", "(none)", "eventfd weft-run --drain-on writes to ask for a drain (set by weft-run)"},
    {"WEFT_DRAIN_REPORT_FD", "drain", "(none)", "pipe a drain's result is reported on (set by weft-run)"},
    // ckpt
    {"WEFT_CKPT_DIR", "ckpt", "(none)", "checkpoint directory (weft-run --checkpoint-dir)"},
    {"WEFT_CKPT_RESTART", "ckpt", "0", "1: restart from WEFT_CKPT_DIR (weft-run --restart)"},
    {"WEFT_CKPT_FD", "ckpt", "(none)", "eventfd weft-run --checkpoint-on writes to ask for a checkpoint"},
    {"WEFT_CKPT_KEEP", "ckpt", "2", "committed generations kept"},
    {"WEFT_CKPT_INTERVAL_S", "ckpt", "0", "weft_ckpt_need says yes this long after the last checkpoint; 0: never"},
    {"WEFT_CKPT_FLUSH_DIR", "ckpt", "(none)", "second directory checkpoints are copied to (docs/checkpoint.md)"},
    {"WEFT_CKPT_FLUSH_TIMEOUT_S", "ckpt", "120", "rank 0's wait for a flush to finish, in s"},
    // tools
    {"WEFT_HOSTS_MAP", "tools/weft-hosts", "(none)",
     "name=PID of each simulated host's PID 1 (set by weft-hosts; read by weft-hosts --enter)"},
    {"WEFT_FABRIC_CHECK_CORRUPT", "tools/weft-fabric-check", "(none)",
     "tests only: SRC:DST, a byte of that pair's data is corrupted, so the check must fail naming the pair"},
    {"PATH", "tools/weft-bench", "(the shell's)",
     "where weft-bench --compare finds ucx_perftest, mpirun.openmpi, taskset, perftest's ib_* and weft-info"},
    {"HOME", "tools/weft-bench", "(the user's)", "weft-bench --compare mpi: where WEFT_OSU_DIR's default lies"},
    {"WEFT_OSU_DIR", "tools/weft-bench", "$HOME/.cache/weft-anchors/osu-openmpi",
     "weft-bench --compare mpi: the OSU Micro-Benchmarks' mpi/ directory, or the prefix they were installed under"},
    {"WEFT_OSU_TIMEOUT_S", "tools/weft-bench", "120",
     "weft-bench --compare mpi: each mpirun's bound, in s; then SIGTERM, SIGKILL 10 s later"},
    {"WEFT_PERFTEST_TIMEOUT_S", "tools/weft-bench", "60",
     "weft-bench --compare perftest: each perftest server's and client's bound, in s; then SIGTERM, SIGKILL 10 s "
     "later"},
};

}  // namespace weft::info
