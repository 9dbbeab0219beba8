#include "app/cli/slurm_launch.h"

#include "app/cluster/cluster_launch.h"
#include "app/launcher/run_directory.h"
#include "app/launcher/script_run.h"
#include "app/runs/local_run.h"
#include "engine/accelerate/accelerate_config.h"
#include "engine/plan/precision_mode.h"
#include "engine/recipe/recipe.h"

#include <filesystem>
#include <iostream>

namespace shardscope::cli {

using cluster::PlannedShape;
using cluster::SlurmLaunch;

namespace {

void printError(const std::string& message) { std::cerr << "shardscope launch: error: " << message << "\n"; }

// What every SLURM launch takes from the command line: where it goes, and what every node runs.
SlurmLaunch slurmLaunchOf(const runs::LaunchRequest& request, const std::string& programPath)
{
    SlurmLaunch launch;
    launch.target = request.target;
    launch.profilesFile = request.clusterProfiles;
    // What the nodes run: the request less where it goes and its history's bookkeeping, which are
    // this launcher's (each node's launcher gets its place on its command line).
    runs::LaunchRequest& node = launch.node;
    node.worker = request.worker;
    node.workerArgs = request.workerArgs;
    node.recipe = request.recipe;
    node.configFile = runs::configFileOf(request);
    node.maxSteps = request.maxSteps;
    node.mixedPrecision = request.mixedPrecision;
    node.profile = request.profile;
    node.tags = request.tags;
    node.heartbeatTimeout = request.heartbeatTimeout;
    node.maxNonfiniteSteps = request.maxNonfiniteSteps;
    node.stragglers = request.stragglers;
    node.lossSpikes = request.lossSpikes;
    node.rendezvousTimeout = request.rendezvousTimeout;
    node.accelerateFlags = request.accelerateFlags; // each node's launch merges them as this one does
    // The ranks and nodes: the flags, else the config's (as a local launch takes them); a config
    // that does not load is reported by the plan's check.
    node.numProcesses = request.numProcesses;
    node.numMachines = request.numMachines;
    if (auto loaded = node.configFile.empty() ? Result<config::AccelerateConfig>(makeError(""))
                                              : config::loadAccelerateConfig(node.configFile)) {
        if (!request.givenNumProcesses)
            node.numProcesses = static_cast<int>(loaded->intField("num_processes").value_or(node.numProcesses));
        if (!request.givenNumMachines)
            node.numMachines = static_cast<int>(loaded->intField("num_machines").value_or(node.numMachines));
    }
    node.givenNumProcesses = node.givenNumMachines = true;
    launch.dryRun = request.dryRun;
    launch.detach = request.detach;
    launch.noHistory = request.noHistory;
    launch.tags = request.tags;
    launch.programPath = programPath;
    return launch;
}

// The launch as node 0 will plan it (a stand-in rendezvous: the batch script sets the real one).
runs::LaunchRequest plannedAsANode(const runs::LaunchRequest& request, const SlurmLaunch& launch)
{
    runs::LaunchRequest planned = request;
    planned.numProcesses = launch.node.numProcesses;
    planned.numMachines = launch.node.numMachines;
    planned.mainProcessIp = "127.0.0.1";
    planned.mainProcessPort = 29500;
    planned.machineRank = 0;
    planned.givenIp = planned.givenPort = planned.givenMachineRank = true;
    planned.givenNumMachines = planned.givenNumProcesses = true;
    return planned;
}

// A user's Accelerate script on SLURM: each node's launcher runs the real `accelerate launch`
// with that node's --machine_rank, the head's address and the job's port; the script and the
// Python environment must be where every node finds them at the same path.
int launchScriptOnSlurm(const runs::LaunchRequest& request, const std::string& programPath)
{
    auto python = resolvePython(request.python);
    if (!python) {
        printError(python.error().message);
        return 2;
    }
    SlurmLaunch launch = slurmLaunchOf(request, programPath);
    std::error_code ec;
    launch.node.script = std::filesystem::absolute(request.script, ec).lexically_normal().string();
    launch.node.python = std::filesystem::absolute(*python, ec).string();
    launch.runName = request.runName.empty() ? timestampedRunId(std::filesystem::path(request.script).stem().string())
                                             : request.runName;
    const runs::LaunchRequest planned = plannedAsANode(request, launch);
    return cluster::runSlurmLaunch(launch, [&](int gpusPerNode) {
        runs::LaunchRequest node = planned;
        if (gpusPerNode > 0)
            node.machine = config::MachineInfo{gpusPerNode, true, true, {}};
        auto accelerateConfig = runs::scriptConfig(node);
        if (!accelerateConfig)
            return std::optional<PlannedShape>();
        const auto plan = runs::planScript(node, *accelerateConfig, launch.node.python, nullptr);
        return plan ? std::optional<PlannedShape>(PlannedShape{plan->distributedType, plan->mixedPrecision}) : std::nullopt;
    });
}

} // namespace

int launchOnSlurm(const runs::LaunchRequest& request, const std::string& programPath)
{
    if (!request.script.empty())
        return launchScriptOnSlurm(request, programPath);
    auto recipe = config::loadRecipe(request.recipe);
    if (!recipe) {
        printError(recipe.error().message);
        return 2;
    }
    SlurmLaunch launch = slurmLaunchOf(request, programPath);
    launch.runName = request.runName.empty() ? timestampedRunId(recipe->name) : request.runName;
    runs::LaunchRequest planned = plannedAsANode(request, launch);
    return cluster::runSlurmLaunch(launch, [&](int gpusPerNode) {
        // The nodes' GPUs, not this machine's (a login node may have none); what they support is
        // checked again on the nodes at launch.
        if (gpusPerNode > 0)
            planned.machine = config::MachineInfo{gpusPerNode, true, true, {}};
        int exitCode = 0;
        const auto plan = runs::planRun(planned, *recipe, std::string(), exitCode);
        return plan ? std::optional<PlannedShape>(
                   PlannedShape{plan->distributedType, std::string(precision::modeName(plan->precision))})
                    : std::nullopt;
    });
}

} // namespace shardscope::cli
