// check.hpp — a benchmark cannot go on after a failed weft call: say which
// call and why, and exit (bench_util.hpp stays free of weft for the floor).
#pragma once

#include <weft/weft.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace bench {

inline void check(weft_status_t st, const char* what) {
    if (st == WEFT_OK) return;
    std::fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what, weft_strerror(st));
    std::exit(1);
}

}  // namespace bench
