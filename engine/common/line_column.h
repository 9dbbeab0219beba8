#pragma once

// Where a byte offset of a text is, as editors count: line and column from 1, columns in
// characters (UTF-8 continuation bytes do not count). For file:line:column messages.

#include <cstddef>
#include <string_view>

namespace shardscope {

inline void lineColumnOf(std::string_view text, std::size_t offset, int& line, int& column)
{
    line = 1;
    column = 1;
    for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
        if (text[i] == '\n') {
            ++line;
            column = 1;
        } else if ((static_cast<unsigned char>(text[i]) & 0xc0) != 0x80) {
            ++column;
        }
    }
}

} // namespace shardscope
