// compare.hpp — --compare: after weft's rows (and weft_finalize, so no rank
// spins beside it), rank 0 runs a baseline for every row that has a matching
// test, with the row's size, iterations and warm-up, and fills the row's
// baseline and ratio; rows without one stay n/a. ucx_perftest: Debian's, over
// loopback, with the same UCX_TLS (compare.cpp). mpi: the OSU
// Micro-Benchmarks under Debian's Open MPI (compare_mpi.cpp). perftest:
// Debian's perftest on weft's RDMA device and GID (compare_perftest.cpp).
#pragma once

#include "report.hpp"

#include <string>
#include <vector>

namespace weft_bench {

// `tls`: the UCX_TLS both sides run with. Returns false (having said why on
// stderr) if a baseline run failed; `how` describes what ran.
// Bandwidth rows send iterations x window messages there (-n counts messages).
// `cpus`: weft's ranks 0 and 1's CPU lists; when they differ (weft-run bound
// them), the client runs on rank 0's first CPU and the server on rank 1's
// (ucx_perftest -c), so both sides of the comparison are placed alike.
bool compare_ucx_perftest(std::vector<Row>& rows, uint64_t warmup, uint64_t window, const std::string& tls,
                          const std::vector<std::string>& cpus, std::string& how);

// `warmup`: -x (rows above 64 KiB scale it, warmup_for_size). `cpus`: every
// weft rank's CPU list; OSU's rank k runs on weft's rank k's. Returns false
// (having said why on stderr) if mpirun.openmpi or OSU is missing — then no
// row has a baseline — or an OSU run failed; `how` describes what ran. Each
// mpirun is bounded (WEFT_OSU_TIMEOUT_S, default 120 s) and ended by its pid.
bool compare_mpi(std::vector<Row>& rows, uint64_t warmup, const std::vector<std::string>& cpus, std::string& how);

// `transport`: the one weft ran on; perftest runs only after "verbs", with
// a device in /sys/class/infiniband, on the device, port and GID weft-info
// says weft uses. Otherwise, or without perftest's programs or weft-info,
// returns false having said why — then no row has a baseline; also false if
// a perftest run failed. `cpus`: weft's ranks' CPU lists; when ranks 0 and
// 1's differ, the client runs on rank 0's and the server on rank 1's.
// Each server and client is bounded (WEFT_PERFTEST_TIMEOUT_S, default 60 s)
// and ended by its pid; `how` describes what ran.
bool compare_perftest(std::vector<Row>& rows, const std::string& transport, const std::vector<std::string>& cpus,
                      std::string& how);

}  // namespace weft_bench
