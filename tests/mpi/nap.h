/*
 * nap.h — the clock of the MPI test programs in tests/mpi: CLOCK_MONOTONIC
 * seconds, and a sleep that a signal cannot cut short.
 */
#ifndef WEFT_TESTS_MPI_NAP_H
#define WEFT_TESTS_MPI_NAP_H

#include <time.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A signal (the drain's, or weft's wake-ups) ends a nanosleep early: sleep
 * until the time has really passed. */
static void nap(double seconds) {
    const double until = now_s() + seconds;
    for (double left = seconds; left > 0; left = until - now_s()) {
        const struct timespec t = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
        nanosleep(&t, NULL);
    }
}

#endif
