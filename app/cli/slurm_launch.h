#pragma once

// `shardscope launch --target slurm[:PROFILE]`: the run planned and checked here, its files
// copied into the profile's shared folder, the batch script written beside them (printed with
// --dry-run), checked with `sbatch --test-only` and submitted; then followed (pending with SLURM's
// reason and what to do, running on which nodes, its end state) unless --detach, and the nodes'
// events put into this machine's history (never written over the shared folder).

#include "app/runs/launch_request.h"

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace shardscope::cli {

struct SlurmLaunch {
    std::string target; // "slurm" or "slurm:PROFILE"
    std::filesystem::path profilesFile; // $SHARDSCOPE_HOME/clusters.ini unless given
    std::string runName;
    std::string recipe; // a recipe run's, or
    std::string script; // a user's Accelerate script (absolute), run with
    std::string python; // this interpreter's accelerate (absolute; the nodes' path too)
    std::string configFile; // empty: none
    int numProcesses = 1; // over every node
    int numMachines = 1; // nodes
    std::vector<std::string> nodeArgs; // more of each node's `shardscope launch` (--max_steps, ...)
    std::vector<std::string> engineFlags; // a script run's: the script's arguments
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

// --target slurm[:PROFILE] of a launch request (runs::refusalsOf has passed it): the plan checked
// here as a local launch of the same shape would be (on the profile's GPUs per node), then the job
// written, checked and submitted (runSlurmLaunch). Returns the exit code.
int launchOnSlurm(const runs::LaunchRequest& request, const std::string& programPath);

// `shardscope runs follow RUN`: a cluster run whose submitting launcher is gone (--detach, a closed
// terminal, a workbench on another machine) followed from here until its job ends: SLURM's state
// into the history, the nodes' steps recorded as they come (what the history already has is not
// recorded twice), the attempts and the end. Refused while its own launcher still follows it.
// RUN may be a cluster run's folder that this history does not have (submitted from another
// machine that shares the folder): its run.json puts it in. SIGINT cancels the job, as in
// `launch`. With `all`: a follower in the background for each run of the profiles' shared folders
// that nobody follows here (the workbench does this when it opens). Returns the exit code.
struct FollowRequest {
    std::string reference; // a run id or name, or a cluster run's folder
    bool all = false;
    std::filesystem::path profilesFile; // --all: $SHARDSCOPE_HOME/clusters.ini unless given
    std::string programPath; // argv[0]: the followers --all starts run this program
};
int followSlurmRun(const FollowRequest& request);

} // namespace shardscope::cli
