// am_ring.cpp — SPSC ring (see am_ring.hpp).
#include "transport/shm/am_ring.hpp"

#include "transport/common.hpp"

#include <cstring>

namespace weft::shm {

RingProducer::RingProducer(void* ring, uint64_t capacity)
    : ctl_(static_cast<RingControl*>(ring)),
      data_(static_cast<uint8_t*>(ring) + sizeof(RingControl)),
      capacity_(capacity) {
    WEFT_ASSERT((capacity & (capacity - 1)) == 0 && capacity >= 1024);
    head_ = ctl_->head.load(std::memory_order_relaxed);
    tail_cache_ = ctl_->tail.load(std::memory_order_acquire);
}

bool RingProducer::try_push(RecordType type, uint16_t id, uint64_t aux, const void* a, uint32_t alen, const void* b,
                            uint32_t blen) {
    const uint64_t len = uint64_t(alen) + blen;
    const uint64_t need = sizeof(RecordHeader) + round_up(len, record_align);
    if (need > capacity_ / 2) return false;  // caller checks max_payload()
    const uint64_t pos = head_ & (capacity_ - 1);
    const uint64_t to_end = capacity_ - pos;
    const uint64_t total = need <= to_end ? need : to_end + need;  // pad first if it would wrap
    if (head_ + total - tail_cache_ > capacity_) {
        tail_cache_ = ctl_->tail.load(std::memory_order_acquire);
        if (head_ + total - tail_cache_ > capacity_) return false;
    }
    uint64_t h = head_;
    if (need > to_end) {
        RecordHeader pad{static_cast<uint32_t>(to_end - sizeof(RecordHeader)), static_cast<uint16_t>(RecordType::pad),
                         0, 0};
        std::memcpy(data_ + pos, &pad, sizeof pad);
        h += to_end;
    }
    uint8_t* rec = data_ + (h & (capacity_ - 1));
    RecordHeader hdr{static_cast<uint32_t>(len), static_cast<uint16_t>(type), id, aux};
    std::memcpy(rec, &hdr, sizeof hdr);
    if (alen) std::memcpy(rec + sizeof hdr, a, alen);
    if (blen) std::memcpy(rec + sizeof hdr + alen, b, blen);
    head_ = h + need;
    // Release: the consumer that sees the new head sees the record bytes.
    ctl_->head.store(head_, std::memory_order_release);
    return true;
}

RingConsumer::RingConsumer(void* ring, uint64_t capacity)
    : ctl_(static_cast<RingControl*>(ring)),
      data_(static_cast<uint8_t*>(ring) + sizeof(RingControl)),
      capacity_(capacity) {
    tail_ = ctl_->tail.load(std::memory_order_relaxed);
}

bool RingConsumer::poll(std::vector<uint8_t>& scratch, Record& out) {
    // Ends: each pass returns (the ring is empty, a record, or corruption
    // dropped) except one that skips a pad record to the ring's end, which
    // a producer writes at most once a lap.
    for (;;) {
        const uint64_t head = ctl_->head.load(std::memory_order_acquire);
        if (head == tail_) return false;
        const uint64_t pos = tail_ & (capacity_ - 1);
        RecordHeader hdr{};
        // A producer never publishes more than the ring holds, and records
        // start 16-byte aligned; anything else is corruption and must not
        // make us loop over stale laps or read past the end.
        const bool sane = head - tail_ <= capacity_ && (tail_ & (record_align - 1)) == 0;
        if (sane) std::memcpy(&hdr, data_ + pos, sizeof hdr);
        const uint64_t need = sizeof(RecordHeader) + round_up(hdr.len, record_align);
        if (!sane || need > capacity_ - pos || need > head - tail_ ||
            (hdr.type == static_cast<uint16_t>(RecordType::pad) && need != capacity_ - pos)) {
            // Only a bug or a foreign writer gets here. Drop everything
            // published so far rather than read out of bounds.
            WEFT_LOG(error, "shm ring: corrupted record (len %u type %u at %llu); dropping %llu bytes", hdr.len,
                     hdr.type, static_cast<unsigned long long>(tail_), static_cast<unsigned long long>(head - tail_));
            tail_ = head;
            ctl_->tail.store(tail_, std::memory_order_release);
            out.header = RecordHeader{0, 0, 0, 0};
            out.payload = nullptr;
            return true;
        }
        if (hdr.type == static_cast<uint16_t>(RecordType::pad)) {
            tail_ += need;
            continue;
        }
        if (scratch.size() < hdr.len) scratch.resize(hdr.len);
        if (hdr.len) std::memcpy(scratch.data(), data_ + pos + sizeof hdr, hdr.len);
        tail_ += need;
        // Release: the producer may reuse these bytes only after our copy.
        ctl_->tail.store(tail_, std::memory_order_release);
        out.header = hdr;
        out.payload = scratch.data();
        return true;
    }
}

}  // namespace weft::shm
