/* raw_enums.c — comm.h calls with any int as a datatype or operation, as a
 * C caller may pass them (in C an enum argument is just an int). In C++ a
 * value outside an enum's range is undefined behaviour on the caller's
 * side, so the C++ tests go through these to pass -1 or 1000. */
#include "tests/mp/raw_enums.h"

weft_status_t mp_raw_send(weft_comm_t c, const void* buf, size_t count, int type, uint32_t dest, int32_t tag) {
    return weft_send(c, buf, count, (weft_datatype_t)type, dest, tag);
}

weft_status_t mp_raw_irecv(weft_comm_t c, void* buf, size_t count, int type, int32_t source, int32_t tag,
                           weft_request_t* req) {
    return weft_irecv(c, buf, count, (weft_datatype_t)type, source, tag, req);
}

weft_status_t mp_raw_datatype_size(int type, size_t* bytes) { return weft_datatype_size((weft_datatype_t)type, bytes); }

weft_status_t mp_raw_status_count(const weft_msg_status_t* s, int type, size_t* count) {
    return weft_msg_status_count(s, (weft_datatype_t)type, count);
}

weft_status_t mp_raw_allreduce(weft_comm_t c, const void* sendbuf, void* recvbuf, size_t count, int type, int op) {
    return weft_allreduce(c, sendbuf, recvbuf, count, (weft_datatype_t)type, (weft_op_t)op);
}

weft_status_t mp_raw_bcast(weft_comm_t c, void* buf, size_t count, int type, uint32_t root) {
    return weft_bcast(c, buf, count, (weft_datatype_t)type, root);
}

weft_status_t mp_raw_allgather(weft_comm_t c, const void* sendbuf, size_t count, int type, void* recvbuf) {
    return weft_allgather(c, sendbuf, count, (weft_datatype_t)type, recvbuf);
}

weft_status_t mp_raw_get_failed(weft_comm_t c, int which, int kind, uint32_t* ranks, size_t capacity, size_t* count) {
    return weft_comm_get_failed(c, (weft_failed_set_t)which, (weft_failed_kind_t)kind, ranks, capacity, count);
}
