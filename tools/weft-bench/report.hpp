// report.hpp — weft-bench's results: one Row per (test, size), the run's
// Header, and the four ways rank 0 writes them (aligned table on stdout,
// JSON, CSV, SVG plot). Every writer prints each number with the same
// precision, so the JSON's and CSV's rows equal the table's exactly.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace weft_bench {

struct Row {
    std::string op;    // "put", "allreduce", ...
    std::string unit;  // "half", "full", "op" or "call" (see the table's legend)
    uint64_t bytes = 0;
    uint32_t ranks = 0;
    uint64_t iters = 0;
    double min_us = 0, median_us = 0, mean_us = 0, p99_us = 0, p999_us = 0, max_us = 0;
    double mb_s = 0;      // bandwidth rows only (MB = 10^6 bytes), else 0
    double mmsg_s = 0;    // message rate (10^6 messages/s), bandwidth rows only
    uint64_t window = 0;  // bandwidth rows: operations outstanding (-W, or fewer if the slots hold fewer)
    // --compare: the baseline's number in us (ucx_perftest: its median; mpi:
    // OSU's average; bandwidth rows: time per message) and weft's over it; 0
    // when none ran (printed n/a).
    double base_us = 0, ratio = 0;
};

struct Header {
    std::string transport;  // "shm", "ucx UCX_TLS=shm", ...
    uint32_t ranks = 0;
    uint64_t iterations = 0, warmup = 0, window = 0, min_size = 0, max_size = 0;
    std::vector<std::string> cpu_binding;  // per rank, "0-1"
    std::string compare;                   // "" or how the baseline ran
};

void write_table(std::FILE* out, const Header& h, const std::vector<Row>& rows);
// Each returns false (and says why on stderr) when the file cannot be written.
bool write_json(const std::string& path, const Header& h, const std::vector<Row>& rows);
bool write_csv(const std::string& path, const Header& h, const std::vector<Row>& rows);
bool write_svg(const std::string& path, const Header& h, const std::vector<Row>& rows);
// FILE.png: the SVG, converted by rsvg-convert (parse_options checked it is
// on PATH).
bool write_png(const std::string& path, const Header& h, const std::vector<Row>& rows);

}  // namespace weft_bench
