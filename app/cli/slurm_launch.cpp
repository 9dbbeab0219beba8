#include "app/cli/slurm_launch.h"

#include "app/cluster/attempts.h"
#include "app/cluster/slurm.h"
#include "app/launcher/program.h"
#include "app/launcher/run_import.h"
#include "storage/run_store.h"
#include "storage/store_paths.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <thread>

namespace shardscope::cli {

namespace {

namespace fs = std::filesystem;

void printError(const std::string& message) { std::cerr << "shardscope launch: error: " << message << "\n"; }

// Copies `from` into the run directory as `name`: the nodes read their inputs from the shared folder.
Result<std::string> copyIn(const std::string& from, const fs::path& runDir, const std::string& name)
{
    std::error_code ec;
    const fs::path to = runDir / name;
    fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
    if (ec)
        return makeError("cannot copy " + from + " to " + to.string() + ": " + ec.message());
    return to.string();
}

// The run into this machine's history once the job has ended: every attempt's events of every
// node gathered into the run folder's events.jsonl, imported, and each attempt recorded.
void recordInHistory(const fs::path& home, const fs::path& runDir, const std::string& runName, int nodes)
{
    const auto attempts = cluster::readAttempts(runDir);
    if (attempts.empty()) {
        std::cerr << "shardscope launch: warning: the job made no attempt folder under " << (runDir / "attempts").string()
                  << "; its output is in " << (runDir / "slurm-<job>.out").string() << "\n";
        return;
    }
    if (auto gathered = cluster::gatherAttemptEvents(runDir, nodes, attempts); !gathered) {
        std::cerr << "shardscope launch: warning: " << gathered.error().message << "\n";
        return;
    }
    auto imported = importRunDirectory(home, runDir, runName);
    if (!imported) {
        std::cerr << "shardscope launch: warning: the run is not in the history: " << imported.error().message << "\n";
        return;
    }
    auto store = storage::RunStore::open(storage::historyFile(home));
    for (const auto& a : attempts) {
        storage::RunAttempt row;
        row.attempt = a.attempt;
        row.jobId = std::to_string(a.jobId);
        row.nodes = a.nodes;
        if (a.startedAt > 0)
            row.startedAt = a.startedAt;
        if (a.endedAt > 0)
            row.endedAt = a.endedAt;
        if (a.exitCode >= 0)
            row.exitCode = a.exitCode;
        row.resumedStep = a.resumedStep;
        row.resumedFrom = a.resumedFrom;
        if (auto recorded = store ? store->recordAttempt(imported->runId, row) : Result<void>(store.error()); !recorded)
            std::cerr << "shardscope launch: warning: attempt " << a.attempt
                      << " is not in the history: " << recorded.error().message << "\n";
        if (a.attempt > 0)
            std::cout << "shardscope launch: attempt " << a.attempt << " resumed after step " << a.resumedStep << " from "
                      << a.resumedFrom << "\n";
    }
    std::cout << "shardscope launch: run " << imported->runId << " in the history: " << imported->status << " ("
              << attempts.size() << (attempts.size() == 1 ? " attempt" : " attempts") << ")\n";
}

// Follows the job until it ends, saying each change of state; its last state.
cluster::JobState follow(const cluster::SlurmClient& slurm, std::int64_t jobId)
{
    std::string said;
    while (true) {
        auto state = slurm.state(jobId);
        if (!state) {
            std::cerr << "shardscope launch: " << state.error().message << "\n";
            return {"UNKNOWN", {}, {}, {}};
        }
        const std::string now = state->state + "|" + state->reason + "|" + state->nodes;
        if (now != said) {
            said = now;
            if (state->state == "PENDING")
                std::cout << "shardscope launch: job " << jobId << " is pending (" << state->reason
                          << "): " << cluster::pendingAdvice(state->reason) << std::endl;
            else if (!state->ended())
                std::cout << "shardscope launch: job " << jobId << " is " << state->state << " on " << state->nodes << std::endl;
        }
        if (state->ended())
            return *state;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
}

// SLURM's client on this machine, the profile's partition, and enough nodes in it.
Result<void> checkCluster(const cluster::SlurmClient& slurm, const cluster::ClusterProfile& profile, const fs::path& profilesFile,
                          int nodes)
{
    if (auto client = cluster::SlurmClient::available(); !client)
        return client.error();
    auto partitions = slurm.partitions();
    if (!partitions)
        return partitions.error();
    const cluster::Partition* chosen = nullptr;
    std::string names;
    for (const auto& p : *partitions) {
        names += (names.empty() ? "" : ", ") + p.name;
        if (profile.partition.empty() ? p.isDefault : p.name == profile.partition)
            chosen = &p;
    }
    if (!chosen)
        return makeError(profile.partition.empty() ? "the cluster has no default partition; set partition in [" + profile.name
                                                         + "] of " + profilesFile.string() + " (partitions: " + names + ")"
                                                   : "partition '" + profile.partition + "' of profile [" + profile.name
                                                         + "] does not exist; the cluster's partitions are " + names);
    if (chosen->nodes < nodes)
        return makeError("partition " + chosen->name + " has " + std::to_string(chosen->nodes) + " nodes and the run asks for "
                         + std::to_string(nodes) + " (--num_machines); ask for fewer, or use a larger partition");
    return {};
}

} // namespace

int runSlurmLaunch(const SlurmLaunch& launch, const std::function<bool(int gpusPerNode)>& checkPlan)
{
    const auto colon = launch.target.find(':');
    const std::string profileName = colon == std::string::npos ? "default" : launch.target.substr(colon + 1);
    auto home = storage::shardscopeHome();
    const fs::path profilesFile = !launch.profilesFile.empty() ? launch.profilesFile
                                  : home                       ? *home / "clusters.ini"
                                                               : fs::path("clusters.ini");
    auto profile = cluster::loadProfile(profilesFile, profileName);
    if (!profile) {
        printError(profile.error().message);
        return 2;
    }
    if (launch.recipe.empty()) {
        printError("--target slurm runs a recipe (--recipe R); a script on SLURM is not supported yet");
        return 2;
    }
    if (launch.numProcesses % launch.numMachines != 0) {
        printError("--num_processes " + std::to_string(launch.numProcesses) + " is not a multiple of --num_machines "
                   + std::to_string(launch.numMachines) + " (the nodes)");
        return 2;
    }
    if (!checkPlan(cluster::gpusPerNode(*profile)))
        return 2;
    const cluster::SlurmClient slurm;
    if (!launch.dryRun)
        if (auto fits = checkCluster(slurm, *profile, profilesFile, launch.numMachines); !fits) {
            printError(fits.error().message);
            return 2;
        }
    const fs::path runDir = fs::path(profile->sharedFolder) / "runs" / launch.runName;
    std::error_code ec;
    if (fs::exists(runDir, ec)) {
        printError(runDir.string() + " exists: another run has this name; choose another --run_name");
        return 2;
    }
    fs::create_directories(runDir / "attempts", ec);
    if (ec) {
        printError("cannot create " + runDir.string() + " in the profile's shared folder: " + ec.message());
        return 2;
    }
    cluster::BatchRequest request;
    request.profile = *profile;
    request.runName = launch.runName;
    request.runDir = runDir;
    request.nodes = launch.numMachines;
    request.processesPerNode = launch.numProcesses / launch.numMachines;
    request.shardscope = thisExecutable(launch.programPath).string();
    auto recipe = copyIn(launch.recipe, runDir, "recipe.yaml");
    if (!recipe) {
        printError(recipe.error().message);
        return 2;
    }
    request.launchArgs = {"--recipe", *recipe};
    if (!launch.configFile.empty()) {
        auto config = copyIn(launch.configFile, runDir, "config.yaml");
        if (!config) {
            printError(config.error().message);
            return 2;
        }
        request.launchArgs.insert(request.launchArgs.end(), {"--config_file", *config});
    }
    request.launchArgs.insert(request.launchArgs.end(), launch.nodeArgs.begin(), launch.nodeArgs.end());
    request.engineFlags = launch.engineFlags;
    const fs::path script = runDir / "job.sbatch";
    std::ofstream(script) << cluster::batchScript(request);
    if (launch.dryRun) {
        std::ifstream in(script);
        std::cout << in.rdbuf();
        std::cout << "# (written to " << script.string() << "; not submitted: --dry-run)\n";
        return 0;
    }
    if (auto tested = slurm.testSubmit(script); !tested) {
        printError("SLURM refuses the job: " + tested.error().message + " (the script: " + script.string() + ")");
        return 2;
    }
    auto jobId = slurm.submit(script);
    if (!jobId) {
        printError(jobId.error().message);
        return 1;
    }
    std::ofstream(runDir / "slurm_job_id") << *jobId << "\n";
    std::cout << "shardscope launch: submitted job " << *jobId << " (" << launch.numMachines << " nodes; run folder "
              << runDir.string() << ")" << std::endl;
    if (launch.detach)
        return 0;
    const cluster::JobState end = follow(slurm, *jobId);
    std::cout << "shardscope launch: job " << *jobId << " ended " << end.state << " (exit " << end.exitCode << ")\n";
    if (!launch.noHistory && home)
        recordInHistory(*home, runDir, launch.runName, launch.numMachines);
    return end.state == "COMPLETED" ? 0 : 1;
}

} // namespace shardscope::cli
