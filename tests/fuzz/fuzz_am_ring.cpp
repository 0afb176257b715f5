// fuzz_am_ring.cpp — the shm active-message ring consumer on a ring whose
// shared memory holds arbitrary bytes (a buggy or hostile writer): the input
// gives head, tail and the data area. poll() must report corruption and
// stop, never read outside the ring or loop forever.
#include "transport/shm/am_ring.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

using namespace weft::shm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    constexpr uint64_t capacity = 1024;
    if (size < 16) return 0;
    // Exactly control + capacity bytes, so ASan flags any read past the end;
    // 64-byte aligned like the real segment (RingControl is alignas(64)).
    static_assert(ring_bytes(capacity) % 64 == 0);
    auto* mem = static_cast<uint8_t*>(std::aligned_alloc(64, ring_bytes(capacity)));
    auto* ctl = new (mem) RingControl{};
    uint64_t head, tail;
    std::memcpy(&head, data, 8);
    std::memcpy(&tail, data + 8, 8);
    // Keep both near each other sometimes, so that valid-looking records are
    // explored as well as wild offsets.
    if (head & 1) head = tail + (head >> 1) % (2 * capacity);
    ctl->head.store(head);
    ctl->tail.store(tail);
    uint8_t* ring_data = mem + sizeof(RingControl);
    std::memset(ring_data, 0, capacity);
    std::memcpy(ring_data, data + 16, size - 16 < capacity ? size - 16 : capacity);
    RingConsumer c(mem, capacity);
    std::vector<uint8_t> scratch;
    Record r;
    // Each poll consumes at least 16 bytes or resets the ring to empty, so a
    // well-behaved consumer finishes within capacity/16 + 1 records.
    int n = 0;
    while (c.poll(scratch, r)) {
        if (++n > static_cast<int>(capacity / 16) + 2) __builtin_trap();
    }
    ctl->~RingControl();
    std::free(mem);
    return 0;
}
