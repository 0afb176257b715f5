/*
 * c_abi_check.c — the public headers compile as strict C99
 * (-std=c99 -Wall -Wextra -Werror -pedantic) and a plain C program can link
 * and use the C ABI. Run by ctest as unit.c_abi.check; exits non-zero on the
 * first failed check.
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <weft/bootstrap.h>
#include <weft/ckpt.h>
#include <weft/comm.h>
#include <weft/drain.h>
#include <weft/state_window.h>
#include <weft/weft.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            ++failures;                                                              \
        }                                                                            \
    } while (0)

int main(void) {
    weft_context_t ctx = NULL;
    uint32_t rank = 99, size = 99;
    weft_status_t st;
    int s;

    /* Every status has a text, and so does anything a C caller may pass. */
    for (s = WEFT_OK; s <= WEFT_ERR_LAST_; ++s) {
        const char* t = weft_strerror((weft_status_t)s);
        CHECK(t != NULL && t[0] != '\0');
    }
    CHECK(weft_strerror((weft_status_t)1000) != NULL && weft_strerror((weft_status_t)1000)[0] != '\0');
    CHECK(weft_strerror((weft_status_t)-1) != NULL && weft_strerror((weft_status_t)-1)[0] != '\0');

    CHECK(weft_rank(NULL, &rank) == WEFT_ERR_NOT_INITIALIZED);

    st = weft_init(&ctx);
    if (st != WEFT_OK) {
        fprintf(stderr, "weft_init: %s\n", weft_strerror(st));
        return 1;
    }
    CHECK(weft_rank(ctx, &rank) == WEFT_OK && rank == 0);
    CHECK(weft_size(ctx, &size) == WEFT_OK && size == 1);
    CHECK(weft_rank(ctx, NULL) == WEFT_ERR_INVALID_ARG);

    /* The state window's layout macros are usable from C. */
    {
        weft_window_t sw = NULL;
        uint64_t magic = 0;
        CHECK(weft_state_window(ctx, &sw) == WEFT_OK);
        CHECK(weft_get(sw, 0, WEFT_STATE_MAGIC_OFF, &magic, sizeof magic) == WEFT_OK);
        CHECK(magic == WEFT_STATE_MAGIC);
        CHECK(WEFT_STATE_CLOCK_OFF(1, WEFT_STATE_CLOCK_TARGET) ==
              (uint64_t)WEFT_STATE_CLOCKS_OFF + WEFT_STATE_LINE + 8);
    }

    /* comm.h from C: a one-rank world, a message to self, an allreduce. */
    {
        weft_comm_t world = NULL, dup = NULL;
        weft_request_t req = NULL;
        weft_msg_status_t status;
        int64_t out = -7, in = 0, sum = 0;
        size_t count = 0;
        CHECK(weft_comm_world(ctx, &world) == WEFT_OK);
        CHECK(weft_comm_dup(world, &dup) == WEFT_OK);
        CHECK(weft_irecv(dup, &in, 1, WEFT_INT64, WEFT_ANY_SOURCE, WEFT_ANY_TAG, &req) == WEFT_OK);
        CHECK(weft_send(dup, &out, 1, WEFT_INT64, 0, 5) == WEFT_OK);
        CHECK(weft_request_wait(&req, &status) == WEFT_OK && req == NULL);
        CHECK(in == -7 && status.source == 0 && status.tag == 5);
        CHECK(weft_msg_status_count(&status, WEFT_INT64, &count) == WEFT_OK && count == 1);
        CHECK(weft_allreduce(dup, &out, &sum, 1, WEFT_INT64, WEFT_OP_SUM) == WEFT_OK && sum == -7);
        CHECK(weft_allreduce(dup, &out, &sum, 1, WEFT_DOUBLE, WEFT_OP_BAND) == WEFT_ERR_INVALID_ARG);
        CHECK(weft_comm_free(&dup) == WEFT_OK && dup == NULL);
        CHECK(weft_comm_free(&world) == WEFT_ERR_INVALID_ARG);
        {
            /* The predefined error handlers are objects of the library. */
            weft_errhandler_t eh = NULL;
            int same = 0;
            CHECK(weft_comm_get_errhandler(world, &eh) == WEFT_OK);
            CHECK(weft_errhandler_compare(eh, WEFT_ERRORS_RETURN, &same) == WEFT_OK && same == 1);
            CHECK(weft_errhandler_free(&eh) == WEFT_OK && eh == NULL);
        }
    }

    {
        /* A protected region survives a checkpoint and a restart. */
        char dir[] = "/tmp/weft-c-abi-XXXXXX";
        uint64_t state[4] = {1, 2, 3, 4};
        weft_ckpt_profile_t prof;
        weft_restart_info_t info;
        CHECK(mkdtemp(dir) != NULL);
        CHECK(weft_ckpt_region_register(ctx, 7, state, sizeof state) == WEFT_OK);
        CHECK(weft_ckpt_region_register(ctx, 7, state, sizeof state) == WEFT_ERR_BUSY);
        CHECK(weft_restart(ctx, dir, &info) == WEFT_ERR_NOT_FOUND && info.restarted == 0);
        CHECK(weft_checkpoint(ctx, dir, &prof) == WEFT_OK && prof.generation == 1 && prof.bytes > sizeof state);
        state[0] = state[3] = 99;
        CHECK(weft_restart(ctx, dir, &info) == WEFT_OK && info.restarted == 1 && info.generation == 1);
        CHECK(state[0] == 1 && state[3] == 4);
        CHECK(weft_checkpoint(ctx, NULL, NULL) == WEFT_ERR_INVALID_ARG);
        CHECK(weft_ckpt_region_remove(ctx, 7) == WEFT_OK);
        CHECK(weft_ckpt_region_remove(ctx, 7) == WEFT_ERR_NOT_FOUND);
        {
            /* A posted receive, its handle and buffer in a region, through a
             * checkpoint flushed to a second directory, and a restart: the
             * saved handle names the receive again. */
            struct {
                weft_request_t req;
                uint64_t inbox;
            } held = {NULL, 0};
            char second[] = "/tmp/weft-c-abi-XXXXXX";
            char cmd[128];
            const uint64_t v = 42;
            weft_ckpt_flush_info_t fi;
            weft_comm_t world = NULL;
            CHECK(weft_comm_world(ctx, &world) == WEFT_OK);
            CHECK(mkdtemp(second) != NULL);
            CHECK(weft_ckpt_flush_dir(ctx, second) == WEFT_OK);
            CHECK(weft_ckpt_region_register(ctx, 8, &held, sizeof held) == WEFT_OK);
            CHECK(weft_irecv(world, &held.inbox, 1, WEFT_UINT64, 0, 5, &held.req) == WEFT_OK);
            CHECK(weft_checkpoint(ctx, dir, &prof) == WEFT_OK && prof.receives == 1);
            CHECK(weft_ckpt_flush_wait(ctx, prof.generation, 60000, &fi) == WEFT_OK);
            CHECK(weft_request_cancel(held.req) == WEFT_OK);
            CHECK(weft_request_wait(&held.req, NULL) == WEFT_OK && held.req == NULL);
            CHECK(weft_restart(ctx, dir, &info) == WEFT_OK && info.receives == 1 && held.req != NULL);
            CHECK(weft_send(world, &v, 1, WEFT_UINT64, 0, 5) == WEFT_OK);
            CHECK(weft_request_wait(&held.req, NULL) == WEFT_OK && held.inbox == 42);
            CHECK(weft_ckpt_flush_dir(ctx, NULL) == WEFT_OK);
            CHECK(weft_ckpt_region_remove(ctx, 8) == WEFT_OK);
            snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", dir, second);
            CHECK(system(cmd) == 0);
        }
    }

    CHECK(weft_finalize(ctx) == WEFT_OK);
    CHECK(weft_finalize(ctx) == WEFT_ERR_NOT_INITIALIZED);
    if (failures) return 1;
    printf("c_abi_check: rank %u of %u, ok\n", (unsigned)rank, (unsigned)size);
    return 0;
}
