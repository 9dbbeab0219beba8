#pragma once

// After a profiled run: the ranks' traces (traces/rank<N>.json) merged into one Chrome trace of the
// run (traces/merged.json), every rank a process, on one clock. The ranks of one machine share
// the monotonic clock, so their own timestamps line up as they are.

#include "engine/common/result.h"

#include <string>

namespace shardscope {

// Returns the merged file's path, or an empty string when the folder holds no rank traces.
Result<std::string> mergeRankTraces(const std::string& tracesDir);

} // namespace shardscope
