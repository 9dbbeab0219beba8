#pragma once

// The wall clock as events and the history keep it: seconds since the Unix epoch.

#include <chrono>

namespace shardscope {

inline double unixSeconds() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

} // namespace shardscope
