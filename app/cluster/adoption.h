#pragma once

// A cluster run's folder taken into this machine's history: a run submitted from another machine
// that shares the folder, or one whose row was lost. Its submission record (run.json) makes it a
// pending run of its job, which this process then follows (follower.h). Qt-free and torch-free.

#include "engine/common/result.h"
#include "storage/run_store.h"

#include <cstdint>
#include <filesystem>
#include <string>

namespace shardscope::cluster {

// The folder's run.json put in as a pending run of its job; a name this history has already gets
// its job beside it. The new run's id.
Result<std::int64_t> adoptFolder(storage::RunStore& store, const std::filesystem::path& runDir);

// The run a `runs follow` reference names: an id or a name of this history, or a cluster run's
// folder (its row, or a new one from the folder's run.json). `adopted`: the row was made here now.
Result<std::int64_t> followedRun(storage::RunStore& store, const std::filesystem::path& home, const std::string& reference,
                                 bool& adopted);

// Whether this process's user owns the run folder's run.json (who submitted it: the file's owner,
// not what it says, which anyone who can write the shared folder could write).
bool ownedByThisUser(const std::filesystem::path& runDir);

// A file of the run folder the history keeps a copy of (empty when there is none).
std::string runFileText(const std::filesystem::path& file);

} // namespace shardscope::cluster
