// buffer_pool.hpp — where a message that arrived before its receive waits:
// blocks of power-of-two sizes, kept on free lists and reused, so an
// unexpected message costs one copy and no allocation in steady state
// (collectives' partners often send before a rank posts its receive).
//
// A Buffer owns its block and gives it back when it is destroyed or moved
// over. Blocks above the largest class (eager messages on a backend without
// zero copy, a drained rendezvous payload) are allocated and freed
// directly: their copy costs far more than the allocation. The free lists
// keep at most free_bytes_per_class bytes of each class, so a burst does
// not stay resident.
//
// Lifetime: every Buffer must be gone before its pool (the Engine declares
// its pool first, so the communicators' queues go before it).
// Thread affinity: the Engine's (the API lock when MULTIPLE).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace weft::group {

class BufferPool {
public:
    static constexpr unsigned min_shift = 6;  // 64 B: the smallest block
    static constexpr unsigned classes = 11;   // 64 B .. 64 KiB
    static constexpr size_t max_pooled = size_t(1) << (min_shift + classes - 1);
    static constexpr size_t free_bytes_per_class = 256 * 1024;

    class Buffer {
    public:
        Buffer() = default;
        Buffer(Buffer&& o) noexcept { steal(o); }
        Buffer& operator=(Buffer&& o) noexcept {
            if (this != &o) {
                reset();
                steal(o);
            }
            return *this;
        }
        Buffer(const Buffer&) = delete;
        Buffer& operator=(const Buffer&) = delete;
        ~Buffer() { reset(); }

        uint8_t* data() const { return data_; }
        size_t size() const { return size_; }
        // Gives the block back now.
        void reset();

    private:
        friend class BufferPool;
        void steal(Buffer& o) {
            pool_ = o.pool_;
            data_ = o.data_;
            size_ = o.size_;
            cls_ = o.cls_;
            o.pool_ = nullptr;
            o.data_ = nullptr;
            o.size_ = 0;
        }
        BufferPool* pool_ = nullptr;
        uint8_t* data_ = nullptr;
        size_t size_ = 0;
        uint8_t cls_ = 0;  // classes: allocated directly
    };

    BufferPool() = default;
    BufferPool(const BufferPool&) = delete;
    BufferPool& operator=(const BufferPool&) = delete;
    ~BufferPool();

    // A buffer of n bytes (contents undefined); n == 0 holds no block.
    Buffer take(size_t n);
    // A buffer holding a copy of [p, p + n).
    Buffer copy(const uint8_t* p, size_t n);

    // For tests and the drain's accounting: blocks on the free lists, and
    // blocks allocated so far (pooled classes only).
    size_t free_blocks() const;
    uint64_t allocations() const { return allocations_; }

private:
    static unsigned class_of(size_t n);
    void give_back(uint8_t* block, unsigned cls);

    std::array<std::vector<uint8_t*>, classes> free_;
    uint64_t allocations_ = 0;
};

}  // namespace weft::group
