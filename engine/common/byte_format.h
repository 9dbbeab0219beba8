#pragma once

// Bytes for people: powers of 1024 with IEC units ("0 B", "1.50 KiB", "2.00 GiB"), as the CLI's
// run reports and the workbench show them. (The memory estimate prints Accelerate's own
// "GB"-style text instead, config::formatBytes, so its table reads like
// `accelerate estimate-memory`.)

#include <cmath>
#include <cstdio>
#include <string>

namespace shardscope {

inline std::string formatBytes(double bytes)
{
    static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int unit = 0;
    while (std::fabs(bytes) >= 1024.0 && unit < 5) {
        bytes /= 1024.0;
        ++unit;
    }
    char buffer[48];
    std::snprintf(buffer, sizeof buffer, unit == 0 ? "%.0f %s" : "%.2f %s", bytes, units[unit]);
    return buffer;
}

} // namespace shardscope
