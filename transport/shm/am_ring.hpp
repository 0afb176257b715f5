// am_ring.hpp — a single-producer single-consumer byte ring in shared memory.
//
// One ring per (sender, receiver) pair lives in the receiver's segment, so a
// ring has exactly one writing process and one reading process and needs no
// lock: the producer owns `head`, the consumer owns `tail`, each on its own
// cache line. Records are 16-byte aligned: a 16-byte header {len, type, id,
// aux} and the payload. A record that would straddle the end of the ring is
// preceded by a PAD record filling the rest, so every record is contiguous.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace weft::shm {

enum class RecordType : uint16_t {
    eager = 1,  // payload inline
    rts = 2,    // rendezvous: payload is {addr, len} in the sender's memory
    fin = 3,    // rendezvous done: aux is the sender's cookie
    pad = 4,    // filler up to the end of the ring
};

struct RingControl {
    alignas(64) std::atomic<uint64_t> head;  // bytes published (producer)
    alignas(64) std::atomic<uint64_t> tail;  // bytes consumed (consumer)
};
static_assert(sizeof(RingControl) == 128);

struct RecordHeader {
    uint32_t len;  // payload bytes
    uint16_t type;
    uint16_t id;
    uint64_t aux;
};
static_assert(sizeof(RecordHeader) == 16);

inline constexpr uint64_t record_align = 16;
inline constexpr uint64_t round_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

// Bytes of shared memory one ring needs (control + data).
inline constexpr uint64_t ring_bytes(uint64_t capacity) { return sizeof(RingControl) + capacity; }

class RingProducer {
public:
    RingProducer() = default;
    // `ring` points at the RingControl, followed by `capacity` data bytes.
    // capacity must be a power of two and a multiple of 16.
    RingProducer(void* ring, uint64_t capacity);
    // Largest payload a record can carry (so that it always fits eventually).
    uint64_t max_payload() const { return capacity_ / 2 - sizeof(RecordHeader); }
    // Publishes one record made of two payload pieces (either may be empty).
    // False when the ring lacks space now; nothing is written then.
    bool try_push(RecordType type, uint16_t id, uint64_t aux, const void* a, uint32_t alen, const void* b = nullptr,
                  uint32_t blen = 0);
    bool valid() const { return ctl_ != nullptr; }

private:
    RingControl* ctl_ = nullptr;
    uint8_t* data_ = nullptr;
    uint64_t capacity_ = 0;
    uint64_t head_ = 0;        // our own copy: only we write head
    uint64_t tail_cache_ = 0;  // last tail we read: refreshed only when short of space
};

// A consumed record: header and a copy of its payload.
struct Record {
    RecordHeader header;
    const uint8_t* payload;  // into the caller's scratch buffer
};

class RingConsumer {
public:
    RingConsumer() = default;
    RingConsumer(void* ring, uint64_t capacity);
    // Takes the next record, copying its payload into `scratch` and
    // releasing its ring space *before* returning, so the caller may run
    // code that consumes further records (reentrant progress). False when
    // the ring is empty. A corrupted header (impossible length) is reported
    // as type 0 and the ring is reset to empty.
    bool poll(std::vector<uint8_t>& scratch, Record& out);
    bool empty() const { return ctl_->head.load(std::memory_order_acquire) == tail_; }

private:
    RingControl* ctl_ = nullptr;
    uint8_t* data_ = nullptr;
    uint64_t capacity_ = 0;
    uint64_t tail_ = 0;
};

}  // namespace weft::shm
