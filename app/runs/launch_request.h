#pragma once

// What `shardscope launch` (and the workbench's Launch) asks for, typed: what to run (a recipe of
// the engine, a user's script, or a worker command), the topology, the target (this machine, or
// a cluster profile; a dry run, detached), the history's options and the run it continues. The
// CLI's parser and the GUI make one; refusalsOf checks it once, with every refusal; the local run
// (local_run.h), the continuation (continuation.h) and a cluster submission take it from there.

#include "app/launcher/loss_spikes.h"
#include "app/launcher/stragglers.h"
#include "engine/accelerate/accelerate_config.h"
#include "engine/accelerate/launch_flags.h"
#include "engine/accelerate/validation.h"
#include "engine/plan/machine_probe.h"
#include "storage/run_types.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardscope::runs {

struct LaunchRequest {
    int numProcesses = 1; // in all, over every machine (Accelerate's meaning)
    int numMachines = 1;
    int machineRank = 0;
    std::string mainProcessIp = "127.0.0.1";
    int mainProcessPort = 0;
    std::string worker;
    std::vector<std::string> workerArgs;
    std::string recipe;
    std::string script; // a user's Accelerate script, run through the real `accelerate launch`
    std::string python; // the interpreter whose accelerate runs it
    std::string configFile;
    std::string runName;
    std::string runsDir;
    std::int64_t maxSteps = 0;
    std::string mixedPrecision;
    std::string resumeFrom;
    std::string checkpointsDir; // empty: the run directory's checkpoints/
    bool profile = false;
    bool noHistory = false;
    std::vector<std::string> tags; // the history's tags of the run (a sweep's name, ...)
    double heartbeatTimeout = 600; // seconds
    int maxNonfiniteSteps = 3; // a diverged run stops after this many non-finite losses in a row (0: never)
    StragglerOptions stragglers; // --straggler_threshold, --straggler_window
    LossSpikeOptions lossSpikes; // --loss_spike_factor, --loss_spike_window
    double rendezvousTimeout = 300; // seconds a machine other than 0 waits for machine 0
    std::string target = "local"; // local, slurm or slurm:PROFILE
    std::string clusterProfiles; // the profiles file of --target slurm (default $SHARDSCOPE_HOME/clusters.ini)
    bool dryRun = false; // --target slurm: print the batch script, submit nothing
    bool detach = false; // --target slurm: return once the job is submitted
    std::optional<config::MachineInfo> machine; // the machine planned for; none: this one (probed)
    std::string continueRun; // --continue_run: the history's run this launch goes on with, as its next attempt
    struct Continuation {
        std::int64_t runId = 0;
        storage::RunAttempt attempt;
        std::string originalPlan; // the run's plan.json: the attempt's plan must train the same way
    };
    std::optional<Continuation> continuation; // filled from continueRun by continuationOf
    // accelerate launch's flags beyond shardscope launch's own (takeAccelerateLaunchFlags): merged
    // into the config as accelerate launch merges them (launchConfigOf).
    std::vector<config::GivenLaunchFlag> accelerateFlags;
    // Which of Accelerate's launch flags were given on the command line (they win over the file).
    bool givenNumProcesses = false, givenNumMachines = false, givenMachineRank = false, givenIp = false, givenPort = false;
};

// What is wrong with the request before anything is read or started: options that do not go
// together, or that its target does not take. Every one, in the words the user reads; empty when
// it may go on.
std::vector<std::string> refusalsOf(const LaunchRequest& request);

// Accelerate's config file for this launch: --config_file, else the default file if it exists
// (as `accelerate launch` does); empty: none.
std::string configFileOf(const LaunchRequest& request);
// The launch flags given on the command line, as Accelerate merges them into the config file's values.
config::LaunchOverrides launchOverridesOf(const LaunchRequest& request);
// Whether accelerate launch's flags ask for config keys.
bool flagsSetConfigKeys(const LaunchRequest& request);
// The config this launch runs: the file's with the flags merged in as accelerate launch merges
// them; none when there is no config to run.
std::optional<config::AccelerateConfig> launchConfigOf(const LaunchRequest& request,
                                                       const std::optional<config::AccelerateConfig>& file);
// accelerate launch's flags, checked before anything starts (problems printed; false on an
// error); --num_cpu_threads_per_process becomes the ranks' OMP_NUM_THREADS, as Accelerate sets it.
bool reportAccelerateFlags(const LaunchRequest& request);
// The config as the run used it, for the history (the copied file's text, the flags merged in).
std::string ranConfigText(const LaunchRequest& request, const std::string& copiedFile);

} // namespace shardscope::runs
