#pragma once

// Numbers and fields as text that reads back exactly: the shortest spelling of a double (what
// Python's repr and JavaScript print: 0.1, not 0.10000000000000001) and a CSV field quoted as
// RFC 4180 quotes it. Shared by the run export, the recipe writer and the charts' CSV.

#include <charconv>
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

} // namespace shardscope
