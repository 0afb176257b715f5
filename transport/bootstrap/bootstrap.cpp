// bootstrap.cpp — picking the bootstrap source, the weft-run socket client
// and the singleton.
#include "transport/bootstrap/bootstrap.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace weft {

bool parse_job_sizes(const char* text, std::vector<uint32_t>& out) {
    out.clear();
    if (!text || !*text) return false;
    const char* p = text;
    while (*p) {
        if (*p < '0' || *p > '9') return false;  // strtoul would take spaces and signs
        char* end = nullptr;
        errno = 0;
        unsigned long v = std::strtoul(p, &end, 10);
        if (errno || end == p || v == 0 || v > (1u << 20)) return false;
        out.push_back(static_cast<uint32_t>(v));
        if (*end == ',') {
            p = end + 1;
            if (!*p) return false;
        } else if (*end == '\0') {
            p = end;
        } else {
            return false;
        }
    }
    return !out.empty() && out.size() <= 1024;
}

bool parse_secret(const char* hex, uint8_t out[wire::secret_size]) {
    if (!hex || std::strlen(hex) != 2 * wire::secret_size) return false;
    for (size_t i = 0; i < wire::secret_size; ++i) {
        unsigned v = 0;
        for (int k = 0; k < 2; ++k) {
            char c = hex[2 * i + k];
            v <<= 4;
            if (c >= '0' && c <= '9')
                v |= unsigned(c - '0');
            else if (c >= 'a' && c <= 'f')
                v |= unsigned(c - 'a' + 10);
            else if (c >= 'A' && c <= 'F')
                v |= unsigned(c - 'A' + 10);
            else
                return false;
        }
        out[i] = static_cast<uint8_t>(v);
    }
    return true;
}

namespace {

class SingletonBootstrap final : public Bootstrap {
public:
    const char* name() const override { return "singleton"; }
    Status exchange(wire::Scope, std::span<const uint8_t> mine, std::vector<std::vector<uint8_t>>& all,
                    Deadline) override {
        all.assign(1, std::vector<uint8_t>(mine.begin(), mine.end()));
        return WEFT_OK;
    }
};

class SocketBootstrap final : public Bootstrap {
public:
    ~SocketBootstrap() override {
        if (fd_ >= 0) close(fd_);
    }
    const char* name() const override { return "weft-run"; }

    Status connect_to(const std::string& address, const uint8_t secret[wire::secret_size], uint32_t job, uint32_t rank,
                      std::vector<uint32_t> sizes) {
        job_ = job;
        rank_ = rank;
        job_sizes_ = std::move(sizes);
        address_ = address;
        std::memcpy(secret_, secret, wire::secret_size);
        return connect_once(Deadline::after_ns(timeout_ns_from_env()), nullptr);
    }

    void release() override {
        if (fd_ >= 0) close(fd_);
        fd_ = -1;
    }

    // The launcher takes a rank back after its connection closed (its
    // hello is checked as at start-up: secret, job/rank, the launched
    // pid). It may not have seen the old connection's end yet when the new
    // hello comes ("rank already connected"): try again until it has.
    // Exchange numbers go on where they were: the launcher keys exchanges
    // by them.
    Status reconnect(Deadline d) override {
        Backoff backoff(Backoff::transport, d);
        for (;;) {
            bool again = false;
            Status st = connect_once(d, &again);
            if (st == WEFT_OK || !again) return st;
            release();
            if (d.passed())
                return WEFT_FAIL(WEFT_ERR_TIMEOUT, "reconnecting to the launcher: it kept the old connection");
            backoff.pause();
        }
    }

    // One connection and hello. `busy` (may be null) is set when the
    // launcher refused only because it still holds this rank's last one.
    Status connect_once(Deadline d, bool* busy) {
        const std::string& address = address_;
        const bool abstract = !address.empty() && address[0] == '@';
        if (address.size() < 2 || (!abstract && address[0] != '/') ||
            address.size() > sizeof(sockaddr_un::sun_path) - 1)
            return WEFT_FAIL(WEFT_ERR_BOOTSTRAP, "bootstrap address '%s' is not unix:@NAME or unix:/PATH",
                             address.c_str());
        fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd_ < 0) return WEFT_FAIL(WEFT_ERR_BOOTSTRAP, "socket: %s", std::strerror(errno));
        sockaddr_un sa{};
        sa.sun_family = AF_UNIX;
        // Abstract namespace (leading NUL, nothing in the file system to
        // leak), or a path: weft-run --hosts, whose ranks are in other
        // network namespaces, where abstract names do not reach.
        std::memcpy(sa.sun_path + abstract, address.data() + abstract, address.size() - abstract);
        socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size() + !abstract);
        if (::connect(fd_, reinterpret_cast<sockaddr*>(&sa), len) != 0)
            return WEFT_FAIL(WEFT_ERR_BOOTSTRAP, "connect to launcher %s: %s", address.c_str(), std::strerror(errno));
        wire::Hello h{};
        std::memcpy(h.secret, secret_, wire::secret_size);
        h.job = job_;
        h.rank = rank_;
        h.pid = static_cast<int32_t>(getpid());
        std::vector<uint8_t> out;
        wire::encode_hello(out, h);
        Status st = wire::send_all(fd_, out, d);
        if (st != WEFT_OK) return WEFT_FAIL(st, "sending hello to the launcher failed");
        wire::Header hdr;
        std::vector<uint8_t> payload;
        st = wire::recv_frame(fd_, hdr, payload, d);
        if (st != WEFT_OK) return WEFT_FAIL(st, "no welcome from the launcher");
        if (hdr.type == wire::Type::error) {
            wire::ErrorMsg e;
            if (wire::decode_error(payload, e) == WEFT_OK) {
                if (busy && e.text == wire::already_connected) {
                    WEFT_LOG(debug, "launcher still holds this rank's last connection: again");
                    *busy = true;
                    return WEFT_ERR_BUSY;
                }
                return WEFT_FAIL(WEFT_ERR_BOOTSTRAP, "launcher refused this rank: %s", e.text.c_str());
            }
            return WEFT_FAIL(WEFT_ERR_PROTOCOL, "launcher sent a corrupted error frame");
        }
        if (hdr.type != wire::Type::welcome)
            return WEFT_FAIL(WEFT_ERR_PROTOCOL, "launcher answered hello with frame type %u",
                             static_cast<unsigned>(hdr.type));
        return WEFT_OK;
    }

    Status exchange(wire::Scope scope, std::span<const uint8_t> mine, std::vector<std::vector<uint8_t>>& all,
                    Deadline d) override {
        uint32_t seq = ++seq_[static_cast<int>(scope)];
        std::vector<uint8_t> out;
        wire::encode_exchange(out, seq, scope, mine);
        Status st = wire::send_all(fd_, out, d);
        if (st != WEFT_OK) return WEFT_FAIL(st, "bootstrap exchange: send to launcher failed");
        for (;;) {
            st = wait_readable(d);
            if (st != WEFT_OK) return WEFT_FAIL(st, "bootstrap exchange %u: no answer from launcher", seq);
            wire::Header hdr;
            std::vector<uint8_t> payload;
            st = wire::recv_frame(fd_, hdr, payload, d);
            if (st != WEFT_OK) return WEFT_FAIL(st, "bootstrap exchange %u: no answer from launcher", seq);
            if (hdr.type == wire::Type::peer_failed) continue;  // the peer monitor sees deaths itself
            if (hdr.type == wire::Type::error) {
                wire::ErrorMsg e;
                if (wire::decode_error(payload, e) != WEFT_OK)
                    return WEFT_FAIL(WEFT_ERR_PROTOCOL, "corrupted error frame from launcher");
                // A member finalized and left (expected at finalize, not a
                // failure), or died where the caller expects it may have.
                if (e.departed || loss_expected_) {
                    WEFT_LOG(debug, "bootstrap exchange %u not completed: %s", seq, e.text.c_str());
                    return e.status;
                }
                return WEFT_FAIL(e.status, "bootstrap exchange %u failed: %s", seq, e.text.c_str());
            }
            if (hdr.type != wire::Type::exchange_result || hdr.seq != seq)
                return WEFT_FAIL(WEFT_ERR_PROTOCOL, "unexpected frame type %u seq %u (want result %u)",
                                 static_cast<unsigned>(hdr.type), hdr.seq, seq);
            std::vector<std::span<const uint8_t>> blobs;
            st = wire::decode_exchange_result(payload, blobs);
            if (st != WEFT_OK) return WEFT_FAIL(st, "corrupted exchange result from launcher");
            uint32_t want = scope == wire::Scope::job ? size() : universe_size();
            if (blobs.size() != want)
                return WEFT_FAIL(WEFT_ERR_PROTOCOL, "exchange result has %zu entries, want %u", blobs.size(), want);
            all.clear();
            for (auto b : blobs) all.emplace_back(b.begin(), b.end());
            return WEFT_OK;
        }
    }

private:
    // Waits for the launcher's answer, progressing the transport meanwhile:
    // a short spin, then polls of at most 1 ms.
    Status wait_readable(Deadline d) {
        Backoff backoff;
        for (;;) {
            pollfd p{fd_, POLLIN, 0};
            int ms = backoff.should_block() ? 1 : 0;
            int r = poll(&p, 1, ms);
            if (r > 0) return WEFT_OK;  // data, or hang-up: recv_frame reports it
            if (r < 0 && errno != EINTR) return WEFT_ERR_BOOTSTRAP;
            if (d.passed()) return WEFT_ERR_TIMEOUT;
            progress_while_waiting();
            if (!backoff.should_block()) backoff.pause();
        }
    }

    int fd_ = -1;
    uint32_t seq_[2] = {0, 0};
    std::string address_;  // for reconnect()
    uint8_t secret_[wire::secret_size] = {};
};

}  // namespace

std::unique_ptr<Bootstrap> make_singleton_bootstrap() { return std::make_unique<SingletonBootstrap>(); }

Status make_socket_bootstrap(std::unique_ptr<Bootstrap>& out) {
    std::string addr = env_string("WEFT_BOOTSTRAP", "");
    if (addr.rfind("unix:", 0) != 0)
        return WEFT_FAIL(WEFT_ERR_BOOTSTRAP, "WEFT_BOOTSTRAP=%s: expected unix:@NAME or unix:/PATH", addr.c_str());
    uint8_t secret[wire::secret_size];
    if (!parse_secret(std::getenv("WEFT_SECRET"), secret))
        return WEFT_FAIL(WEFT_ERR_BOOTSTRAP, "WEFT_SECRET missing or not 64 hex digits");
    std::vector<uint32_t> sizes;
    if (!parse_job_sizes(std::getenv("WEFT_JOB_SIZES"), sizes))
        return WEFT_FAIL(WEFT_ERR_BOOTSTRAP, "WEFT_JOB_SIZES missing or malformed");
    uint64_t job = env_u64("WEFT_JOB", UINT64_MAX), rank = env_u64("WEFT_RANK", UINT64_MAX);
    if (job >= sizes.size() || rank >= sizes[job])
        return WEFT_FAIL(WEFT_ERR_BOOTSTRAP, "WEFT_JOB/WEFT_RANK outside WEFT_JOB_SIZES");
    auto b = std::make_unique<SocketBootstrap>();
    Status st = b->connect_to(addr.substr(5), secret, static_cast<uint32_t>(job), static_cast<uint32_t>(rank),
                              std::move(sizes));
    if (st != WEFT_OK) return st;
    out = std::move(b);
    return WEFT_OK;
}

Status make_bootstrap(std::unique_ptr<Bootstrap>& out) {
    if (std::getenv("WEFT_BOOTSTRAP")) return make_socket_bootstrap(out);
    if (std::getenv("PMIX_RANK") || std::getenv("PMIX_NAMESPACE")) return make_pmix_bootstrap(out);
    out = make_singleton_bootstrap();
    return WEFT_OK;
}

}  // namespace weft
