#pragma once

// A run launched on a SLURM cluster (`shardscope launch --target slurm[:PROFILE]`): planned and
// checked here, its files copied into the profile's shared folder, the batch script written beside
// them (printed with --dry-run), checked with `sbatch --test-only` and submitted; run.json written
// for any other machine that follows it (submission.h); then followed (follower.h: pending with
// SLURM's reason and what to do, running on which nodes, its end) unless --detach, and the nodes'
// events put into this machine's history (never written over the shared folder). Qt-free and
// torch-free.

#include "app/runs/launch_request.h"

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace shardscope::cluster {

struct SlurmLaunch {
    std::string target; // "slurm" or "slurm:PROFILE"
    std::filesystem::path profilesFile; // $SHARDSCOPE_HOME/clusters.ini unless given
    std::string runName;
    // What every node's launcher runs, written into the run folder (request.json) with the recipe
    // and config copied beside it: a recipe (a path here) or a user's script (absolute, where every
    // node sees it) with its python, the config file (empty: none), accelerate launch's flags,
    // the engine's flags or the script's arguments (workerArgs), and the ranks over the nodes
    // (numProcesses over numMachines, resolved from the flags and the config).
    runs::LaunchRequest node;
    bool dryRun = false;
    bool detach = false;
    bool noHistory = false;
    std::vector<std::string> tags; // the run's tags in the history
    std::string programPath; // argv[0]
};

// What the history shows of the planned run (as a local launch records it).
struct PlannedShape {
    std::string distributedType; // Accelerate's spelling
    std::string mixedPrecision;
};

// `checkPlan` plans the run as a local launch would (config, recipe, flags) on a machine with the
// profile's GPUs per node (the submitting machine's own may be none): none when refused (it has
// said why). Returns the process's exit code.
int runSlurmLaunch(const SlurmLaunch& launch, const std::function<std::optional<PlannedShape>(int gpusPerNode)>& checkPlan);

} // namespace shardscope::cluster
