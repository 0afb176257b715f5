// crc_bench.cpp — CRC-32C, the checksum of every checkpoint byte
// (ckpt/crc32c.hpp), against a memcpy of the same size in the same run:
// the SSE4.2 path and the table path, in bytes per second.
//   build/bench/crc_bench
#include "bench/cli.hpp"
#include "ckpt/crc32c.hpp"

#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

namespace {

std::vector<uint8_t> data_of(size_t n) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 131 + 7);
    return v;
}

void BM_Crc32c(benchmark::State& state) {
    const auto v = data_of(size_t(state.range(0)));
    for (auto _ : state) benchmark::DoNotOptimize(weft::ckpt::crc32c(0, v.data(), v.size()));
    state.SetBytesProcessed(int64_t(state.iterations()) * state.range(0));
}

void BM_Crc32cTable(benchmark::State& state) {
    const auto v = data_of(size_t(state.range(0)));
    for (auto _ : state) benchmark::DoNotOptimize(weft::ckpt::crc32c_portable(0, v.data(), v.size()));
    state.SetBytesProcessed(int64_t(state.iterations()) * state.range(0));
}

// The baseline: reading the bytes once and writing them once.
void BM_Memcpy(benchmark::State& state) {
    const auto v = data_of(size_t(state.range(0)));
    std::vector<uint8_t> out(v.size());
    for (auto _ : state) {
        std::memcpy(out.data(), v.data(), v.size());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * state.range(0));
}

}  // namespace

BENCHMARK(BM_Crc32c)->Arg(4 << 10)->Arg(1 << 20)->Arg(64 << 20);
BENCHMARK(BM_Crc32cTable)->Arg(4 << 10)->Arg(1 << 20)->Arg(64 << 20);
BENCHMARK(BM_Memcpy)->Arg(4 << 10)->Arg(1 << 20)->Arg(64 << 20);

int main(int argc, char** argv) {
    bench::parse_cli(argc, argv,
                     "crc_bench: CRC-32C against memcpy (bench/RESULTS.md \"Checkpoint\")\nusage: crc_bench\n", {},
                     true);
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    return 0;
}
