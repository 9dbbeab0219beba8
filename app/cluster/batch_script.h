#pragma once

// The batch script of a cluster run: one Shardscope launcher per node (srun, one task each), the
// nodes' view of the run folder probed first, each attempt of a requeued job in its own folder,
// the time limit's warning, the requeue. Written by `launch --target slurm` into the run folder
// (job.sbatch) and printed by --dry-run. Qt-free and torch-free.

#include "app/cluster/slurm.h"

#include <filesystem>
#include <string>
#include <vector>

namespace shardscope::cluster {

// What the batch script runs on each node.
struct BatchRequest {
    ClusterProfile profile;
    std::string runName;
    std::filesystem::path runDir; // <shared folder>/runs/<name>: the script, logs and node runs go here
    int nodes = 1;
    int processesPerNode = 1;
    std::string shardscope; // the shardscope binary every node runs (absolute, on a shared path)
    std::vector<std::string> launchArgs; // the rest of each node's `shardscope launch` (--request <run folder>/request.json)
    std::vector<std::string> engineFlags; // after `--` (a launch request carries its own)
    // SIGUSR1 before the time limit and a requeue (the engine's ranks save a checkpoint on it); a
    // user's script's Python ranks would die of the signal, so its job asks for neither.
    bool warnBeforeTimeLimit = true;
    // What <runDir>/.shardscope-marker holds (written at submission): before any rank starts, one
    // task per node reads it, and nodes that do not see the run folder (the shared folder not
    // mounted there) are named in <attempt dir>/unseen_folder.txt and end the job. Empty: no probe.
    std::string folderMarker;
};
std::string batchScript(const BatchRequest& request);
// The node count a run folder's batch script asks for (its "#SBATCH --nodes=N" line); 0 when
// unknown, or past what a cluster has (a script edited to ask for 2^31 nodes would have the
// follower look for as many node folders).
int nodesOfBatchScript(const std::filesystem::path& runDir);
// The marker file of a run folder, and a new token to write in it.
std::filesystem::path folderMarkerFile(const std::filesystem::path& runDir);
std::string newFolderMarker();
} // namespace shardscope::cluster
