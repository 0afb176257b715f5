// snapshot_format.cpp — see snapshot_format.hpp.
#include "group/snapshot_format.hpp"

#include <algorithm>
#include <cstring>

namespace weft::group {

namespace {
constexpr uint32_t snapshot_magic = 0x334e5357;      // "WSN3"
constexpr uint32_t old_snapshot_magic = 0x504e5357;  // "WSNP": image format 2, the world alone
constexpr size_t header_bytes = 48;
constexpr size_t group_bytes = 24;
constexpr size_t group_name_max = 63;  // WEFT_GROUP_NAME_MAX - 1
constexpr size_t comm_bytes = 32;
constexpr size_t request_bytes = 80;
constexpr size_t message_bytes = 40;

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
    w.u32(static_cast<uint32_t>(s.comms.size()));
    w.u64(s.world_handle);
    w.u64(s.next_context);
    w.u32(static_cast<uint32_t>(s.groups.size()));
    w.u32(s.next_group_context);
    for (uint16_t use : s.slot_uses) w.u16(use);
    for (const SavedComm& c : s.comms) {
        w.u64(c.handle);
        w.u64(c.id);
        w.u32(static_cast<uint32_t>(c.members.size()));
        w.u32(c.rank);
        w.u32(c.slot);
        w.u32(c.flags);
        for (uint32_t m : c.members) w.u32(m);
        for (uint32_t slot : c.slots) w.u32(slot);
        for (uint16_t use : c.slot_uses) w.u16(use);
        w.pad8();
    }
    for (const SavedGroup& g : s.groups) {
        w.u32(static_cast<uint32_t>(g.name.size()));
        w.u32(static_cast<uint32_t>(g.members.size()));
        w.u64(g.context_id);
        w.u32(g.flags);
        w.u32(0);
        w.raw(g.name.data(), g.name.size());
        w.pad8();
        for (uint32_t m : g.members) w.u32(m);
        for (const auto& info : g.infos) w.u32(static_cast<uint32_t>(info.size()));
        w.pad8();
        for (const auto& info : g.infos) w.raw(info.data(), info.size());
        w.pad8();
    }
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
        w.u32(q.comm);
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
        w.u32(m.comm);
        w.u32(0);
        if (m.len) w.raw(m.data, m.len);
        w.pad8();
    }
    return out;
}

Status parse_snapshot(const uint8_t* data, size_t len, uint32_t world_size, const char* what, Snapshot& out) {
    Reader r(data, len);
    if (!r.has(header_bytes)) return corrupt(what, "shorter than its header", 0);
    const uint32_t magic = r.get<uint32_t>();
    if (magic == old_snapshot_magic)
        return WEFT_FAIL(WEFT_ERR_UNSUPPORTED, "%s: runtime state of image format 2, which this weft no longer reads",
                         what);
    if (magic != snapshot_magic) return corrupt(what, "bad magic", 0);
    out.engine_slot = r.get<uint32_t>();
    const uint32_t nreq = r.get<uint32_t>(), nposted = r.get<uint32_t>(), nmsg = r.get<uint32_t>();
    const uint32_t ncomm = r.get<uint32_t>();
    out.world_handle = r.get<uint64_t>();
    out.next_context = r.get<uint64_t>();
    const uint32_t ngroup = r.get<uint32_t>();
    out.next_group_context = r.get<uint32_t>();
    if (out.engine_slot >= saved::max_engine_slots) return corrupt(what, "engine slot out of range", 4);
    if (static_cast<uint32_t>(out.world_handle) == 0) return corrupt(what, "the world's handle is NULL", 24);
    if (out.next_context == 0 || out.next_context > UINT32_MAX)
        return corrupt(what, "context counter out of range", 32);
    if (!r.has(saved::clock_slots * 2)) return corrupt(what, "the slot uses are cut", r.at());
    for (uint16_t& use : out.slot_uses)
        if ((use = r.get<uint16_t>()) > saved::max_slot_use) return corrupt(what, "a slot use out of range", r.at());

    // Communicators: sizes first, for the envelopes below.
    if (ncomm > len / comm_bytes) return corrupt(what, "more communicators than bytes", r.at());
    out.comms.resize(ncomm);
    std::vector<uint64_t> handles{static_cast<uint32_t>(out.world_handle)}, ids{0};  // places, and IDs
    std::vector<uint32_t> own_slots{0};                                              // the world's
    std::vector<uint32_t> sizes{world_size};
    for (SavedComm& c : out.comms) {
        const size_t at = r.at();
        if (!r.has(comm_bytes)) return corrupt(what, "a communicator is cut", at);
        c.handle = r.get<uint64_t>();
        c.id = r.get<uint64_t>();
        const uint32_t size = r.get<uint32_t>();
        c.rank = r.get<uint32_t>();
        c.slot = r.get<uint32_t>();
        const uint32_t flags = r.get<uint32_t>();
        if (size == 0 || size > world_size || c.rank >= size || (flags & ~uint32_t(saved::comm_slots_known)))
            return corrupt(what, "a communicator's size, rank or flags are out of range", at);
        if (static_cast<uint32_t>(c.handle) == 0 || c.id == 0)
            return corrupt(what, "a communicator without a handle or context ID", at);
        if (c.slot != saved::no_slot && c.slot >= saved::clock_slots)
            return corrupt(what, "a communicator's clock slot is out of range", at);
        c.flags = static_cast<uint8_t>(flags);
        if (!r.has(uint64_t(size) * 10)) return corrupt(what, "a communicator's members are cut", at);
        c.members.resize(size);
        c.slots.resize(size);
        c.slot_uses.resize(size);
        for (uint32_t& m : c.members)
            if ((m = r.get<uint32_t>()) >= world_size) return corrupt(what, "a member outside the job", r.at());
        for (uint32_t& s : c.slots)
            if ((s = r.get<uint32_t>()) >= saved::clock_slots && s != saved::no_slot)
                return corrupt(what, "a member's clock slot is out of range", r.at());
        for (uint16_t& u : c.slot_uses)
            if ((u = r.get<uint16_t>()) > saved::max_slot_use)
                return corrupt(what, "a member's slot use is out of range", r.at());
        if (!r.pad8()) return corrupt(what, "nonzero padding after a communicator", r.at());
        std::vector<uint32_t> sorted = c.members;
        std::sort(sorted.begin(), sorted.end());
        if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
            return corrupt(what, "a communicator names a member twice", at);
        if (c.slots[c.rank] != c.slot) return corrupt(what, "a communicator's slot is not its rank's", at);
        handles.push_back(static_cast<uint32_t>(c.handle));
        ids.push_back(c.id);
        if (c.slot != saved::no_slot) own_slots.push_back(c.slot);
        sizes.push_back(size);
    }
    for (auto* v : {&handles, &ids}) {
        std::sort(v->begin(), v->end());
        if (std::adjacent_find(v->begin(), v->end()) != v->end())
            return corrupt(what, "two communicators with one handle or context ID", r.at());
    }
    std::sort(own_slots.begin(), own_slots.end());
    if (std::adjacent_find(own_slots.begin(), own_slots.end()) != own_slots.end())
        return corrupt(what, "two communicators in one clock slot", r.at());

    if (ngroup > len / group_bytes) return corrupt(what, "more process groups than bytes", r.at());
    if (out.next_group_context == 0) return corrupt(what, "the groups' context counter is 0", 44);
    out.groups.resize(ngroup);
    std::vector<std::string> names;
    for (SavedGroup& g : out.groups) {
        const size_t at = r.at();
        if (!r.has(group_bytes)) return corrupt(what, "a process group is cut", at);
        const uint32_t name_len = r.get<uint32_t>(), n = r.get<uint32_t>();
        g.context_id = r.get<uint64_t>();
        g.flags = r.get<uint32_t>();
        if (r.get<uint32_t>() != 0) return corrupt(what, "nonzero padding in a process group", at);
        if (name_len == 0 || name_len > group_name_max || n == 0 || n > world_size)
            return corrupt(what, "a process group's name or member count is out of range", at);
        if (!r.has(name_len)) return corrupt(what, "a process group's name is cut", at);
        const uint8_t* name = r.take(name_len);
        if (std::memchr(name, 0, name_len)) return corrupt(what, "a process group's name holds a NUL", at);
        g.name.assign(reinterpret_cast<const char*>(name), name_len);
        if (!r.pad8()) return corrupt(what, "nonzero padding after a process group's name", r.at());
        if (!r.has(uint64_t(n) * 8)) return corrupt(what, "a process group's members are cut", at);
        g.members.resize(n);
        for (uint32_t& m : g.members)
            if ((m = r.get<uint32_t>()) >= world_size) return corrupt(what, "a group member outside the job", r.at());
        std::vector<uint32_t> lens(n);
        for (uint32_t& l : lens) l = r.get<uint32_t>();
        if (!r.pad8()) return corrupt(what, "nonzero padding after a process group's members", r.at());
        std::vector<uint32_t> sorted = g.members;
        std::sort(sorted.begin(), sorted.end());
        if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
            return corrupt(what, "a process group names a member twice", at);
        g.infos.resize(n);
        for (uint32_t i = 0; i < n; ++i) {
            if (!r.has(lens[i])) return corrupt(what, "a group member's info is cut", r.at());
            const uint8_t* b = r.take(lens[i]);
            g.infos[i].assign(b, b + lens[i]);
        }
        if (!r.pad8()) return corrupt(what, "nonzero padding after a process group's infos", r.at());
        names.push_back(g.name);
    }
    std::sort(names.begin(), names.end());
    if (std::adjacent_find(names.begin(), names.end()) != names.end())
        return corrupt(what, "two process groups with one name", r.at());
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
        q.comm = r.get<uint32_t>();
        if (pad) return corrupt(what, "nonzero padding in a request", at);
        if (q.comm > ncomm) return corrupt(what, "a request names no communicator", at);
        if (q.index >= saved::max_requests) return corrupt(what, "request index out of range", at);
        if (q.kind > saved::coll || (q.flags & ~(saved::flag_done | saved::flag_sync)))
            return corrupt(what, "unknown request kind or flag", at);
        if (error < 0 || error > WEFT_ERR_LAST_ || (q.status.cancelled & ~1))
            return corrupt(what, "a request's status is out of range", at);
        q.status.error = static_cast<weft_status_t>(error);
        const bool done = q.flags & saved::flag_done;
        if (!done) {
            const bool recv_ok = q.kind == saved::recv && q.src >= WEFT_ANY_SOURCE &&
                                 (q.src < 0 || uint32_t(q.src) < sizes[q.comm]) && q.tag >= WEFT_ANY_TAG;
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
        m.comm = r.get<uint32_t>();
        if (r.get<uint32_t>() != 0) return corrupt(what, "nonzero padding in a buffered message's envelope", at);
        if (m.comm > ncomm) return corrupt(what, "a buffered message names no communicator", at);
        if (m.src < 0 || uint32_t(m.src) >= sizes[m.comm] || m.tag < 0 || m.source_peer >= world_size)
            return corrupt(what, "a buffered message's envelope is out of range", at);
        if (m.source_peer != (m.comm == saved::world ? uint32_t(m.src) : out.comms[m.comm - 1].members[m.src]))
            return corrupt(what, "a buffered message's source is not its sender's rank", at);
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
