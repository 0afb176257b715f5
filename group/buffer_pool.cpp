// buffer_pool.cpp — the size classes and free lists of BufferPool.
#include "group/buffer_pool.hpp"

#include <bit>
#include <cstring>

namespace weft::group {

static_assert(BufferPool::max_pooled == 64 * 1024);

void BufferPool::Buffer::reset() {
    if (!data_) return;
    if (cls_ < classes)
        pool_->give_back(data_, cls_);
    else
        delete[] data_;
    pool_ = nullptr;
    data_ = nullptr;
    size_ = 0;
}

BufferPool::~BufferPool() {
    for (auto& list : free_)
        for (uint8_t* b : list) delete[] b;
}

unsigned BufferPool::class_of(size_t n) {
    if (n > max_pooled) return classes;
    // The smallest power of two >= n, as a class index (64 B is class 0).
    const unsigned shift = n <= (size_t(1) << min_shift) ? min_shift : unsigned(std::bit_width(n - 1));
    return shift - min_shift;
}

BufferPool::Buffer BufferPool::take(size_t n) {
    Buffer b;
    if (n == 0) return b;
    const unsigned cls = class_of(n);
    if (cls < classes && !free_[cls].empty()) {
        b.data_ = free_[cls].back();
        free_[cls].pop_back();
    } else if (cls < classes) {
        b.data_ = new uint8_t[size_t(1) << (min_shift + cls)];
        ++allocations_;
    } else {
        b.data_ = new uint8_t[n];
    }
    b.pool_ = this;
    b.size_ = n;
    b.cls_ = static_cast<uint8_t>(cls);
    return b;
}

BufferPool::Buffer BufferPool::copy(const uint8_t* p, size_t n) {
    Buffer b = take(n);
    if (n) std::memcpy(b.data(), p, n);
    return b;
}

void BufferPool::give_back(uint8_t* block, unsigned cls) {
    auto& list = free_[cls];
    if (list.size() < free_bytes_per_class >> (min_shift + cls))
        list.push_back(block);
    else
        delete[] block;
}

size_t BufferPool::free_blocks() const {
    size_t n = 0;
    for (const auto& list : free_) n += list.size();
    return n;
}

}  // namespace weft::group
