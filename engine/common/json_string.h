#pragma once

// The one JSON string writer (config files' JSON, run exports): a code point at a time, escaped
// as Python's json.dumps escapes it ('"', '\\', \n \r \t \b \f, other control characters as
// \u00XX). With `asciiOnly` (json.dumps' ensure_ascii, what Accelerate writes) every code point
// above 0x7e becomes \uXXXX, above 0xffff a surrogate pair; without it, the caller passes UTF-8
// bytes one by one and they are kept as they are.

#include <cstdio>
#include <string>
#include <string_view>

namespace shardscope {

inline void appendJsonCodePoint(std::string& out, char32_t c, bool asciiOnly)
{
    switch (c) {
    case '"':
        out += "\\\"";
        return;
    case '\\':
        out += "\\\\";
        return;
    case '\n':
        out += "\\n";
        return;
    case '\r':
        out += "\\r";
        return;
    case '\t':
        out += "\\t";
        return;
    case '\b':
        out += "\\b";
        return;
    case '\f':
        out += "\\f";
        return;
    default:
        break;
    }
    char buffer[16];
    if (c < 0x20 || (asciiOnly && c >= 0x7f && c <= 0xffff)) {
        std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(c));
        out += buffer;
    } else if (asciiOnly && c > 0xffff) {
        const char32_t v = c - 0x10000;
        std::snprintf(buffer, sizeof buffer, "\\u%04x\\u%04x", static_cast<unsigned>(0xd800 + (v >> 10)),
                      static_cast<unsigned>(0xdc00 + (v & 0x3ff)));
        out += buffer;
    } else {
        out += static_cast<char>(c);
    }
}

// `utf8` as a JSON string literal, its bytes above 0x7f kept.
inline std::string jsonStringLiteral(std::string_view utf8)
{
    std::string out = "\"";
    for (unsigned char c : utf8)
        appendJsonCodePoint(out, c, /*asciiOnly=*/false);
    return out + "\"";
}

// Python's json writes NaN, Infinity and -Infinity as bare words, which strict JSON parsers
// (nlohmann) refuse: each such word outside a string literal replaced by `replacement(word)` (a
// std::string_view -> std::string), everything else kept as it is. The config reader swaps them
// for marker strings, the event decoder for the strings the protocol writes.
template <typename Replacement>
std::string replaceBareNonFinite(std::string_view text, Replacement replacement)
{
    std::string out;
    out.reserve(text.size() + 16);
    bool inString = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (inString) {
            out += c;
            if (c == '\\' && i + 1 < text.size())
                out += text[++i];
            else if (c == '"')
                inString = false;
            continue;
        }
        if (c == '"') {
            inString = true;
            out += c;
            continue;
        }
        bool replaced = false;
        for (std::string_view word : {"-Infinity", "Infinity", "NaN"})
            if (text.substr(i, word.size()) == word) {
                out += replacement(word);
                i += word.size() - 1;
                replaced = true;
                break;
            }
        if (!replaced)
            out += c;
    }
    return out;
}

} // namespace shardscope
