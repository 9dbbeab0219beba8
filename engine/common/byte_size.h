#pragma once

// A size in bytes given as text ("300MB", "40GB", "1.5 GiB", "4096"): a memory budget on the
// command line. The number is read as every other number of the CLI is (number_text.h); the unit,
// any case, counts in powers of 1024 whether written MB or MiB, as nvidia-smi's and PyTorch's
// memory figures do.

#include "engine/common/number_text.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>

namespace shardscope {

// Empty when `text` is a positive size, its bytes in `*bytes`; else what is wrong and what is taken.
inline std::string byteSizeProblem(const std::string& text, double* bytes)
{
    static const std::pair<const char*, double> units[] = {{"", 1},
                                                           {"B", 1},
                                                           {"KB", 1024.0},
                                                           {"KIB", 1024.0},
                                                           {"MB", 1048576.0},
                                                           {"MIB", 1048576.0},
                                                           {"GB", 1073741824.0},
                                                           {"GIB", 1073741824.0},
                                                           {"TB", 1099511627776.0},
                                                           {"TIB", 1099511627776.0}};
    const std::string expected = "'" + text + "' is not a size; write e.g. 300MB, 40GB or a number of bytes";
    std::size_t unitStart = text.size();
    while (unitStart > 0 && std::isalpha(static_cast<unsigned char>(text[unitStart - 1])))
        --unitStart;
    std::string number = text.substr(0, unitStart);
    while (!number.empty() && number.back() == ' ')
        number.pop_back();
    std::string unit = text.substr(unitStart);
    std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    const auto* known = std::find_if(std::begin(units), std::end(units), [&](const auto& u) { return unit == u.first; });
    if (known == std::end(units) || number.empty())
        return expected;
    double value = 0;
    if (!numberTextProblem(number, {0, false, 1e18, false}, "", &value).empty())
        return expected;
    if (bytes)
        *bytes = value * known->second;
    return {};
}

} // namespace shardscope
