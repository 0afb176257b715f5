// snapshot_format.cpp — see snapshot_format.hpp.
#include "group/snapshot_format.hpp"

#include <algorithm>
#include <cstring>

namespace weft::group {

namespace {
constexpr uint32_t snapshot_magic = 0x504e5357;  // "WSNP"
constexpr size_t header_bytes = 24;
constexpr size_t request_bytes = 80;
constexpr size_t message_bytes = 32;

class Writer {
public:
    explicit Writer(std::vector<uint8_t>& out) : out_(out) {}
    void u8(uint8_t v) { out_.push_back(v); }
    void u16(uint16_t v) { raw(&v, 2); }
    void u32(uint32_t v) { raw(&v, 4); }
    void u64(uint64_t v) { raw(&v, 8); }
    void i32(int32_t v) { raw(&v, 4); }
    void raw(const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        out_.insert(out_.end(), b, b + n);
    }
    void pad8() { out_.resize((out_.size() + 7) / 8 * 8, 0); }

private:
    std::vector<uint8_t>& out_;
};

class Reader {
public:
    Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
    bool has(uint64_t bytes) const { return bytes <= n_ - at_; }
    template <typename T>
    T get() {
        T v;
        std::memcpy(&v, p_ + at_, sizeof v);
        at_ += sizeof v;
        return v;
    }
    const uint8_t* take(uint64_t n) {
        const uint8_t* b = p_ + at_;
        at_ += n;
        return b;
    }
    // Skips the zero padding to a multiple of 8; false if it is not zeros.
    bool pad8() {
        const size_t to = (at_ + 7) / 8 * 8;
        if (to > n_) return false;
        for (; at_ < to; ++at_)
            if (p_[at_]) return false;
        return true;
    }
    size_t at() const { return at_; }
    bool end() const { return at_ == n_; }

private:
    const uint8_t* p_;
    size_t n_;
    size_t at_ = 0;
};

Status corrupt(const char* what, const char* why, size_t at) {
    return WEFT_FAIL(WEFT_ERR_CORRUPT, "%s: runtime state: %s (byte %zu)", what, why, at);
}

}  // namespace

std::vector<uint8_t> encode_snapshot(const Snapshot& s) {
    std::vector<uint8_t> out;
    Writer w(out);
    w.u32(snapshot_magic);
    w.u32(s.engine_slot);
    w.u32(static_cast<uint32_t>(s.requests.size()));
    w.u32(static_cast<uint32_t>(s.posted.size()));
    w.u32(static_cast<uint32_t>(s.messages.size()));
    w.pad8();
    for (const SavedRequest& q : s.requests) {
        w.u32(q.index);
        w.u32(q.generation);
        w.u8(q.kind);
        w.u8(q.flags);
        w.u16(0);
        w.i32(q.src);
        w.i32(q.tag);
        w.u32(q.dest_peer);
        w.u32(q.region);
        w.u64(q.offset);
        w.u64(q.cap);
        w.u64(q.cookie);
        w.i32(q.status.source);
        w.i32(q.status.tag);
        w.u64(q.status.bytes);
        w.i32(q.status.error);
        w.i32(q.status.cancelled);
        w.u32(0);
    }
    for (uint32_t place : s.posted) w.u32(place);
    w.pad8();
    for (const SavedMessage& m : s.messages) {
        w.i32(m.src);
        w.i32(m.tag);
        w.u32(m.kind);
        w.u32(m.source_peer);
        w.u64(m.len);
        w.u64(m.cookie);
        if (m.len) w.raw(m.data, m.len);
        w.pad8();
    }
    return out;
}

Status parse_snapshot(const uint8_t* data, size_t len, uint32_t world_size, const char* what, Snapshot& out) {
    Reader r(data, len);
    if (!r.has(header_bytes)) return corrupt(what, "shorter than its header", 0);
    if (r.get<uint32_t>() != snapshot_magic) return corrupt(what, "bad magic", 0);
    out.engine_slot = r.get<uint32_t>();
    const uint32_t nreq = r.get<uint32_t>(), nposted = r.get<uint32_t>(), nmsg = r.get<uint32_t>();
    if (!r.pad8()) return corrupt(what, "nonzero padding after the header", r.at());
    if (out.engine_slot >= saved::max_engine_slots) return corrupt(what, "engine slot out of range", 4);
    if (nreq > saved::max_requests || !r.has(uint64_t(nreq) * request_bytes))
        return corrupt(what, "more requests than bytes", 8);
    out.requests.resize(nreq);
    std::vector<uint32_t> indices;
    indices.reserve(nreq);
    for (SavedRequest& q : out.requests) {
        const size_t at = r.at();
        q.index = r.get<uint32_t>();
        q.generation = r.get<uint32_t>();
        q.kind = r.get<uint8_t>();
        q.flags = r.get<uint8_t>();
        const uint16_t pad = r.get<uint16_t>();
        q.src = r.get<int32_t>();
        q.tag = r.get<int32_t>();
        q.dest_peer = r.get<uint32_t>();
        q.region = r.get<uint32_t>();
        q.offset = r.get<uint64_t>();
        q.cap = r.get<uint64_t>();
        q.cookie = r.get<uint64_t>();
        q.status.source = r.get<int32_t>();
        q.status.tag = r.get<int32_t>();
        q.status.bytes = r.get<uint64_t>();
        const int32_t error = r.get<int32_t>();  // checked before it becomes a weft_status_t
        q.status.cancelled = r.get<int32_t>();
        const uint32_t tail = r.get<uint32_t>();
        if (pad || tail) return corrupt(what, "nonzero padding in a request", at);
        if (q.index >= saved::max_requests) return corrupt(what, "request index out of range", at);
        if (q.kind > saved::coll || (q.flags & ~(saved::flag_done | saved::flag_sync)))
            return corrupt(what, "unknown request kind or flag", at);
        if (error < 0 || error > WEFT_ERR_LAST_ || (q.status.cancelled & ~1))
            return corrupt(what, "a request's status is out of range", at);
        q.status.error = static_cast<weft_status_t>(error);
        const bool done = q.flags & saved::flag_done;
        if (!done) {
            const bool recv_ok = q.kind == saved::recv && q.src >= WEFT_ANY_SOURCE &&
                                 (q.src < 0 || uint32_t(q.src) < world_size) && q.tag >= WEFT_ANY_TAG;
            const bool send_ok = q.kind == saved::send && (q.flags & saved::flag_sync) && q.generation &&
                                 q.cookie == (uint64_t(q.generation) << 32 | q.index) && q.dest_peer < world_size;
            if (!recv_ok && !send_ok) return corrupt(what, "a pending request that cannot be pending", at);
        }
        indices.push_back(q.index);
    }
    std::sort(indices.begin(), indices.end());
    if (std::adjacent_find(indices.begin(), indices.end()) != indices.end())
        return corrupt(what, "two requests at one index", r.at());

    if (!r.has(uint64_t(nposted) * 4)) return corrupt(what, "more posted receives than bytes", r.at());
    std::vector<uint8_t> seen(nreq, 0);
    out.posted.reserve(nposted);
    for (uint32_t i = 0; i < nposted; ++i) {
        const uint32_t which = r.get<uint32_t>();
        if (which >= nreq || seen[which]) return corrupt(what, "a posted receive names no request, or twice", r.at());
        const SavedRequest& q = out.requests[which];
        if (q.kind != saved::recv || (q.flags & saved::flag_done))
            return corrupt(what, "a posted receive that is not a pending receive", r.at());
        seen[which] = 1;
        out.posted.push_back(which);
    }
    for (uint32_t i = 0; i < nreq; ++i)
        if (!seen[i] && out.requests[i].kind == saved::recv && !(out.requests[i].flags & saved::flag_done))
            return corrupt(what, "a pending receive that is not posted", r.at());
    if (!r.pad8()) return corrupt(what, "nonzero padding after the posted receives", r.at());

    if (nmsg > len / message_bytes) return corrupt(what, "more buffered messages than bytes", r.at());
    out.messages.resize(nmsg);
    for (SavedMessage& m : out.messages) {
        const size_t at = r.at();
        if (!r.has(message_bytes)) return corrupt(what, "a buffered message's envelope is cut", at);
        m.src = r.get<int32_t>();
        m.tag = r.get<int32_t>();
        m.kind = r.get<uint32_t>();
        m.source_peer = r.get<uint32_t>();
        m.len = r.get<uint64_t>();
        m.cookie = r.get<uint64_t>();
        if (m.src < 0 || uint32_t(m.src) >= world_size || m.tag < 0 || m.source_peer >= world_size)
            return corrupt(what, "a buffered message's envelope is out of range", at);
        if ((m.kind != saved::eager && m.kind != saved::eager_sync) || (m.kind == saved::eager_sync && !m.cookie))
            return corrupt(what, "a buffered message of unknown kind", at);
        if (!r.has(m.len)) return corrupt(what, "a buffered message's bytes are cut", at);
        m.data = r.take(m.len);
        if (!r.pad8()) return corrupt(what, "nonzero padding after a buffered message", r.at());
    }
    if (!r.end()) return corrupt(what, "bytes after the last buffered message", r.at());
    return WEFT_OK;
}

}  // namespace weft::group
