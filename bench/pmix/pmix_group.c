/*
 * pmix_group.c — the PMIx side of bench/run_group_compare.sh: the same
 * loop as bench/group_bench.cpp, on PMIx groups under prterun. Every rank
 * is a leader (collective method); each construct asks for a context ID
 * and carries 64 bytes of group info per member; then destruct. Rank 0
 * prints the medians of construct, destruct and construct+destruct back to
 * back, and of a PMIx_Fence (the baseline), in microseconds.
 *   prterun --allow-run-as-root --map-by :OVERSUBSCRIBE -n 8 ./pmix_group [reps]
 * Built against the anchors' OpenPMIx (../shared/anchors): never part of
 * libweft.
 * Every construct names a fresh group ("bench-LOOP-REP"; its destruct names
 * the same): PRRTE 52d5e4b drops a contribution to a group ID it has already
 * released on a daemon that relays the rollup without hosting a member (the
 * HNP when prterun's node holds no rank), so the second construct of a
 * reused ID never returns across hosts (openpmix/prrte#2806 fixes it;
 * bench/RESULTS.md).
 */
#include <pmix.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}

static double median(double* v, int n) {
    qsort(v, n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void die(const char* what, pmix_status_t rc) {
    fprintf(stderr, "pmix_group: %s: %s\n", what, PMIx_Error_string(rc));
    exit(1);
}

int main(int argc, char** argv) {
    pmix_proc_t me, wild, *procs;
    pmix_value_t* val = NULL;
    pmix_status_t rc;
    uint32_t size, r;
    int reps = argc > 1 ? atoi(argv[1]) : 200, i;
    char blob[64];
    double *c_us, *d_us, *cd_us, *f_us;

    if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) die("PMIx_Init", rc);
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    if ((rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &val)) != PMIX_SUCCESS) die("PMIx_Get(JOB_SIZE)", rc);
    size = val->data.uint32;
    PMIX_VALUE_RELEASE(val);
    PMIX_PROC_CREATE(procs, size);
    for (r = 0; r < size; ++r) PMIX_LOAD_PROCID(&procs[r], me.nspace, r);
    memset(blob, (int)me.rank, sizeof blob);
    c_us = calloc(reps, sizeof *c_us);
    d_us = calloc(reps, sizeof *d_us);
    cd_us = calloc(reps, sizeof *cd_us);
    f_us = calloc(reps, sizeof *f_us);

    for (i = 0; i < reps; ++i) {
        double t0;
        PMIx_Fence(&wild, 1, NULL, 0);
        t0 = now_us();
        if ((rc = PMIx_Fence(&wild, 1, NULL, 0)) != PMIX_SUCCESS) die("PMIx_Fence", rc);
        f_us[i] = now_us() - t0;
    }
    for (int loop = 0; loop < 2; ++loop) {
        if (loop == 1) PMIx_Fence(&wild, 1, NULL, 0);
        for (i = 0; i < reps; ++i) {
            pmix_info_t info[2], grp;
            pmix_data_array_t darray;
            pmix_byte_object_t bo;
            pmix_info_t* results = NULL;
            char name[32];
            size_t nresults = 0;
            double t0;
            bo.bytes = blob;
            bo.size = sizeof blob;
            PMIX_INFO_LOAD(&grp, "weft.bench.info", &bo, PMIX_BYTE_OBJECT);
            darray.type = PMIX_INFO;
            darray.size = 1;
            darray.array = &grp;
            PMIX_INFO_LOAD(&info[0], PMIX_GROUP_ASSIGN_CONTEXT_ID, NULL, PMIX_BOOL);
            PMIX_INFO_LOAD(&info[1], PMIX_GROUP_INFO, &darray, PMIX_DATA_ARRAY);
            snprintf(name, sizeof name, "bench-%d-%d", loop, i);
            if (loop == 0) PMIx_Fence(&wild, 1, NULL, 0);
            t0 = now_us();
            if ((rc = PMIx_Group_construct(name, procs, size, info, 2, &results, &nresults)) != PMIX_SUCCESS)
                die("PMIx_Group_construct", rc);
            if (loop == 0) {
                c_us[i] = now_us() - t0;
                PMIx_Fence(&wild, 1, NULL, 0);
                t0 = now_us();
            }
            if ((rc = PMIx_Group_destruct(name, NULL, 0)) != PMIX_SUCCESS) die("PMIx_Group_destruct", rc);
            if (loop == 0)
                d_us[i] = now_us() - t0;
            else
                cd_us[i] = now_us() - t0;
            if (results) PMIX_INFO_FREE(results, nresults);
            PMIX_INFO_DESTRUCT(&info[1]);
            PMIX_INFO_DESTRUCT(&grp);
        }
    }
    if (me.rank == 0)
        printf(
            "RESULT pmix.group ranks=%u construct_us=%.1f destruct_us=%.1f construct_destruct_us=%.1f fence_us=%.1f\n",
            size, median(c_us, reps), median(d_us, reps), median(cd_us, reps), median(f_us, reps));
    PMIx_Finalize(NULL, 0);
    return 0;
}
