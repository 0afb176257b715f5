/*
 * group_invite.c — the invite method of weft/group.h, doing what
 * OpenPMIx's examples/asyncgroup.c does: every process registers a group
 * event handler; rank 0 invites all the others; each invitee's handler
 * accepts with the non-blocking join (a blocking one there would be
 * WEFT_ERR_WOULD_BLOCK); every member waits for CONSTRUCT_COMPLETE, prints
 * the membership and destructs the group.
 *
 *     weft-run -n 4 ./weft_group_invite_c
 *
 * Exits 0 only if every check held.
 */
#include <weft/group.h>

#include <stdio.h>
#include <string.h>

struct state {
    weft_group_op_t join; /* the accepted join, waited for in main */
    weft_status_t joined; /* what join_nb returned */
    int invited, complete;
};

static weft_context_t ctx;

static void on_event(void* arg, weft_group_event_t ev, const char* name, weft_proc_t p) {
    struct state* s = (struct state*)arg;
    if (ev == WEFT_GROUP_EVENT_INVITED) {
        /* From inside the handler: the non-blocking join only. */
        s->invited = 1;
        s->joined = weft_group_join_nb(ctx, name, p, 1, NULL, &s->join);
    }
    if (ev == WEFT_GROUP_EVENT_CONSTRUCT_COMPLETE) s->complete = 1;
}

int main(void) {
    struct state s;
    uint32_t rank = 0, size = 0, job = 0, r, n = 0;
    uint64_t handler = 0;
    int failed = 0;
    memset(&s, 0, sizeof s);
    s.joined = WEFT_ERR_NOT_FOUND;
    if (weft_init(&ctx) != WEFT_OK) return 1;
    weft_rank(ctx, &rank);
    weft_size(ctx, &size);
    weft_job_id(ctx, &job);
    if (size < 2 || size > 64 || weft_group_event_register(ctx, on_event, &s, &handler) != WEFT_OK) {
        fprintf(stderr, "group_invite.c: needs 2 to 64 ranks\n");
        weft_finalize(ctx);
        return 1;
    }
    /* Everyone's handler is in place before rank 0 invites. */
    if (weft_bootstrap_barrier(ctx) != WEFT_OK) failed = 1;
    if (rank == 0) {
        weft_proc_t invitees[64];
        weft_group_options_t opts;
        weft_status_t st;
        for (r = 1; r < size; ++r) {
            invitees[r - 1].job = job;
            invitees[r - 1].rank = r;
        }
        memset(&opts, 0, sizeof opts);
        opts.flags = WEFT_GROUP_ASSIGN_CONTEXT_ID;
        /* Returns once every invitee answered. */
        st = weft_group_invite(ctx, "asyncgroup", invitees, size - 1, &opts);
        if (st != WEFT_OK) {
            fprintf(stderr, "invite: %s\n", weft_strerror(st));
            failed = 1;
        }
    } else {
        /* The handler runs from weft's progress: wait for the invitation. */
        for (r = 0; !s.invited && r < 30000; ++r) weft_wait(ctx, 1000000); /* up to about 30 s */
        if (!s.invited || s.joined != WEFT_OK || weft_group_op_wait(&s.join) != WEFT_OK) failed = 1;
    }
    for (r = 0; !failed && !s.complete && r < 30000; ++r) weft_wait(ctx, 1000000);
    if (!s.complete) failed = 1;
    if (!failed) {
        uint64_t cid = 0;
        if (weft_group_size(ctx, "asyncgroup", &n) != WEFT_OK || n != size) failed = 1;
        if (weft_group_context_id(ctx, "asyncgroup", &cid) != WEFT_OK) failed = 1;
        printf("rank %u: asyncgroup complete, %u members, context id %#llx\n", rank, n, (unsigned long long)cid);
        if (weft_group_destruct(ctx, "asyncgroup", 0) != WEFT_OK) failed = 1;
    }
    weft_group_event_deregister(ctx, handler);
    weft_finalize(ctx);
    if (rank == 0) printf("group_invite.c: %s\n", failed ? "FAILED" : "ok");
    return failed;
}
