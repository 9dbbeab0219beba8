// The UTF-8 layer of the YAML and JSON readers and writers, and the checks PyYAML's reader makes
// before parsing. See Note [PyYAML compatibility] in yaml_io.cpp.

#include "engine/accelerate/yaml_detail.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>

namespace shardscope::config::detail {

std::string where(const std::string& source, int line, int column)
{
    return source + ":" + std::to_string(line) + ":" + std::to_string(column);
}

// ---- UTF-8 -----------------------------------------------------------------------------------

// Decodes UTF-8; on failure returns false and the byte offset of the bad sequence.
bool decodeUtf8(std::string_view s, std::u32string& out, std::size_t& badOffset)
{
    out.clear();
    std::size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        char32_t cp = 0;
        int len = 0;
        if (c < 0x80) {
            cp = c;
            len = 1;
        } else if ((c >> 5) == 0x6) {
            cp = c & 0x1f;
            len = 2;
        } else if ((c >> 4) == 0xe) {
            cp = c & 0x0f;
            len = 3;
        } else if ((c >> 3) == 0x1e) {
            cp = c & 0x07;
            len = 4;
        } else {
            badOffset = i;
            return false;
        }
        if (i + len > s.size()) {
            badOffset = i;
            return false;
        }
        for (int k = 1; k < len; ++k) {
            const auto cc = static_cast<unsigned char>(s[i + k]);
            if ((cc >> 6) != 0x2) {
                badOffset = i;
                return false;
            }
            cp = (cp << 6) | (cc & 0x3f);
        }
        const bool overlong = (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
        if (overlong || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
            badOffset = i;
            return false;
        }
        out.push_back(cp);
        i += len;
    }
    return true;
}

void appendUtf8(std::string& out, char32_t cp)
{
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xc0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xe0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
        out += static_cast<char>(0xf0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    }
}

std::string toUtf8(const std::u32string& s)
{
    std::string out;
    for (char32_t c : s)
        appendUtf8(out, c);
    return out;
}

std::u32string fromUtf8Lenient(const std::string& s)
{
    std::u32string out;
    std::size_t bad = 0;
    if (!decodeUtf8(s, out, bad)) {
        out.clear();
        for (unsigned char c : s)
            out.push_back(c);
    }
    return out;
}

// PyYAML's Reader.NON_PRINTABLE complement.
bool pyyamlPrintable(char32_t c)
{
    return c == 0x9 || c == 0xa || c == 0xd || (c >= 0x20 && c <= 0x7e) || c == 0x85 || (c >= 0xa0 && c <= 0xd7ff)
           || (c >= 0xe000 && c <= 0xfffd) || (c >= 0x10000 && c <= 0x10ffff);
}

Result<void> checkReadable(const std::string& text, const std::string& source)
{
    std::u32string decoded;
    std::size_t bad = 0;
    if (!decodeUtf8(text, decoded, bad)) {
        int line = 0, column = 0;
        lineColumnOf(text, bad, line, column);
        char b[4];
        std::snprintf(b, sizeof b, "%02x", static_cast<unsigned char>(text[bad]));
        return errorAt(ErrorKind::Syntax, source, line, column, "the file is not valid UTF-8 (byte 0x" + std::string(b) + ")",
                       "save it as UTF-8 text");
    }
    int line = 1, column = 1;
    for (char32_t c : decoded) {
        if (!pyyamlPrintable(c)) {
            char b[16];
            std::snprintf(b, sizeof b, "#x%04x", static_cast<unsigned>(c));
            return errorAt(ErrorKind::Syntax, source, line, column,
                           "unacceptable character " + std::string(b) + ": special characters are not allowed in YAML",
                           "remove it");
        }
        if (c == '\n') {
            ++line;
            column = 1;
        } else {
            ++column;
        }
    }
    return {};
}

// yaml-cpp recurses once per nesting level; refuse absurd flow nesting before it can overflow
// the stack (mutated or hostile input), with the position of the offending bracket.
Result<void> checkNesting(const std::string& text, const std::string& source)
{
    int depth = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '[' || c == '{') {
            if (++depth > kMaxDepth) {
                int line = 0, column = 0;
                lineColumnOf(text, i, line, column);
                return makeError(where(source, line, column) + ": nesting deeper than " + std::to_string(kMaxDepth)
                                 + " levels; a config file is never this deep");
            }
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    return {};
}

} // namespace shardscope::config::detail
