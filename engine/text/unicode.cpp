#include "engine/text/unicode.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>
#include <stdexcept>

namespace shardscope::text {

namespace {

// How many bytes of a valid sequence start at `i`, or, for an invalid one, how many bytes form its
// maximal invalid subpart (negated). The ranges are Unicode's Table 3-7 (well-formed UTF-8).
int sequenceAt(std::string_view s, std::size_t i)
{
    const auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80)
        return 1;
    int length = 0;
    unsigned char low = 0x80, high = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        length = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        length = 3;
        if (b0 == 0xE0)
            low = 0xA0;
        else if (b0 == 0xED)
            high = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        length = 4;
        if (b0 == 0xF0)
            low = 0x90;
        else if (b0 == 0xF4)
            high = 0x8F;
    } else {
        return -1; // not a lead byte
    }
    for (int k = 1; k < length; ++k) {
        if (i + k >= s.size())
            return -k;
        const auto b = static_cast<unsigned char>(s[i + k]);
        const unsigned char lo = k == 1 ? low : 0x80, hi = k == 1 ? high : 0xBF;
        if (b < lo || b > hi)
            return -k;
    }
    return length;
}

} // namespace

std::string utf8Lossy(std::string_view bytes)
{
    std::string out;
    out.reserve(bytes.size());
    for (std::size_t i = 0; i < bytes.size();) {
        const int n = sequenceAt(bytes, i);
        if (n > 0) {
            out.append(bytes.substr(i, static_cast<std::size_t>(n)));
            i += static_cast<std::size_t>(n);
        } else {
            out.append("\xEF\xBF\xBD");
            i += static_cast<std::size_t>(-n);
        }
    }
    return out;
}

std::optional<std::size_t> firstInvalidUtf8(std::string_view bytes)
{
    for (std::size_t i = 0; i < bytes.size();) {
        const int n = sequenceAt(bytes, i);
        if (n < 0)
            return i;
        i += static_cast<std::size_t>(n);
    }
    return std::nullopt;
}

void appendUtf8(std::string& out, char32_t codepoint)
{
    utf8proc_uint8_t buffer[4];
    const auto n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(codepoint), buffer);
    out.append(reinterpret_cast<const char*>(buffer), static_cast<std::size_t>(n));
}

std::string normalizeUnicode(std::string_view text, NormalForm form)
{
    int options = UTF8PROC_STABLE;
    switch (form) {
    case NormalForm::Nfc:
        options |= UTF8PROC_COMPOSE;
        break;
    case NormalForm::Nfd:
        options |= UTF8PROC_DECOMPOSE;
        break;
    case NormalForm::Nfkc:
        options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
        break;
    case NormalForm::Nfkd:
        options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
        break;
    }
    utf8proc_uint8_t* result = nullptr;
    const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                static_cast<utf8proc_ssize_t>(text.size()), &result, static_cast<utf8proc_option_t>(options));
    if (n < 0)
        throw std::runtime_error(std::string("Unicode normalization failed: ") + utf8proc_errmsg(n));
    const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(result, &std::free);
    return {reinterpret_cast<const char*>(result), static_cast<std::size_t>(n)};
}

std::string lowercaseUnicode(std::string_view text)
{
    std::string out;
    out.reserve(text.size());
    const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
    utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(text.size());
    while (left > 0) {
        utf8proc_int32_t cp = 0;
        const auto n = utf8proc_iterate(p, left, &cp);
        if (n <= 0)
            throw std::runtime_error("lowercase: the text is not valid UTF-8");
        appendUtf8(out, static_cast<char32_t>(utf8proc_tolower(cp)));
        p += n;
        left -= n;
    }
    return out;
}

} // namespace shardscope::text
