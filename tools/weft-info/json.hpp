// json.hpp — a small streaming JSON writer for weft-info --json: objects,
// arrays, strings (escaped per RFC 8259), integers, booleans and null,
// indented two spaces. The caller nests begin/end correctly; the writer
// places the commas.
#pragma once

#include <concepts>
#include <cstdint>
#include <cstdio>
#include <string_view>
#include <vector>

namespace weft::info {

class JsonWriter {
public:
    explicit JsonWriter(std::FILE* out) : out_(out) {}

    JsonWriter& begin_object() { return open('{'); }
    JsonWriter& end_object() { return close('}'); }
    JsonWriter& begin_array() { return open('['); }
    JsonWriter& end_array() { return close(']'); }

    // The name of the next member of the current object.
    JsonWriter& key(std::string_view name) {
        separate();
        quoted(name);
        std::fputs(": ", out_);
        after_key_ = true;
        return *this;
    }

    JsonWriter& string(std::string_view text) {
        separate();
        quoted(text);
        return *this;
    }
    // `text` when `present`, else null.
    JsonWriter& string_if(bool present, std::string_view text) { return present ? string(text) : null(); }
    JsonWriter& boolean(bool b) {
        separate();
        std::fputs(b ? "true" : "false", out_);
        return *this;
    }
    template <std::integral T>
    JsonWriter& number(T n) {
        separate();
        if constexpr (std::signed_integral<T>)
            std::fprintf(out_, "%lld", static_cast<long long>(n));
        else
            std::fprintf(out_, "%llu", static_cast<unsigned long long>(n));
        return *this;
    }
    JsonWriter& null() {
        separate();
        std::fputs("null", out_);
        return *this;
    }
    // Ends the document with a newline.
    void finish() { std::fputc('\n', out_); }

private:
    JsonWriter& open(char bracket) {
        separate();
        std::fputc(bracket, out_);
        first_.push_back(true);
        return *this;
    }
    JsonWriter& close(char bracket) {
        const bool empty = first_.back();
        first_.pop_back();
        if (!empty) newline();
        std::fputc(bracket, out_);
        return *this;
    }
    // Before a value or a key: the comma and line break it needs, none right
    // after a key.
    void separate() {
        if (after_key_) {
            after_key_ = false;
            return;
        }
        if (first_.empty()) return;  // the top-level value
        if (!first_.back()) std::fputc(',', out_);
        first_.back() = false;
        newline();
    }
    void newline() {
        std::fputc('\n', out_);
        for (size_t i = 0; i < first_.size(); ++i) std::fputs("  ", out_);
    }
    void quoted(std::string_view s) {
        std::fputc('"', out_);
        for (size_t i = 0; i < s.size(); ++i) {
            const char c = s[i];
            const auto u = static_cast<unsigned char>(c);
            if (u >= 0x80) {  // a whole UTF-8 sequence, or U+FFFD for a byte that starts none
                const size_t n = utf8_length(s.substr(i));
                if (n == 0) {
                    std::fputs("\\ufffd", out_);
                } else {
                    std::fwrite(s.data() + i, 1, n, out_);
                    i += n - 1;
                }
                continue;
            }
            switch (c) {
                case '"':
                    std::fputs("\\\"", out_);
                    break;
                case '\\':
                    std::fputs("\\\\", out_);
                    break;
                case '\n':
                    std::fputs("\\n", out_);
                    break;
                case '\r':
                    std::fputs("\\r", out_);
                    break;
                case '\t':
                    std::fputs("\\t", out_);
                    break;
                default:
                    if (u < 0x20)
                        std::fprintf(out_, "\\u%04x", u);
                    else
                        std::fputc(c, out_);
            }
        }
        std::fputc('"', out_);
    }

    // The length of the well-formed UTF-8 sequence s starts with (RFC 3629:
    // no overlong forms, no surrogates, nothing past U+10FFFF), or 0.
    static size_t utf8_length(std::string_view s) {
        const auto at = [&](size_t k) { return k < s.size() ? static_cast<unsigned char>(s[k]) : 0u; };
        const unsigned lead = at(0);
        size_t n = 0;
        unsigned lo = 0x80, hi = 0xbf;  // the second byte's range
        if (lead >= 0xc2 && lead <= 0xdf) {
            n = 2;
        } else if (lead >= 0xe0 && lead <= 0xef) {
            n = 3;
            if (lead == 0xe0) lo = 0xa0;
            if (lead == 0xed) hi = 0x9f;
        } else if (lead >= 0xf0 && lead <= 0xf4) {
            n = 4;
            if (lead == 0xf0) lo = 0x90;
            if (lead == 0xf4) hi = 0x8f;
        } else {
            return 0;
        }
        if (at(1) < lo || at(1) > hi) return 0;
        for (size_t k = 2; k < n; ++k)
            if (at(k) < 0x80 || at(k) > 0xbf) return 0;
        return n;
    }

    std::FILE* out_;
    std::vector<bool> first_;  // per open container: nothing written in it yet
    bool after_key_ = false;
};

}  // namespace weft::info
