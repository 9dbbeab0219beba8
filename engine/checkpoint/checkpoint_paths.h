#pragma once

// Where checkpoints are and which one a reference means, without torch: the launcher checks
// --resume_from_checkpoint before any rank starts, and the ranks resolve it the same way.

#include "engine/common/result.h"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace shardscope::checkpoint {

// N of a folder named step_<N>.
std::optional<std::int64_t> stepOf(const std::filesystem::path& dir);
// A step_<N> folder with its manifest.json (written last: the checkpoint is whole).
bool isComplete(const std::filesystem::path& dir);
// The complete step_<N> folders directly inside `dir`, newest (highest N) first.
std::vector<std::filesystem::path> completeCheckpoints(const std::filesystem::path& dir);

// `reference` is a step_<N> folder, a folder holding step_<N> folders (a run's checkpoints/ or the
// run directory), or "latest" (the newest complete checkpoint of any run under `runsDir` whose
// recipe has the name `recipeName`). Incomplete folders are skipped; for "latest", so are run
// folders and checkpoints that are symbolic links leading out of `runsDir`.
Result<std::string> resolveCheckpoint(const std::string& reference, const std::string& runsDir, const std::string& recipeName);

} // namespace shardscope::checkpoint
