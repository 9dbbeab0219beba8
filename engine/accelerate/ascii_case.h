#pragma once

// ASCII case folding for config words (BF16, eager, FULL_SHARD): Accelerate lower- or upper-cases
// these with Python's str methods, which for its ASCII vocabulary is exactly this.

#include <algorithm>
#include <cctype>
#include <string>

namespace shardscope::config {

inline std::string asciiLower(std::string s)
{
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}

inline std::string asciiUpper(std::string s)
{
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    return s;
}

} // namespace shardscope::config
