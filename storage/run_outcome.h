#pragma once

// A run's outcome as its launcher decided it, kept in the run directory (outcome.json) as well as
// in the history: when the history cannot be written as the run ends (a full disk, a read-only
// home), the outcome is not lost, and the next open of the history that can write records it
// instead of calling the run interrupted. The file is reserved when the run starts, so that
// writing it at the end needs no new space on the disk.

#include "engine/common/result.h"
#include "storage/run_types.h"

#include <filesystem>
#include <optional>

namespace shardscope::storage {

// Creates <runDir>/outcome.json as 4 KiB of blanks.
Result<void> reserveOutcomeFile(const std::filesystem::path& runDir);
// Writes `end` into the reserved file in place (no truncation: blanks pad it) and syncs it. A
// file that was not reserved is created.
Result<void> writeOutcomeFile(const std::filesystem::path& runDir, const RunEnd& end);
// The outcome written there; nothing when there is no file or only the reservation.
std::optional<RunEnd> readOutcomeFile(const std::filesystem::path& runDir);

} // namespace shardscope::storage
