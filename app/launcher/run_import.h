#pragma once

// A run directory's events put into the history afterwards: what the shardscope Python reporter
// writes when a script runs under a plain `accelerate launch` (no Shardscope launcher): one
// events/rank<N>.jsonl per rank, in the engine's event protocol. A launcher's own events.jsonl is
// read too, so a run whose history was lost can be recorded again. `shardscope runs import`.

#include "engine/common/result.h"

#include <cstdint>
#include <filesystem>
#include <string>

namespace shardscope {

struct ImportedRun {
    std::int64_t runId = 0;
    std::string name;
    int ranks = 0; // ranks heard from
    std::int64_t events = 0;
    std::int64_t malformed = 0; // lines that were not events (skipped)
    std::string status; // "completed", "failed", "interrupted"
};

// `name` empty: the directory's name. Refused when the history already has a run of that name.
Result<ImportedRun> importRunDirectory(const std::filesystem::path& home, const std::filesystem::path& runDir,
                                       const std::string& name = {});

} // namespace shardscope
