#pragma once

// `shardscope runs follow --all`, which the workbench runs when it opens: a follower in the
// background for every cluster run of the profiles' shared folders that no process follows on
// this machine: this history's pending or running ones whose follower is gone, and this user's
// runs submitted elsewhere in the last week that are not in it yet (another user's are left to
// `runs follow DIR`). At most 16 start at once. Qt-free and torch-free.

#include <filesystem>
#include <string>

namespace shardscope::cluster {

// What it did is said on standard output, as lines, or with `json` as one document:
// {"started": [{"run", "pid", "log"}...], "said": the lines}. The process's exit code.
int catchUpClusterRuns(const std::filesystem::path& profilesFileGiven, const std::string& programPath, bool json = false);

} // namespace shardscope::cluster
