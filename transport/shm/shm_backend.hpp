// shm_backend.hpp — what the shm backend's control path (shm_backend.cpp)
// takes from its datapath (shm_datapath.cpp).
#pragma once

#include "transport/backend.hpp"

#include <cstddef>
#include <cstdint>

namespace weft::shm {

// Copies len bytes between our `local` and `remote` in process pid
// (process_vm_writev when write, else process_vm_readv).
Status cma_copy(int32_t pid, void* local, uint64_t remote, size_t len, bool write);

// Windows in the peers' mapped heaps (weft_window_allocate): memcpy and CPU
// atomics.
extern const RmaOps direct_ops;
// Windows over memory the program registered: cross-memory attach, no atomics.
extern const RmaOps cma_ops;

}  // namespace weft::shm
