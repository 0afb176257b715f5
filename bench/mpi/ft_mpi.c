/* ft_mpi.c — bench/ft_bench.cpp's failure-free workload on an MPI library
 * with the ULFM interface (MPICH's MPIX_Comm_agree / MPIX_Comm_shrink):
 *   mpiexec.mpich -n 8 ./ft_mpich [--reps 200]
 * Rank 0 prints RESULT lines in ft_bench's format: medians over the
 * repetitions, each after a barrier, with the ratio to an 8-byte allreduce
 * timed in the same run. MPICH has no MPI_Comm_validate_all (the seed's
 * validate_global); MPIX_Comm_failure_ack + MPIX_Comm_agree is what ULFM
 * offers in its place and is not timed here. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

static void check(int rc, const char* what) {
    if (rc != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, s, &len);
        fprintf(stderr, "ft_mpi: %s: %s\n", what, s);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

enum { op_allreduce, op_agree, op_shrink };

static double time_op(int op, int reps, double* us) {
    for (int i = 0; i < reps; ++i) {
        check(MPI_Barrier(MPI_COMM_WORLD), "barrier");
        double t0 = MPI_Wtime();
        if (op == op_allreduce) {
            long one = 1, sum = 0;
            check(MPI_Allreduce(&one, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD), "allreduce");
        } else if (op == op_agree) {
            int flag = 1;
            check(MPIX_Comm_agree(MPI_COMM_WORLD, &flag), "MPIX_Comm_agree");
        } else {
            MPI_Comm s;
            check(MPIX_Comm_shrink(MPI_COMM_WORLD, &s), "MPIX_Comm_shrink");
            check(MPI_Comm_free(&s), "free");
        }
        us[i] = (MPI_Wtime() - t0) * 1e6;
    }
    qsort(us, (size_t)reps, sizeof *us, cmp);
    return us[reps / 2];
}

int main(int argc, char** argv) {
    int reps = 200;
    for (int i = 1; i < argc; ++i)
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    if (reps < 1) reps = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double* us = malloc(sizeof(double) * (size_t)reps);
    const double allreduce = time_op(op_allreduce, reps, us);
    const double agree = time_op(op_agree, reps, us);
    const double shrink = time_op(op_shrink, reps, us);
    if (rank == 0) {
        printf("RESULT lib=mpich ranks=%d failures=0 op=allreduce8 median_us=%.2f vs_allreduce=1.0\n", size, allreduce);
        printf("RESULT lib=mpich ranks=%d failures=0 op=agree median_us=%.2f vs_allreduce=%.1f\n", size, agree,
               agree / allreduce);
        printf("RESULT lib=mpich ranks=%d failures=0 op=shrink median_us=%.2f vs_allreduce=%.1f\n", size, shrink,
               shrink / allreduce);
    }
    free(us);
    MPI_Finalize();
    return 0;
}
