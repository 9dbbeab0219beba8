#pragma once

// A run directory's events put into the history afterwards: what the shardscope Python reporter
// writes when a script runs under a plain `accelerate launch` (no Shardscope launcher): one
// events/rank<N>.jsonl per rank, in the engine's event protocol. A launcher's own events.jsonl is
// read too, so a run whose history was lost can be recorded again. `shardscope runs import`.

#include "engine/common/result.h"
#include "engine/protocol/events.h"
#include "storage/run_types.h"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <utility>
#include <string>
#include <vector>

namespace shardscope {

namespace storage {
class RunStore;
}

struct ImportedRun {
    std::int64_t runId = 0;
    std::string name;
    int ranks = 0; // ranks heard from
    std::int64_t events = 0;
    std::int64_t malformed = 0; // lines that were not events (skipped)
    std::string status; // "completed", "failed", "interrupted"
};

// Every event of a run directory (events/rank<N>.jsonl and events.jsonl), in time order; lines that
// are not events are counted in `malformed`. Reading for longer than `deadline` is an error.
Result<std::vector<protocol::Event>> readRunEvents(const std::filesystem::path& runDir, std::int64_t& malformed,
                                                   std::chrono::milliseconds deadline = std::chrono::minutes(5));

// The history's run whose folder `runDir` is already (its id and name), if any: a folder belongs to
// one run (deleting a second row would delete the first run's files). Relative folders are `home`'s.
std::optional<std::pair<std::int64_t, std::string>> runOwningFolder(const storage::RunStore& store,
                                                                    const std::filesystem::path& home,
                                                                    const std::filesystem::path& runDir);

// `name` empty: the directory's name. Refused when the history already has a run of that name.
Result<ImportedRun> importRunDirectory(const std::filesystem::path& home, const std::filesystem::path& runDir,
                                       const std::string& name = {});

} // namespace shardscope
