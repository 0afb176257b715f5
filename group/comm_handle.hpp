// comm_handle.hpp — a communicator's C handle: a place in a table of
// shells, not an address.
//
// A weft_comm_t is a number, generation << 32 | (place + 1), that names
// one shell of a process-wide table whose chunks never move. The shell
// outlives its communicator: a freed or finalized handle finds a dead
// shell, or a shell whose generation moved on, and is refused with
// WEFT_ERR_NOT_INITIALIZED instead of being dereferenced. A place is
// reused, under a new generation, once its communicator is released.
//
// A number, not a pointer, because a restart re-creates a checkpointed
// communicator at the same place and generation (place()): the handles the
// program saved in its protected regions name it again in the new process
// (group/snapshot.hpp, docs/checkpoint.md "Runtime state"). A context's
// world takes the first free place when the context starts, under a
// generation no other communicator gets: like MPI_COMM_WORLD, a program
// that makes its contexts in the same order gets the same world handles,
// in a new process or after finalizing and initializing again.
//
// Thread safety: make/place/release under the table's mutex (creation and
// free are not hot); shell_of, on every call, takes no lock.
#pragma once

#include "transport/common.hpp"

#include <weft/comm.h>

#include <atomic>
#include <cstdint>

struct weft_errhandler;

namespace weft::group {

class Engine;
struct Comm;

struct CommShell {
    static constexpr uint64_t live_magic = 0x5745465443304d4dull;
    static constexpr uint64_t dead_magic = 0x5745465443444d4dull;
    uint64_t magic = dead_magic;
    // The handle that names this shell now (0: never used). Atomic: a
    // lookup on one thread may meet a reuse on another.
    std::atomic<uint64_t> value{0};
    Engine* engine = nullptr;
    Comm* comm = nullptr;
    // null: WEFT_ERRORS_RETURN. Written under the registry mutex; atomic so
    // that a failed call can see "no handler" without it (group/errhandler.cpp).
    std::atomic<weft_errhandler*> errhandler{nullptr};
};

// Places a process can hold at once (chunks of 256).
constexpr uint32_t max_comm_handles = 4096 * 256;

// A live shell for c at the lowest free place, c.handle set; std::bad_alloc
// (guarded: WEFT_ERR_NO_MEMORY) when every place is taken. `world`: the
// world's fixed generation.
CommShell& make_comm_shell(Engine& e, Comm& c, bool world = false);
// Restart: c's shell at exactly the place and generation of `handle`.
// False if that place is live here.
bool place_comm_shell(Engine& e, Comm& c, uint64_t handle);
// Whether place_comm_shell(handle) would succeed (restart's check).
bool comm_place_free(uint64_t handle);
// The communicator is gone: the shell is dead (if it was not already) and
// its place free for a new generation.
void release_comm_shell(CommShell& s);

// The shell a handle names, live or dead; null for a handle that names
// none (NULL, made up, or of a place reused since).
CommShell* shell_of(weft_comm_t h);
inline weft_comm_t comm_handle(const CommShell& s) {
    return reinterpret_cast<weft_comm_t>(static_cast<uintptr_t>(s.value.load(std::memory_order_relaxed)));
}
inline uint64_t comm_handle_value(weft_comm_t h) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(h)); }
// The live communicator a handle names, or null.
inline Comm* comm_of(weft_comm_t h) {
    CommShell* s = shell_of(h);
    return s && s->magic == CommShell::live_magic ? s->comm : nullptr;
}

}  // namespace weft::group
