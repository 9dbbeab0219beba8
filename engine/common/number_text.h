#pragma once

// A number given as text (a command-line option, an engine flag), checked on the text before it
// is converted: conversions let NaN through, saturated 99999999999999999999999 to INT64_MAX, and
// said "Could not convert" of 2.5 or "not in range" of "abc". One wording for every such number.

#include <cmath>
#include <cstdlib>
#include <string>

namespace shardscope {

struct NumberBounds {
    double low = 0;
    bool lowIncluded = true; // false: above `low`
    double high = 0;
    bool whole = false; // a count
};

// Empty when `text` is a finite number within `bounds` (whole when asked), its value in `*value`;
// else what is wrong and what is taken, `range` being how the bounds read ("from 1 to 1024"):
// "'2.5' is not a whole number; give one from 1 to 1024".
inline std::string numberTextProblem(const std::string& text, const NumberBounds& bounds, const std::string& range,
                                     double* value = nullptr)
{
    const std::string kind = bounds.whole ? "a whole number" : "a number";
    char* end = nullptr;
    const double parsed = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !std::isfinite(parsed))
        return "'" + text + "' is not " + kind + "; give one " + range;
    if (bounds.whole && parsed != std::floor(parsed))
        return "'" + text + "' is not a whole number; give one " + range;
    if (parsed < bounds.low || (!bounds.lowIncluded && parsed == bounds.low) || parsed > bounds.high)
        return "'" + text + "' is out of range; give " + kind + " " + range;
    if (value)
        *value = parsed;
    return {};
}

} // namespace shardscope
