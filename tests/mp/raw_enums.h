/* raw_enums.h — see raw_enums.c. */
#ifndef WEFT_TESTS_MP_RAW_ENUMS_H
#define WEFT_TESTS_MP_RAW_ENUMS_H

#include <weft/comm.h>

#ifdef __cplusplus
extern "C" {
#endif

weft_status_t mp_raw_send(weft_comm_t c, const void* buf, size_t count, int type, uint32_t dest, int32_t tag);
weft_status_t mp_raw_irecv(weft_comm_t c, void* buf, size_t count, int type, int32_t source, int32_t tag,
                           weft_request_t* req);
weft_status_t mp_raw_datatype_size(int type, size_t* bytes);
weft_status_t mp_raw_status_count(const weft_msg_status_t* s, int type, size_t* count);
weft_status_t mp_raw_allreduce(weft_comm_t c, const void* sendbuf, void* recvbuf, size_t count, int type, int op);
weft_status_t mp_raw_bcast(weft_comm_t c, void* buf, size_t count, int type, uint32_t root);
weft_status_t mp_raw_allgather(weft_comm_t c, const void* sendbuf, size_t count, int type, void* recvbuf);
weft_status_t mp_raw_get_failed(weft_comm_t c, int which, int kind, uint32_t* ranks, size_t capacity, size_t* count);

#ifdef __cplusplus
}
#endif
#endif
