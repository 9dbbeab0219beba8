#pragma once

// Numbers and fields as text that reads back exactly: the shortest spelling of a double (what
// Python's repr and JavaScript print: 0.1, not 0.10000000000000001) and a CSV field quoted as
// RFC 4180 quotes it. Shared by the run export, the recipe writer and the charts' CSV. And
// recorded text made safe for a terminal (terminalSafe).

#include <charconv>
#include <cstdio>
#include <string>
#include <string_view>

namespace shardscope {

inline std::string shortestNumber(double value)
{
    char buffer[32];
    const auto written = std::to_chars(buffer, buffer + sizeof buffer, value);
    return std::string(buffer, written.ptr);
}

inline std::string csvField(std::string_view text)
{
    if (text.find_first_of(",\"\n") == std::string_view::npos)
        return std::string(text);
    std::string out = "\"";
    for (char c : text) {
        if (c == '"')
            out += '"';
        out += c;
    }
    return out + "\"";
}

// Recorded text (names, errors, notes, hosts: what ranks and imported files said) as a terminal
// shows it without obeying it: control characters other than line breaks and tabs, C0 and C1
// (an escape sequence that sets the window title or clears the screen), are written as \xNN.
inline std::string terminalSafe(std::string_view text)
{
    std::string out;
    out.reserve(text.size());
    char hex[8];
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto byte = static_cast<unsigned char>(text[i]);
        const bool c1 = byte == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80
                        && static_cast<unsigned char>(text[i + 1]) <= 0x9F; // U+0080..U+009F in UTF-8
        if ((byte < 0x20 && byte != '\n' && byte != '\t') || byte == 0x7F) {
            std::snprintf(hex, sizeof hex, "\\x%02x", byte);
            out += hex;
        } else if (c1) {
            std::snprintf(hex, sizeof hex, "\\u%04x", static_cast<unsigned char>(text[++i]));
            out += hex;
        } else {
            out += text[i];
        }
    }
    return out;
}

} // namespace shardscope
