#include "app/runs/launch_request.h"

#include "engine/common/dist_env.h"
#include "engine/accelerate/questionnaire.h"
#include "engine/accelerate/yaml_io.h"
#include "engine/common/result.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace shardscope::runs {

std::vector<std::string> refusalsOf(const LaunchRequest& request)
{
    std::vector<std::string> refusals;
    const bool local = request.target == "local";
    if (!request.continueRun.empty()
        && (!local || !request.script.empty() || !request.resumeFrom.empty() || !request.runName.empty()
            || !request.runsDir.empty() || request.noHistory))
        refusals.emplace_back("--continue_run goes on with a run of this machine's history, in its folder, from its newest "
                              "checkpoint: it takes no --target, --script, --resume_from_checkpoint, --run_name, --runs_dir or "
                              "--no_history");
    if (!request.recipe.empty() && !request.script.empty())
        refusals.emplace_back("--recipe and --script are two kinds of run; give one (a recipe trains Shardscope's engine, a "
                              "script runs your own Accelerate script)");
    if (!request.script.empty() && request.maxSteps > 0)
        refusals.emplace_back("--max_steps sets a recipe's training.max_steps; a script takes its own step count: pass it after "
                              "-- (for example -- --max_steps "
                              + std::to_string(request.maxSteps) + ")");
    if (local) {
        if (request.dryRun || request.detach)
            refusals.emplace_back("--dry_run and --detach are for --target slurm (a local launch runs in the foreground; the "
                                  "workbench starts it detached)");
        // (runLaunch refuses these too, for every other caller; a training launch's plan checks
        // them with the config's values.)
        // (A continued run is a recipe's: its recipe and process count come with the continuation.)
        const bool workerCommand = request.recipe.empty() && request.continueRun.empty();
        if (workerCommand && request.numMachines == 1 && !isLoopbackHost(request.mainProcessIp))
            refusals.emplace_back("--main_process_ip " + request.mainProcessIp
                                  + " would open the rendezvous store, which has no authentication, to the network for a run "
                                    "on this machine alone; leave it unset (127.0.0.1), or give --num_machines N for a job over "
                                    "several machines");
        if (workerCommand && request.numProcesses % request.numMachines != 0)
            refusals.emplace_back("--num_processes " + std::to_string(request.numProcesses)
                                  + " is not a multiple of --num_machines " + std::to_string(request.numMachines)
                                  + "; num_processes counts the ranks of all machines together");
        return refusals;
    }
    if (request.target != "slurm" && request.target.rfind("slurm:", 0) != 0) {
        refusals.emplace_back("--target " + request.target + " is not local, slurm or slurm:PROFILE");
        return refusals;
    }
    for (const auto& [given, flag] : {std::pair{request.givenMachineRank, "--machine_rank"},
                                      {request.givenIp, "--main_process_ip"},
                                      {request.givenPort, "--main_process_port"}})
        if (given)
            refusals.emplace_back(std::string(flag)
                                  + " is the batch script's to set on each node under --target slurm; leave it out");
    if (!request.resumeFrom.empty() || request.profile)
        refusals.emplace_back("--target slurm resumes by itself (a requeued job) and does not profile yet; "
                              "--resume_from_checkpoint and --profile are not taken there");
    if (request.recipe.empty() && request.script.empty())
        refusals.emplace_back("--target slurm needs --recipe R (or --script S)");
    return refusals;
}

// Accelerate's config file for this launch: --config_file, else the default file if it exists
// (as `accelerate launch` does); empty: none.
std::string configFileOf(const LaunchRequest& request)
{
    if (!request.configFile.empty())
        return request.configFile;
    return std::filesystem::exists(config::defaultConfigFile()) ? config::defaultConfigFile() : std::string();
}

// The launch flags given on the command line, as Accelerate merges them into the config file's
// values (bf16-pure is the engine's own mode: the config keeps its value, the plan takes the flag).
config::LaunchOverrides launchOverridesOf(const LaunchRequest& request)
{
    config::LaunchOverrides overrides;
    if (request.givenNumProcesses)
        overrides.numProcesses = request.numProcesses;
    if (request.givenNumMachines)
        overrides.numMachines = request.numMachines;
    if (request.givenMachineRank)
        overrides.machineRank = request.machineRank;
    if (request.givenIp)
        overrides.mainProcessIp = request.mainProcessIp;
    if (request.givenPort)
        overrides.mainProcessPort = request.mainProcessPort;
    if (!request.mixedPrecision.empty() && request.mixedPrecision != "bf16-pure")
        overrides.mixedPrecision = request.mixedPrecision;
    return overrides;
}

// Whether accelerate launch's flags ask for config keys (a launch without a config file then gets
// one that they describe).
bool flagsSetConfigKeys(const LaunchRequest& request)
{
    return std::any_of(request.accelerateFlags.begin(), request.accelerateFlags.end(), [](const config::GivenLaunchFlag& f) {
        const auto* flag = config::findAccelerateLaunchFlag(f.name);
        return flag && flag->use == config::LaunchFlagUse::ConfigKey;
    });
}

// The config this launch runs: the file's (a launch without one, given accelerate launch's config
// flags, starts from the launch's shape as accelerate launch does without a file), with the flags
// merged in as accelerate launch merges them. The flags' own problems were reported before
// anything started (reportAccelerateFlags); none when there is no config to run.
std::optional<config::AccelerateConfig> launchConfigOf(const LaunchRequest& request,
                                                       const std::optional<config::AccelerateConfig>& file)
{
    if (!file && !flagsSetConfigKeys(request))
        return std::nullopt;
    config::AccelerateConfig base{config::ConfigKind::Cluster, config::Value::emptyMap()};
    if (file) {
        base = *file;
    } else {
        base.setField("compute_environment", config::Value("LOCAL_MACHINE"));
        base.setField("distributed_type", config::Value(request.numProcesses > 1 ? "MULTI_CPU" : "NO"));
        base.setField("num_processes", config::Value(request.numProcesses));
    }
    std::vector<config::Diagnostic> reported;
    return config::applyLaunchFlags(config::applyOverrides(base, launchOverridesOf(request)), request.accelerateFlags, reported);
}

// accelerate launch's flags, checked before anything starts: the refused ones and Accelerate's own
// rules on flags are errors, printed; --num_cpu_threads_per_process becomes the ranks'
// OMP_NUM_THREADS, as Accelerate sets it. False on an error.
bool reportAccelerateFlags(const LaunchRequest& request)
{
    std::vector<config::Diagnostic> problems;
    // Against the config file where it loads (its parallelism_config section allows the size
    // flags); one that does not load is reported by the plan.
    const std::string path = configFileOf(request);
    auto loaded = path.empty() ? Result<config::AccelerateConfig>(makeError("")) : config::loadAccelerateConfig(path);
    config::applyLaunchFlags(loaded ? *loaded : config::AccelerateConfig{config::ConfigKind::Cluster, config::Value::emptyMap()},
                             request.accelerateFlags, problems);
    for (const auto& d : problems)
        std::cerr << "shardscope launch: " << (d.severity == config::Severity::Error ? "error: " : "warning: ") << d.message
                  << "\n";
    for (const auto& f : request.accelerateFlags)
        if (const auto* flag = config::findAccelerateLaunchFlag(f.name); flag && flag->name == "num_cpu_threads_per_process") {
            const auto threads = config::pythonInt(f.value.value_or(""));
            if (!threads || *threads < 1 || *threads > 4096) {
                std::cerr << "shardscope launch: error: --num_cpu_threads_per_process " << f.value.value_or("")
                          << " is not a number of threads; give a whole number from 1 to 4096\n";
                return false;
            }
            ::setenv("OMP_NUM_THREADS", std::to_string(*threads).c_str(), 1);
        }
    return std::none_of(problems.begin(), problems.end(),
                        [](const config::Diagnostic& d) { return d.severity == config::Severity::Error; });
}

// The config as the run used it, for the history: the file's text with the launch flags merged
// in as Accelerate merges them, so that comparing runs compares what ran (a sweep's
// --mixed_precision included), not only what the file said. The file's own bytes without flags.
std::string ranConfigText(const LaunchRequest& request, const std::string& copiedFile)
{
    const auto read = config::readTextFile(copiedFile);
    std::string text = read ? *read : std::string();
    const config::LaunchOverrides o = launchOverridesOf(request);
    if (!o.numProcesses && !o.numMachines && !o.machineRank && !o.mainProcessIp && !o.mainProcessPort && !o.mixedPrecision
        && !flagsSetConfigKeys(request))
        return text;
    auto parsed = config::parseAccelerateConfig(text, copiedFile, config::formatForPath(copiedFile));
    const auto merged = parsed ? launchConfigOf(request, *parsed) : std::nullopt;
    return merged ? config::toYamlText(*merged) : text;
}

} // namespace shardscope::runs
