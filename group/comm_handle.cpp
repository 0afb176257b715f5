// comm_handle.cpp — the table of communicator shells (comm_handle.hpp).
#include "group/comm_handle.hpp"

#include "group/comm.hpp"

#include <algorithm>
#include <mutex>
#include <new>
#include <vector>

namespace weft::group {
namespace {

constexpr uint32_t chunk_size = 256;
constexpr uint32_t max_chunks = max_comm_handles / chunk_size;
// Generations are 31 bits and never 0 (no handle is NULL or reads as
// negative); the highest is the worlds'.
constexpr uint32_t world_generation = (1u << 31) - 1;

struct Table {
    std::mutex mutex;
    std::atomic<CommShell*> chunks[max_chunks] = {};
    std::atomic<uint32_t> places{0};  // made so far; [0, places) have shells
    std::vector<uint32_t> free;       // released places, reused lowest first
};

// Never destroyed: stale handles stay answerable after every context is
// gone, and the chunks stay reachable for LSan.
Table& table() {
    static auto* t = new Table;
    return *t;
}

CommShell& at(Table& t, uint32_t place) {
    return t.chunks[place / chunk_size].load(std::memory_order_acquire)[place % chunk_size];
}

uint32_t place_of(uint64_t handle) { return static_cast<uint32_t>(handle) - 1; }
uint64_t value_of(uint32_t place, uint32_t generation) { return uint64_t(generation) << 32 | (uint64_t(place) + 1); }

// Under the mutex: places up to `place` exist; the new ones are free.
bool grow_to(Table& t, uint32_t place) {
    if (place >= max_comm_handles) return false;
    for (uint32_t p = t.places.load(std::memory_order_relaxed); p <= place; ++p) {
        if (p % chunk_size == 0) t.chunks[p / chunk_size].store(new CommShell[chunk_size], std::memory_order_release);
        if (p < place) t.free.push_back(p);
        t.places.store(p + 1, std::memory_order_release);
    }
    return true;
}

void bring_to_life(CommShell& s, uint64_t value, Engine& e, Comm& c) {
    s.engine = &e;
    s.comm = &c;
    s.errhandler.store(nullptr, std::memory_order_relaxed);
    s.magic = CommShell::live_magic;
    s.value.store(value, std::memory_order_release);
    c.handle = &s;
}

}  // namespace

CommShell& make_comm_shell(Engine& e, Comm& c, bool world) {
    Table& t = table();
    std::lock_guard<std::mutex> g(t.mutex);
    uint32_t place;
    if (!t.free.empty()) {
        auto lowest = std::min_element(t.free.begin(), t.free.end());
        place = *lowest;
        *lowest = t.free.back();
        t.free.pop_back();
    } else {
        place = t.places.load(std::memory_order_relaxed);
        if (!grow_to(t, place)) throw std::bad_alloc();
    }
    CommShell& s = at(t, place);
    uint32_t generation = static_cast<uint32_t>(s.value.load(std::memory_order_relaxed) >> 32) + 1;
    if (generation >= world_generation) generation = 1;
    if (world) generation = world_generation;
    bring_to_life(s, value_of(place, generation), e, c);
    return s;
}

bool comm_place_free(uint64_t handle) {
    Table& t = table();
    std::lock_guard<std::mutex> g(t.mutex);
    const uint32_t place = place_of(handle);
    if (static_cast<uint32_t>(handle) == 0 || place >= max_comm_handles) return false;
    return place >= t.places.load(std::memory_order_relaxed) ||
           std::find(t.free.begin(), t.free.end(), place) != t.free.end();
}

bool place_comm_shell(Engine& e, Comm& c, uint64_t handle) {
    Table& t = table();
    std::lock_guard<std::mutex> g(t.mutex);
    const uint32_t place = place_of(handle);
    if (static_cast<uint32_t>(handle) == 0 || place >= max_comm_handles) return false;
    if (place >= t.places.load(std::memory_order_relaxed)) {
        if (!grow_to(t, place)) return false;
    } else {
        auto it = std::find(t.free.begin(), t.free.end(), place);
        if (it == t.free.end()) return false;
        *it = t.free.back();
        t.free.pop_back();
    }
    bring_to_life(at(t, place), handle, e, c);
    return true;
}

void release_comm_shell(CommShell& s) {
    Table& t = table();
    std::lock_guard<std::mutex> g(t.mutex);
    s.magic = CommShell::dead_magic;
    s.comm = nullptr;
    if (s.engine) {  // not released before
        s.engine = nullptr;
        t.free.push_back(place_of(s.value.load(std::memory_order_relaxed)));
    }
}

CommShell* shell_of(weft_comm_t h) {
    const uint64_t v = comm_handle_value(h);
    const uint32_t place = place_of(v);
    Table& t = table();
    if (__builtin_expect(static_cast<uint32_t>(v) == 0 || place >= t.places.load(std::memory_order_acquire), 0))
        return nullptr;
    CommShell& s = at(t, place);
    return __builtin_expect(s.value.load(std::memory_order_acquire) == v, 1) ? &s : nullptr;
}

}  // namespace weft::group
