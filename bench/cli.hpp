// cli.hpp — every benchmark's command line, checked before weft_init (so
// neither needs weft-run): -h / --help prints what the program is and its
// usage to stdout and exits 0; an unknown flag or argument is an error on
// stderr with exit 2. Google Benchmark programs also pass its --benchmark_*
// flags through (benchmark::Initialize reads them).
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

namespace bench {

struct Flag {
    const char* name;
    bool takes_value;
};

// help: "NAME: what it is\n" then the usage. positional: how many plain
// (non-flag) arguments the program takes.
inline void parse_cli(int argc, char** argv, const char* help, std::initializer_list<Flag> flags,
                      bool google_benchmark = false, int positional = 0) {
    for (int i = 1; i < argc; ++i)
        if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) {
            std::fputs(help, stdout);
            if (google_benchmark)
                std::fputs(
                    "  --benchmark_*        Google Benchmark's flags (--benchmark_filter=REGEX, "
                    "--benchmark_min_time=SEC, ...)\n",
                    stdout);
            std::fputs("  -h, --help           print this and exit\n", stdout);
            std::exit(0);
        }
    const char* name = program_invocation_short_name;
    int plain = 0;
    for (int i = 1; i < argc; ++i) {
        const char* a = argv[i];
        if (google_benchmark && !std::strncmp(a, "--benchmark_", 12)) continue;
        const Flag* f = nullptr;
        for (const Flag& g : flags)
            if (!std::strcmp(a, g.name)) f = &g;
        if (f) {
            if (f->takes_value && ++i >= argc) {
                std::fprintf(stderr, "%s: %s needs a value (--help for usage)\n", name, a);
                std::exit(2);
            }
            continue;
        }
        if (a[0] != '-' && plain < positional) {
            ++plain;
            continue;
        }
        std::fprintf(stderr, "%s: unknown %s '%s' (--help for usage)\n", name, a[0] == '-' ? "option" : "argument", a);
        std::exit(2);
    }
}

}  // namespace bench
