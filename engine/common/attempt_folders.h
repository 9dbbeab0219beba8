#pragma once

// Where a run's newest files are once it went on: the run folders of its later attempts, newest
// attempt first — attempts/<N>/ (a continued run's attempt) and its node folders
// attempts/<N>/node<M>/ (a cluster job's). `runs generate` finds the export there, the Run page a
// rank's log. Empty for a run that never went on.

#include "engine/common/run_layout.h"

#include <filesystem>
#include <system_error>
#include <vector>

namespace shardscope {

inline std::vector<std::filesystem::path> attemptRunFolders(const RunLayout& run)
{
    std::error_code ec;
    int attempts = 0;
    while (std::filesystem::is_directory(run.attemptDir(attempts), ec))
        ++attempts;
    std::vector<std::filesystem::path> folders;
    for (int attempt = attempts - 1; attempt >= 0; --attempt) {
        folders.push_back(run.attemptDir(attempt));
        for (int node = 0; std::filesystem::is_directory(run.nodeDir(attempt, node), ec); ++node)
            folders.push_back(run.nodeDir(attempt, node));
    }
    return folders;
}

} // namespace shardscope
