/*
 * group.c — PMIx-style process groups with weft (weft/group.h), doing
 * what OpenPMIx's examples/group.c does: ranks 0, 2 and 3 construct a
 * group with a context ID (rank 0 also gives the final order 2, 0, 3),
 * each contributes a little info, every member prints the membership and
 * the context ID, and they destruct it. Then ranks 1..3 are added members
 * of a group that rank 0 leads alone (the add-members form), and last, as
 * OpenPMIx's examples/group_bootstrap.c, rank 0 and the last rank each know
 * only that there are two leaders and add half of the others. Run with at
 * least 4 ranks (up to 64):
 *
 *     weft-run -n 4 ./weft_group_c
 *
 * Exits 0 only if every check held.
 */
#include <weft/group.h>
#include <weft/version.h>

#include <stdio.h>
#include <string.h>

static int failed = 0;

#define CHECK(expr)                                                                         \
    do {                                                                                    \
        weft_status_t st_ = (expr);                                                         \
        if (st_ != WEFT_OK) {                                                               \
            fprintf(stderr, "group.c:%d: %s -> %s\n", __LINE__, #expr, weft_strerror(st_)); \
            failed = 1;                                                                     \
            goto done;                                                                      \
        }                                                                                   \
    } while (0)

static void on_event(void* arg, weft_group_event_t ev, const char* name, weft_proc_t p) {
    (void)arg;
    fprintf(stderr, "group %s: event %d for job %u rank %u\n", name, (int)ev, p.job, p.rank);
}

int main(void) {
    weft_context_t ctx = NULL;
    uint32_t rank = 0, size = 0, job = 0;
    uint64_t handler = 0;
    if (weft_init(&ctx) != WEFT_OK) return 1;
    CHECK(weft_rank(ctx, &rank));
    CHECK(weft_size(ctx, &size));
    CHECK(weft_job_id(ctx, &job));
    if (size < 4) {
        if (rank == 0) fprintf(stderr, "group.c needs at least 4 ranks\n");
        failed = 1;
        goto done;
    }
#ifdef WEFT_CAP_GROUP_FT
    if (rank == 0) printf("weft %d.%d: group fault tolerance available\n", WEFT_VERSION_MAJOR, WEFT_VERSION_MINOR);
#endif
    CHECK(weft_group_event_register(ctx, on_event, NULL, &handler));

    /* 1. The collective method: ranks 0, 2, 3, each naming all three. */
    if (rank == 0 || rank == 2 || rank == 3) {
        weft_proc_t procs[3] = {{job, 0}, {job, 2}, {job, 3}};
        weft_proc_t order[3] = {{job, 2}, {job, 0}, {job, 3}};
        char info[32];
        weft_group_options_t opts;
        weft_proc_t members[3];
        size_t n = 0, i;
        uint64_t cid = 0;
        memset(&opts, 0, sizeof opts);
        snprintf(info, sizeof info, "rank %u says hello", rank);
        opts.flags = WEFT_GROUP_ASSIGN_CONTEXT_ID;
        opts.info = info;
        opts.info_len = strlen(info) + 1;
        opts.final_order = order; /* every leader that gives one must give the same */
        opts.n_final_order = 3;
        CHECK(weft_group_construct(ctx, "ourgroup", procs, 3, &opts));
        CHECK(weft_group_members(ctx, "ourgroup", members, 3, &n));
        CHECK(weft_group_context_id(ctx, "ourgroup", &cid));
        for (i = 0; i < n; ++i) {
            const void* p = NULL;
            size_t len = 0;
            CHECK(weft_group_info(ctx, "ourgroup", (uint32_t)i, &p, &len));
            if (rank == 0)
                printf("ourgroup[%zu] = job %u rank %u: \"%s\"\n", i, members[i].job, members[i].rank, (const char*)p);
        }
        if (n != 3 || members[0].rank != 2 || members[1].rank != 0 || members[2].rank != 3) {
            fprintf(stderr, "rank %u: unexpected membership\n", rank);
            failed = 1;
        }
        printf("rank %u: ourgroup has %zu members, context id %#llx\n", rank, n, (unsigned long long)cid);
        CHECK(weft_group_destruct(ctx, "ourgroup", 0));
    } else {
        /* Not a participant: told so at once. */
        weft_proc_t procs[3] = {{job, 0}, {job, 2}, {job, 3}};
        if (weft_group_construct(ctx, "ourgroup", procs, 3, NULL) != WEFT_ERR_NOT_A_MEMBER) failed = 1;
    }

    /* 2. Added members: rank 0 leads alone and adds everyone else, who
     * call with procs = NULL. */
    {
        weft_proc_t leader = {job, 0};
        weft_proc_t added[64];
        weft_group_options_t opts;
        uint32_t gsize = 0, r, nadd = 0;
        memset(&opts, 0, sizeof opts);
        for (r = 1; r < size && nadd < 64; ++r) {
            added[nadd].job = job;
            added[nadd].rank = r;
            ++nadd;
        }
        if (rank == 0) {
            opts.add_members = added;
            opts.n_add_members = nadd;
            CHECK(weft_group_construct(ctx, "everyone", &leader, 1, &opts));
        } else if (rank <= nadd) {
            CHECK(weft_group_construct(ctx, "everyone", NULL, 0, NULL));
        }
        if (rank <= nadd) {
            CHECK(weft_group_size(ctx, "everyone", &gsize));
            if (gsize != nadd + 1) failed = 1;
            CHECK(weft_group_destruct(ctx, "everyone", 0));
        }
    }

    /* 3. Bootstrap (OpenPMIx's group_bootstrap.c): rank 0 and the last rank
     * know only that there are two leaders; each adds half of the rest. */
    {
        weft_proc_t me = {job, rank};
        weft_proc_t added[64];
        weft_group_options_t opts;
        uint32_t gsize = 0, r, nadd = 0, last = size - 1;
        memset(&opts, 0, sizeof opts);
        for (r = 1; r < last && nadd < 64; ++r)
            if ((r % 2 == 1) == (rank == 0)) {
                added[nadd].job = job;
                added[nadd].rank = r;
                ++nadd;
            }
        if (rank == 0 || rank == last) {
            opts.bootstrap_leaders = 2;
            opts.add_members = added;
            opts.n_add_members = nadd;
            CHECK(weft_group_construct(ctx, "bootstrapped", &me, 1, &opts));
        } else {
            CHECK(weft_group_construct(ctx, "bootstrapped", NULL, 0, NULL));
        }
        CHECK(weft_group_size(ctx, "bootstrapped", &gsize));
        if (gsize != size) failed = 1;
        if (rank == 0) printf("bootstrapped: %u members\n", gsize);
        CHECK(weft_group_destruct(ctx, "bootstrapped", 0));
    }

done:
    if (handler) weft_group_event_deregister(ctx, handler);
    weft_finalize(ctx);
    if (rank == 0) printf("group.c: %s\n", failed ? "FAILED" : "ok");
    return failed;
}
