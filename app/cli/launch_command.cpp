// `shardscope launch`: start N local ranks of shardscope-worker and supervise them.

#include "app/cli/commands.h"
#include "engine/common/wall_clock.h"
#include "app/cli/slurm_launch.h"
#include "engine/common/text_format.h"
#include "app/launcher/program.h"
#include "engine/plan/machine_probe.h"
#include "app/launcher/hang_report.h"
#include "app/launcher/launcher.h"
#include "app/launcher/run_directory.h"
#include "app/launcher/run_monitor.h"
#include "app/launcher/run_recorder.h"
#include "app/launcher/script_run.h"
#include "app/launcher/script_traces.h"
#include "app/launcher/trace_merge.h"
#include "engine/checkpoint/checkpoint_paths.h"
#include "engine/common/dist_env.h"
#include "engine/accelerate/accelerate_config.h"
#include "engine/accelerate/launch_flags.h"
#include "engine/accelerate/questionnaire.h"
#include "engine/recipe/recipe.h"
#include "engine/plan/run_plan.h"
#include "engine/plan/script_plan.h"
#include "engine/accelerate/validation.h"
#include "engine/plan/precision_mode.h"
#include "engine/accelerate/yaml_io.h"
#include "storage/run_outcome.h"
#include "storage/run_store.h"
#include "storage/store_paths.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <memory>
#include <optional>

namespace shardscope::cli {

namespace {

namespace fs = std::filesystem;

struct LaunchArgs {
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

// Accelerate's config file for this launch: --config_file, else the default file if it exists
// (as `accelerate launch` does); empty: none.
std::string configFileOf(const LaunchArgs& args)
{
    if (!args.configFile.empty())
        return args.configFile;
    return std::filesystem::exists(config::defaultConfigFile()) ? config::defaultConfigFile() : std::string();
}

// The launch flags given on the command line, as Accelerate merges them into the config file's
// values (bf16-pure is the engine's own mode: the config keeps its value, the plan takes the flag).
config::LaunchOverrides launchOverridesOf(const LaunchArgs& args)
{
    config::LaunchOverrides overrides;
    if (args.givenNumProcesses)
        overrides.numProcesses = args.numProcesses;
    if (args.givenNumMachines)
        overrides.numMachines = args.numMachines;
    if (args.givenMachineRank)
        overrides.machineRank = args.machineRank;
    if (args.givenIp)
        overrides.mainProcessIp = args.mainProcessIp;
    if (args.givenPort)
        overrides.mainProcessPort = args.mainProcessPort;
    if (!args.mixedPrecision.empty() && args.mixedPrecision != "bf16-pure")
        overrides.mixedPrecision = args.mixedPrecision;
    return overrides;
}

// Whether accelerate launch's flags ask for config keys (a launch without a config file then gets
// one that they describe).
bool flagsSetConfigKeys(const LaunchArgs& args)
{
    return std::any_of(args.accelerateFlags.begin(), args.accelerateFlags.end(), [](const config::GivenLaunchFlag& f) {
        const auto* flag = config::findAccelerateLaunchFlag(f.name);
        return flag && flag->use == config::LaunchFlagUse::ConfigKey;
    });
}

// The config this launch runs: the file's (a launch without one, given accelerate launch's config
// flags, starts from the launch's shape as accelerate launch does without a file), with the flags
// merged in as accelerate launch merges them. The flags' own problems were reported before
// anything started (reportAccelerateFlags); none when there is no config to run.
std::optional<config::AccelerateConfig> launchConfigOf(const LaunchArgs& args,
                                                       const std::optional<config::AccelerateConfig>& file)
{
    if (!file && !flagsSetConfigKeys(args))
        return std::nullopt;
    config::AccelerateConfig base{config::ConfigKind::Cluster, config::Value::emptyMap()};
    if (file) {
        base = *file;
    } else {
        base.setField("compute_environment", config::Value("LOCAL_MACHINE"));
        base.setField("distributed_type", config::Value(args.numProcesses > 1 ? "MULTI_CPU" : "NO"));
        base.setField("num_processes", config::Value(args.numProcesses));
    }
    std::vector<config::Diagnostic> reported;
    return config::applyLaunchFlags(config::applyOverrides(base, launchOverridesOf(args)), args.accelerateFlags, reported);
}

// accelerate launch's flags, checked before anything starts: the refused ones and Accelerate's own
// rules on flags are errors, printed; --num_cpu_threads_per_process becomes the ranks'
// OMP_NUM_THREADS, as Accelerate sets it. False on an error.
bool reportAccelerateFlags(const LaunchArgs& args)
{
    std::vector<config::Diagnostic> problems;
    // Against the config file where it loads (its parallelism_config section allows the size
    // flags); one that does not load is reported by the plan.
    const std::string path = configFileOf(args);
    auto loaded = path.empty() ? Result<config::AccelerateConfig>(makeError("")) : config::loadAccelerateConfig(path);
    config::applyLaunchFlags(loaded ? *loaded : config::AccelerateConfig{config::ConfigKind::Cluster, config::Value::emptyMap()},
                             args.accelerateFlags, problems);
    for (const auto& d : problems)
        std::cerr << "shardscope launch: " << (d.severity == config::Severity::Error ? "error: " : "warning: ") << d.message
                  << "\n";
    for (const auto& f : args.accelerateFlags)
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

// The run plan of a training launch: the config (the flags merged in, they win), the recipe, the
// launch options, the engine flags after -- and this machine, checked together. Prints every
// problem; nullopt (with exitCode 2) when one is an error.
std::optional<config::RunPlan> planRun(const LaunchArgs& args, const config::Recipe& recipe, const std::string& runDir,
                                       int& exitCode)
{
    config::PlanInputs inputs;
    const std::string path = configFileOf(args);
    std::optional<config::AccelerateConfig> file;
    if (!path.empty()) {
        auto loaded = config::loadAccelerateConfig(path);
        if (!loaded) {
            std::cerr << "shardscope launch: error: " << loaded.error().message << "\n";
            exitCode = 2;
            return std::nullopt;
        }
        file = *loaded;
        inputs.configBaseDir = std::filesystem::path(path).parent_path().string();
    }
    inputs.config = launchConfigOf(args, file);
    inputs.numProcesses = args.numProcesses;
    inputs.numMachines = args.numMachines;
    inputs.machineRank = args.machineRank;
    inputs.mainProcessIp = args.mainProcessIp;
    inputs.mainProcessPort = args.mainProcessPort;
    inputs.recipe = recipe;
    inputs.recipeSource = args.recipe;
    inputs.maxSteps = args.maxSteps;
    inputs.mixedPrecision = args.mixedPrecision;
    inputs.profile = args.profile;
    inputs.engineFlags = args.workerArgs;
    inputs.runDir = runDir;
    inputs.machine = args.machine ? *args.machine : config::probeMachine();
    inputs.environment.physicalCores = config::physicalCoreCount();
    if (const char* omp = std::getenv("OMP_NUM_THREADS"))
        // Accelerate's get_int_from_env: int() of the value, else its default.
        if (auto threads = config::pythonInt(omp); threads && *threads > 0)
            inputs.environment.inheritedOmpThreads = static_cast<int>(*threads);
    auto planned = config::buildRunPlan(inputs);
    for (const auto& d : planned.problems) {
        if (inputs.config && d.keyPath != "recipe" && d.keyPath.rfind("--", 0) != 0)
            std::cerr << config::formatDiagnostic(*inputs.config, d) << "\n";
        else
            std::cerr << "shardscope launch: " << (d.severity == config::Severity::Error ? "error: " : "warning: ") << d.message
                      << "\n";
    }
    if (!planned.ok()) {
        if (!path.empty())
            std::cerr << "shardscope launch: fix the errors above (shardscope config validate " << path
                      << " checks the config alone)\n";
        exitCode = 2;
        return std::nullopt;
    }
    if (inputs.config)
        std::cout << "shardscope launch: config " << (path.empty() ? std::string("from the flags") : path) << " ("
                  << planned.plan->distributedType << ")" << std::endl;
    return planned.plan;
}

std::string readText(const std::string& path)
{
    std::ifstream in(path);
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

// The config as the run used it, for the history: the file's text with the launch flags merged
// in as Accelerate merges them, so that comparing runs compares what ran (a sweep's
// --mixed_precision included), not only what the file said. The file's own bytes without flags.
std::string ranConfigText(const LaunchArgs& args, const std::string& copiedFile)
{
    const std::string text = readText(copiedFile);
    const config::LaunchOverrides o = launchOverridesOf(args);
    if (!o.numProcesses && !o.numMachines && !o.machineRank && !o.mainProcessIp && !o.mainProcessPort && !o.mixedPrecision
        && !flagsSetConfigKeys(args))
        return text;
    auto parsed = config::parseAccelerateConfig(text, copiedFile, config::formatForPath(copiedFile));
    const auto merged = parsed ? launchConfigOf(args, *parsed) : std::nullopt;
    return merged ? config::toYamlText(*merged) : text;
}

} // namespace

std::string defaultWorkerPath(const std::string& programPath)
{
    if (const char* fromEnv = std::getenv("SHARDSCOPE_WORKER"); fromEnv && *fromEnv)
        return fromEnv;
    return (thisExecutable(programPath).parent_path() / "shardscope-worker").string();
}

namespace {

Result<void> copyFile(const std::string& from, const std::string& to)
{
    std::error_code ec;
    std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing, ec);
    if (ec)
        return makeError("cannot copy " + from + " to " + to + ": " + ec.message());
    return {};
}

Result<void> writeTextFile(const std::string& text, const std::filesystem::path& path, const std::string& what)
{
    std::ofstream out(path);
    out << text;
    out.flush();
    if (!out)
        return makeError("cannot write " + what + " " + path.string());
    return {};
}

// A training launch: the run directory with the files that define it (plan.json among them),
// the event stream's monitor and the history's recorder.
struct TrainingRun {
    RunDirectory runDir;
    config::RunPlan plan; // an engine run's (a script run's holds only defaults)
    std::unique_ptr<RunMonitor> monitor;
    std::unique_ptr<RunRecorder> recorder; // null: not recorded in the history
    std::optional<config::ScriptPlan> script; // a script run's command
    std::string hangReport; // what the flight records said when the run hung
};

void printError(const std::string& message) { std::cerr << "shardscope launch: error: " << message << "\n"; }

// A script's torch.profiler traces in the run's traces/: imported, and each rank's `trace` event
// goes through the monitor (events.jsonl, the history) as an engine rank's would.
void attachScriptTraces(TrainingRun& run, int ranks)
{
    const auto traces = collectScriptTraces(run.runDir.layout().tracesDir(), ranks);
    for (const auto& warning : traces.warnings)
        std::cerr << "shardscope launch: warning: trace left out: " << warning << "\n";
    for (const auto& event : traces.events)
        run.monitor->onEventLine(event.rank, protocol::encodeEvent(event));
    if (!traces.merged.empty())
        std::cout << "shardscope launch: torch.profiler traces of " << traces.events.size()
                  << " ranks imported; merged: " << traces.merged << "\n";
}

// The run folder's config.yaml: the config file's bytes, or, with accelerate launch's flags, the
// config they make of it (what a script run's accelerate launch then reads, and what a continued
// run plans from again).
Result<void> keepRunConfig(const LaunchArgs& args, const RunLayout& layout)
{
    const std::string configFile = configFileOf(args);
    if (!flagsSetConfigKeys(args)) // the user's bytes, comments and all
        return configFile.empty() ? Result<void>{} : copyFile(configFile, layout.configFile().string());
    std::optional<config::AccelerateConfig> file;
    if (!configFile.empty()) {
        auto loaded = config::loadAccelerateConfig(configFile);
        if (!loaded)
            return loaded.error();
        file = *loaded;
    }
    const auto merged = launchConfigOf(args, file);
    return merged ? writeTextFile(config::toYamlText(*merged), layout.configFile(), "the run's config") : Result<void>{};
}

// The run keeps the recipe it really ran (the file as written, or with --max_steps that step
// count, so the history and the workbench know the target), its Accelerate config and the plan
// every rank reads.
Result<void> writeRunFiles(const LaunchArgs& args, const config::Recipe& recipe, const TrainingRun& run)
{
    const RunLayout layout = run.runDir.layout();
    config::Recipe effective = recipe;
    effective.maxSteps = args.maxSteps;
    auto saved = args.maxSteps > 0 ? writeTextFile(config::recipeToYaml(effective), layout.recipeFile(), "the recipe")
                                   : copyFile(args.recipe, layout.recipeFile().string());
    if (!saved)
        return saved;
    if (auto kept = keepRunConfig(args, layout); !kept)
        return kept;
    return writeTextFile(config::planToJson(run.plan), layout.planFile(), "the run plan");
}

// The run history: every run, every metric. A store that cannot be used costs the history, never
// the run.
void startHistory(const std::filesystem::path& home, const storage::NewRun& newRun, TrainingRun& run,
                  const std::optional<LaunchArgs::Continuation>& continuation)
{
    auto started = continuation ? RunRecorder::resume(home, continuation->runId, continuation->attempt)
                                : RunRecorder::start(home, newRun);
    if (!started) {
        std::cerr << "shardscope launch: warning: the run is not recorded in the history: " << started.error().message << "\n";
        return;
    }
    run.recorder = std::move(*started);
    run.monitor->onEvent = [r = run.recorder.get()](const protocol::Event& e) { r->record(e); };
}

// What every recorded launch shares: the event stream's monitor (events.jsonl, progress line),
// the history, and the supervision's hooks into the monitor.
void watchRun(const LaunchArgs& args, const std::optional<std::filesystem::path>& home, const storage::NewRun& newRun,
              std::int64_t totalSteps, TrainingRun& run, LaunchOptions& options)
{
    options.logDirectory = run.runDir.logs();
    run.monitor = std::make_unique<RunMonitor>(run.runDir.eventsFile(), totalSteps, stdout, isatty(STDOUT_FILENO) != 0);
    RunMonitor* monitor = run.monitor.get();
    options.onEventLine = [monitor](int rank, std::string_view line) { monitor->onEventLine(rank, line); };
    if (!args.noHistory && home)
        startHistory(*home, newRun, run, args.continuation);
    options.onTick = [monitor] { monitor->tick(); };
    options.hangTimeout = std::chrono::milliseconds(static_cast<std::int64_t>(args.heartbeatTimeout * 1000));
    options.findStuckRank = [monitor](std::chrono::milliseconds timeout) { return monitor->stuckRank(timeout); };
    options.rankIsEnding = [monitor](int rank) { return monitor->isEnding(rank); };
    options.findAbortReason = [monitor, steps = args.maxNonfiniteSteps] { return monitor->divergence(steps); };
}

// On a hang, before any rank is stopped: the ranks' flight records, read into a report that goes
// into the run directory (hang_report.txt), to the terminal, and with the run's error into the
// history. This machine's ranks only: another machine's write into their own run directory.
void watchForHangs(TrainingRun& run, LaunchOptions& options)
{
    // Three beats for every rank to answer, and a second for the files.
    const auto patience = 3 * heartbeatInterval(options.hangTimeout) + std::chrono::seconds(1);
    options.onHang = [&run, ranks = options.numProcesses, patience](const std::vector<pid_t>& rankPids) {
        const RunLayout layout = run.runDir.layout();
        const auto records = gatherFlightRecords(layout.flightDir(), ranks, patience);
        // Where every rank is, before anything is stopped: a script's Python stacks came with its
        // records; an engine rank's native ones are read by gdb (a few seconds a rank, in parallel).
        const std::string analysis = analyseFlightRecords(records, patience).text;
        const std::string stacks = scriptStacks(layout.flightDir(), records) + nativeStacks(rankPids, std::chrono::seconds(60));
        run.hangReport = analysis + stacks;
        std::ofstream(layout.hangReportFile()) << run.hangReport;
        std::cerr << "shardscope launch: a rank hangs; its flight records say (kept in " << layout.hangReportFile().string()
                  << "):\n";
        std::istringstream lines(analysis);
        for (std::string line; std::getline(lines, line);)
            std::cerr << "  " << terminalSafe(line) << "\n"; // group names and phases come from the ranks
        if (!stacks.empty())
            std::cerr << "  every rank's stack, as it was then, is in that file (and on the run's page)\n";
    };
}

// An attempt trains as the run did: the settings of its plan that decide the numbers equal the
// run's plan.json (the recipe, precision, sharding and shape; not the folders, ports or faults).
Result<void> sameTraining(const std::string& originalPlanText, const config::RunPlan& plan)
{
    const auto original = nlohmann::json::parse(originalPlanText, nullptr, false);
    const auto now = nlohmann::json::parse(config::planToJson(plan), nullptr, false);
    if (original.is_discarded() || !original.is_object())
        return makeError("the run's plan.json cannot be read; it cannot go on");
    // (Not state_layout: it follows from these, and its fields grew with the estimate's booking.)
    for (const char* key : {"recipe", "mixed_precision", "num_processes", "num_machines", "distributed_type", "backend",
                            "sharding", "fp8", "threads"})
        if (original.value(key, nlohmann::json()) != now.value(key, nlohmann::json()))
            return makeError(std::string("the run cannot go on with these settings: its ") + key
                             + " differs from the run's (plan.json in its folder); resume it with the run's own recipe, "
                               "config and process count (the defaults of --continue_run)");
    return {};
}

// --continue_run RUN: the run's recipe, config and process count (unless given), its newest
// complete checkpoint, its checkpoints folder, and a run directory of its own under the run's
// attempts/ for this attempt. Refused for a run that is live, has no checkpoint, or is a script's.
Result<LaunchArgs> continuationOf(const LaunchArgs& args)
{
    auto home = storage::shardscopeHome();
    if (!home)
        return home.error();
    storage::StoreOptions storeOptions;
    storeOptions.markInterrupted = false;
    auto store = storage::RunStore::open(storage::historyFile(*home), storeOptions);
    auto runId = store ? store->resolveRun(args.continueRun) : Result<std::int64_t>(store.error());
    auto details = runId ? store->run(*runId) : Result<storage::RunDetails>(runId.error());
    if (!details)
        return details.error();
    const auto& summary = details->summary;
    if (!storage::isTerminal(summary.status))
        return makeError("run " + summary.name + " is " + std::string(storage::statusName(summary.status))
                         + "; only a run that has ended goes on from its checkpoint");
    if (summary.status == storage::RunStatus::Completed)
        return makeError("run " + summary.name + " completed: it has nothing left to train");
    const fs::path runDir = summary.runDir;
    const RunLayout layout(runDir);
    auto originalPlan = config::readTextFile(layout.planFile().string());
    if (!originalPlan || !summary.job.empty())
        return makeError("run " + summary.name + " is not an engine run of this machine (no plan.json in " + runDir.string()
                         + "); only those go on with --continue_run (a cluster job requeues itself)");
    auto plan = config::planFromJson(*originalPlan, layout.planFile().string());
    if (!plan)
        return plan.error();
    const fs::path checkpoints = plan->checkpointsDir.empty() ? layout.checkpointsDir() : fs::path(plan->checkpointsDir);
    auto checkpoint = checkpoint::resolveCheckpoint(checkpoints.string(), runDir.string(), plan->recipe.name);
    if (!checkpoint)
        return makeError("run " + summary.name + " has no complete checkpoint in " + checkpoints.string()
                         + " to go on from (training.checkpoint_every saves them)");
    LaunchArgs effective = args;
    if (effective.recipe.empty())
        effective.recipe = layout.recipeFile().string();
    if (effective.configFile.empty() && fs::exists(layout.configFile()))
        effective.configFile = layout.configFile().string();
    if (!effective.givenNumProcesses) {
        effective.numProcesses = plan->numProcesses;
        effective.givenNumProcesses = true;
    }
    effective.resumeFrom = *checkpoint;
    effective.checkpointsDir = checkpoints.string();
    int attempt = 1;
    for (const auto& a : details->attempts)
        attempt = std::max(attempt, a.attempt + 1);
    effective.runsDir = (runDir / "attempts").string();
    effective.runName = std::to_string(attempt);
    LaunchArgs::Continuation continuation;
    continuation.runId = *runId;
    continuation.originalPlan = *originalPlan;
    continuation.attempt.attempt = attempt;
    continuation.attempt.nodes = storage::LauncherIdentity::current().host;
    continuation.attempt.startedAt = unixSeconds();
    continuation.attempt.resumedFrom = *checkpoint;
    const std::string folder = fs::path(*checkpoint).filename().string();
    continuation.attempt.resumedStep = folder.rfind("step_", 0) == 0 ? std::atoll(folder.c_str() + 5) : 0;
    effective.continuation = continuation;
    return effective;
}

// With a recipe: the plan checked before anything is created, then the run directory and its
// files, per-rank logs, the event stream and a progress line; `options` get the plan's shape.
// Null with `exitCode` set when the launch is refused.
std::unique_ptr<TrainingRun> prepareTrainingRun(const LaunchArgs& args, LaunchOptions& options, int& exitCode)
{
    exitCode = 2;
    auto recipe = config::loadRecipe(args.recipe);
    if (!recipe) {
        printError(recipe.error().message);
        return nullptr;
    }
    auto plan = planRun(args, *recipe, std::string(), exitCode);
    if (!plan)
        return nullptr;
    exitCode = 2;
    if (args.continuation)
        if (auto same = sameTraining(args.continuation->originalPlan, *plan); !same) {
            printError(same.error().message);
            return nullptr;
        }
    auto home = storage::shardscopeHome();
    if (!home && args.runsDir.empty()) {
        printError(home.error().message);
        return nullptr;
    }
    const std::string runsDir = args.runsDir.empty() ? storage::runsFolder(*home).string() : args.runsDir;
    std::string resumeFrom;
    if (!args.resumeFrom.empty()) {
        auto resolved = checkpoint::resolveCheckpoint(args.resumeFrom, runsDir, recipe->name);
        if (!resolved) {
            printError(resolved.error().message);
            return nullptr;
        }
        resumeFrom = *resolved;
    }
    auto created = createRunDirectory(runsDir, args.runName.empty() ? timestampedRunId(recipe->name) : args.runName);
    if (!created) {
        printError(created.error().message);
        return nullptr;
    }
    auto run = std::make_unique<TrainingRun>(TrainingRun{*created, *plan, nullptr, nullptr, std::nullopt, {}});
    run->plan.runDir = run->runDir.path;
    run->plan.resumeFrom = resumeFrom;
    if (!args.checkpointsDir.empty())
        run->plan.checkpointsDir = std::filesystem::absolute(args.checkpointsDir).lexically_normal().string();
    if (home)
        run->plan.machinePeaksFile = storage::machinePeaksFile(*home).string();
    if (auto reserved = storage::reserveOutcomeFile(run->runDir.path); !reserved)
        std::cerr << "shardscope launch: warning: " << reserved.error().message << "\n";
    if (auto written = writeRunFiles(args, *recipe, *run); !written) {
        printError(written.error().message);
        return nullptr;
    }
    const config::RunPlan& p = run->plan;
    options.numProcesses = p.localProcesses();
    options.numMachines = p.numMachines;
    options.machineRank = p.machineRank;
    options.masterAddr = p.mainProcessIp;
    options.masterPort = p.mainProcessPort;
    options.workerArgs = {"train", "--plan", run->runDir.layout().planFile().string()};
    options.extraEnvironment = p.environment;
    options.ranksCanCheckpoint = true; // the run directory (or --checkpoints_dir) keeps them
    const RunLayout layout = run->runDir.layout();
    storage::NewRun newRun;
    newRun.name = run->runDir.id;
    newRun.recipeText = readText(layout.recipeFile().string());
    newRun.configText = fs::exists(layout.configFile()) ? ranConfigText(args, layout.configFile().string()) : std::string();
    newRun.runDir = run->runDir.path;
    newRun.distributedType = p.distributedType;
    newRun.mixedPrecision = std::string(precision::modeName(p.precision));
    newRun.worldSize = p.numProcesses;
    newRun.tags = args.tags;
    watchRun(args, home ? std::optional<std::filesystem::path>(*home) : std::nullopt, newRun, p.recipe.maxSteps, *run, options);
    if (p.numMachines == 1)
        watchForHangs(*run, options);
    run->monitor->detectStragglers(p.localProcesses(), args.stragglers);
    if (p.machineRank == 0)
        run->monitor->detectLossSpikes(args.lossSpikes); // rank 0's launcher
    std::cout << "shardscope launch: run " << run->runDir.id << " (" << p.numProcesses << " ranks) in " << run->runDir.path
              << std::endl;
    exitCode = 0;
    return run;
}

// The Accelerate config of a script run, with the launch flags merged in. Null (error printed)
// when there is none or it does not load.
std::optional<config::AccelerateConfig> scriptConfig(const LaunchArgs& args)
{
    const std::string path = configFileOf(args);
    if (path.empty()) {
        printError("a script run needs an Accelerate config: give --config_file FILE (shardscope config, or the "
                   "workbench's Configure page, writes one)");
        return std::nullopt;
    }
    // (accelerate launch's flags are merged in below; the run folder's config.yaml is the merged one)
    auto loaded = config::loadAccelerateConfig(path);
    if (!loaded) {
        printError(loaded.error().message);
        return std::nullopt;
    }
    if (args.mixedPrecision == "bf16-pure") {
        printError("--mixed_precision bf16-pure is a mode of Shardscope's engine; an Accelerate script takes no, fp16, bf16 "
                   "or fp8");
        return std::nullopt;
    }
    return launchConfigOf(args, *loaded);
}

// The command of a script run, checked before anything is created; prints every problem.
std::optional<config::ScriptPlan> planScript(const LaunchArgs& args, const config::AccelerateConfig& accelerateConfig,
                                             const std::string& python, const RunDirectory* runDir)
{
    config::ScriptInputs inputs;
    inputs.config = accelerateConfig;
    inputs.configBaseDir = std::filesystem::path(configFileOf(args)).parent_path().string();
    inputs.configPath = runDir ? runDir->layout().configFile().string() : configFileOf(args);
    inputs.python = python;
    std::error_code ec;
    inputs.script = args.script.empty() ? std::string() : std::filesystem::absolute(args.script, ec).string();
    inputs.scriptArgs = args.workerArgs;
    inputs.torchrunLogDir = runDir ? (runDir->layout().logsDir() / "torchrun").string() : std::string("logs/torchrun");
    inputs.machine = args.machine ? *args.machine : config::probeMachine();
    auto planned = config::planScriptRun(inputs);
    for (const auto& d : planned.problems)
        std::cerr << (d.keyPath.rfind("--", 0) == 0
                          ? "shardscope launch: " + std::string(d.severity == config::Severity::Error ? "error: " : "warning: ")
                                + d.message
                          : config::formatDiagnostic(accelerateConfig, d))
                  << "\n";
    if (!planned.ok())
        return std::nullopt;
    return planned.plan;
}

// With --script: the user's script through the real `accelerate launch` of a Python environment,
// in a run directory like an engine run's (config.yaml, script.yaml, command.sh, logs/, events).
std::unique_ptr<TrainingRun> prepareScriptRun(const LaunchArgs& args, LaunchOptions& options, int& exitCode)
{
    exitCode = 2;
    auto accelerateConfig = scriptConfig(args);
    if (!accelerateConfig)
        return nullptr;
    auto python = resolvePython(args.python);
    if (!python) {
        printError(python.error().message);
        return nullptr;
    }
    if (!planScript(args, *accelerateConfig, *python, nullptr))
        return nullptr;
    auto environment = probePythonEnvironment(*python);
    if (!environment) {
        printError(environment.error().message);
        return nullptr;
    }
    if (!environment->hasReporter)
        std::cerr << "shardscope launch: warning: the package shardscope does not import in " << *python
                  << ", so the ranks cannot report steps; install it there (" << *python
                  << " -m pip install <shardscope>/python) and add its two lines to the script\n";
    auto home = storage::shardscopeHome();
    if (!home && args.runsDir.empty()) {
        printError(home.error().message);
        return nullptr;
    }
    const std::string runsDir = args.runsDir.empty() ? storage::runsFolder(*home).string() : args.runsDir;
    auto created = createRunDirectory(
        runsDir, args.runName.empty() ? timestampedRunId(std::filesystem::path(args.script).stem().string()) : args.runName);
    if (!created) {
        printError(created.error().message);
        return nullptr;
    }
    auto run = std::make_unique<TrainingRun>(TrainingRun{*created, config::RunPlan{}, nullptr, nullptr, std::nullopt, {}});
    const RunLayout layout = run->runDir.layout();
    if (auto reserved = storage::reserveOutcomeFile(run->runDir.path); !reserved)
        std::cerr << "shardscope launch: warning: " << reserved.error().message << "\n";
    run->script = planScript(args, *accelerateConfig, *python, &run->runDir);
    if (!run->script) {
        printError("the script run's plan changed between checks");
        return nullptr;
    }
    if (auto copied = keepRunConfig(args, layout); !copied) {
        printError(copied.error().message);
        return nullptr;
    }
    const config::ScriptPlan& plan = *run->script;
    std::error_code ec;
    const std::string scriptText = scriptDescriptionYaml(plan, std::filesystem::absolute(args.script, ec).string(),
                                                         args.workerArgs, *environment);
    std::ofstream(layout.scriptFile()) << scriptText;
    std::ofstream(layout.commandFile()) << commandScript(plan, std::filesystem::current_path(ec).string());

    options.workerPath = plan.python;
    options.workerArgs = plan.args;
    options.numProcesses = plan.numProcesses / plan.numMachines; // this machine's
    options.numMachines = plan.numMachines;
    options.machineRank = plan.machineRank;
    options.launcherStartsRanks = true;
    options.eventPipeDirectory = (std::filesystem::path(run->runDir.path) / ".events").string();
    options.extraEnvironment = plan.environment;
    options.extraEnvironment.push_back("SHARDSCOPE_RUN_DIR=" + run->runDir.path);
    // Where a profiled script writes its torch.profiler traces so that they are picked up after
    // the run (attachScriptTraces).
    options.extraEnvironment.push_back("SHARDSCOPE_TRACE_DIR=" + run->runDir.layout().tracesDir().string());
    // Where PyTorch's own Flight Recorder writes its dumps (NCCL's on a collective timeout, with
    // TORCH_NCCL_DUMP_ON_TIMEOUT, which torch turns on by default): into the run folder, one file a
    // rank (torch appends the rank), unless the user chose a place.
    if (const char* chosen = std::getenv("TORCH_FR_DUMP_TEMP_FILE"); !chosen || !*chosen) {
        std::filesystem::create_directories(run->runDir.layout().flightDir(), ec);
        options.extraEnvironment.push_back("TORCH_FR_DUMP_TEMP_FILE="
                                           + (run->runDir.layout().flightDir() / "torch_fr_rank").string());
    }
    // torchrun forwards SIGTERM to its ranks and waits for them; a Python rank tears down slowly.
    options.stopGrace = std::chrono::seconds(15);
    storage::NewRun newRun;
    newRun.name = run->runDir.id;
    newRun.recipeText = scriptText;
    newRun.configText = ranConfigText(args, layout.configFile().string());
    newRun.runDir = run->runDir.path;
    newRun.distributedType = plan.distributedType;
    newRun.mixedPrecision = plan.mixedPrecision;
    newRun.worldSize = plan.numProcesses;
    newRun.tags = args.tags;
    watchRun(args, home ? std::optional<std::filesystem::path>(*home) : std::nullopt, newRun, 0, *run, options);
    if (plan.numMachines == 1)
        watchForHangs(*run, options); // the reporter answers for the ranks (python/shardscope/collectives.py)
    std::cout << "shardscope launch: script run " << run->runDir.id << " (" << plan.numProcesses << " ranks, "
              << plan.distributedType << ", accelerate " << environment->accelerateVersion << ") in " << run->runDir.path
              << "\n  command: " << plan.commandLine() << std::endl;
    exitCode = 0;
    return run;
}

// What the ranks reported decides, not only their exit codes: the root cause is the rank whose
// own error came first, and a run succeeded only when every rank finished its steps.
void judgeOutcome(LaunchOutcome& outcome, RunMonitor& monitor, std::int64_t totalSteps, bool scriptRun)
{
    if (const std::string trouble = monitor.eventFileTrouble(); !trouble.empty()) {
        std::cerr << "shardscope launch: warning: " << trouble << "\n";
        outcome.addReason("warning: " + trouble);
    }
    const auto completed = monitor.completedRanks();
    const auto& errors = monitor.reportedErrors();
    if (scriptRun)
        // torchrun starts a script's ranks: their pids are their own hellos' (not accelerate
        // launch's), and one that exited 0 is known to have ended only by its reporter's `done`,
        // sent from its exit handler.
        for (auto& r : outcome.ranks) {
            if (const auto pid = monitor.pidOf(r.rank))
                r.pid = static_cast<pid_t>(*pid);
            if (const auto done = monitor.doneAt(r.rank); done && !r.failed())
                r.exitedAt = *done;
        }
    // A script rank's reporter says "completed" on any exit with code 0, sys.exit(0) mid-training
    // too: one whose peers lost it after it said so had left them (#43 point 1).
    const auto lostAfterItsEnd = [&](int rank) {
        const auto done = scriptRun ? monitor.doneAt(rank) : std::nullopt;
        return done && std::any_of(errors.begin(), errors.end(), [&](const ReportedError& e) {
                   return e.rank != rank && e.kind == protocol::kPeerLostKind && e.time > *done;
               });
    };
    // A rank that exits 0 without having reported the end of its steps left early (a script
    // without the reporter says nothing either way: its exit status is all there is).
    outcome.blameFirstOwnError(errors, [&](int rank) {
        return (!completed.count(rank) && (!scriptRun || monitor.heardFrom(rank)) && !monitor.isEnding(rank))
               || lostAfterItsEnd(rank);
    });
    if (outcome.cancelled && !outcome.rootCauseRank && !outcome.ranks.empty()
        && std::all_of(outcome.ranks.begin(), outcome.ranks.end(),
                       [&](const RankExit& r) { return !r.failed() && completed.count(r.rank); })) {
        // The stop came after every rank had finished its steps (a time limit's warning at the end
        // of the last attempt): nothing was cut short, the run completed.
        outcome.cancelled = false;
        outcome.checkpointSignal = 0;
        outcome.exitCode = 0;
        return;
    }
    if (outcome.cancelled)
        return;
    if (outcome.exitCode != 0) {
        // Still a failure (the process did not end well), but what it trained is whole.
        if (outcome.rootCauseRank && !outcome.rootCauseStandsIn && completed.count(*outcome.rootCauseRank)
            && !lostAfterItsEnd(*outcome.rootCauseRank))
            outcome.addReason("rank " + std::to_string(*outcome.rootCauseRank)
                              + " had reported that it finished its training before it ended: it failed on its way out");
        return;
    }
    for (const auto& r : outcome.ranks) {
        // A script without Shardscope's reporter says nothing: its exit status is all there is.
        if (completed.count(r.rank) || (scriptRun && !monitor.heardFrom(r.rank)))
            continue;
        outcome.exitCode = 1;
        outcome.rootCauseRank = r.rank;
        outcome.addReason("rank " + std::to_string(r.rank) + " exited with code " + std::to_string(r.status())
                          + " without reporting that it finished its steps (last step "
                          + std::to_string(monitor.lastStepOf(r.rank))
                          + (totalSteps > 0 ? " of " + std::to_string(totalSteps) : std::string()) + "): the run is incomplete");
        return;
    }
}

// A stop on SIGTERM or SIGUSR1 (a time limit's warning, a preemption) ended as asked when every
// rank of this machine saved the checkpoint and said so: the run can go on from it, and the
// launcher exits with kCheckpointedExitCode after SIGUSR1 (a SLURM batch script requeues its job
// on it), 143 after SIGTERM.
void settleCheckpointStop(LaunchOutcome& outcome, const RunMonitor& monitor)
{
    const auto signalName = [](int sig) { return sig == SIGTERM ? std::string("SIGTERM") : std::string("SIGUSR1"); };
    if (outcome.checkpointSignal == 0 || outcome.rootCauseRank)
        return;
    const auto saved = monitor.ranksDone("checkpointed");
    for (const auto& r : outcome.ranks)
        if (!saved.count(r.rank)) {
            outcome.addReason("stopped by " + signalName(outcome.checkpointSignal) + ", but rank " + std::to_string(r.rank)
                              + " did not report a saved checkpoint");
            return;
        }
    outcome.exitCode = outcome.checkpointSignal == SIGUSR1 ? kCheckpointedExitCode : 128 + SIGTERM;
    outcome.savedCheckpoint = monitor.lastCheckpoint();
    outcome.addReason("stopped by " + signalName(outcome.checkpointSignal) + " after step "
                      + std::to_string(monitor.lastStepOf(outcome.ranks.empty() ? 0 : outcome.ranks.front().rank))
                      + " with a checkpoint to resume from: " + monitor.lastCheckpoint());
}

// The end of the run: first into the run directory (its space reserved at the start), then the
// history.
void recordEnd(TrainingRun& run, const Result<LaunchOutcome>& outcome)
{
    LaunchOutcome ended;
    if (outcome)
        ended = *outcome;
    else
        ended.exitCode = 1; // the launch itself failed: no rank ran
    std::string log;
    if (ended.rootCauseRank)
        log = tailOfFile(run.runDir.layout().rankLog(*ended.rootCauseRank).string(), 10);
    storage::RunEnd end = run.recorder->endOf(ended, log);
    if (!run.hangReport.empty())
        end.error += "hang report (flight records, also in hang_report.txt):\n" + run.hangReport;
    const auto kept = storage::writeOutcomeFile(run.runDir.path, end);
    if (auto finished = run.recorder->finish(end); !finished) {
        std::cerr << "shardscope launch: warning: recording the end of the run in the history failed: "
                  << finished.error().message << "\n";
        if (kept)
            std::cerr << "  the outcome is kept in " << run.runDir.layout().outcomeFile().string()
                      << "; the history records it the next time it is opened with space to write\n";
        else
            std::cerr << "  and it could not be kept in the run directory either: " << kept.error().message << "\n";
    }
}

void reportFailure(const LaunchOutcome& outcome, const TrainingRun* run)
{
    std::cerr << "shardscope launch: " << outcome.failureSummary();
    if (!run)
        return;
    for (const auto& message : run->monitor->errorMessages())
        std::cerr << "  reported by " << terminalSafe(message) << "\n"; // a rank's own words: shown, never obeyed
    // A rank that ended without an error event (a bad option, a crash) said why in its log.
    if (outcome.rootCauseRank) {
        const auto& reported = run->monitor->reportedErrors();
        const int cause = *outcome.rootCauseRank;
        if (std::none_of(reported.begin(), reported.end(), [&](const ReportedError& e) { return e.rank == cause; })) {
            const std::string tail = tailOfFile(run->runDir.layout().rankLog(cause).string(), 5);
            if (!tail.empty()) {
                std::cerr << "  last lines of rank " << cause << "'s log:\n";
                std::istringstream lines(tail);
                for (std::string line; std::getline(lines, line);)
                    std::cerr << "    " << line << "\n";
            }
            // A Python script's rank (in the engine this message means a C++ thread left running).
            if (run->script && tail.find("terminate called without an active exception") != std::string::npos
                && run->monitor->completedRanks().count(cause))
                std::cerr << "  a rank that finished its training and then ends this way most likely still held a Gloo "
                             "process group at exit (pytorch/pytorch#190489): end the script by dropping the wrapped "
                             "model (accelerator.free_memory()) and then the group (accelerator.end_training(), or "
                             "torch.distributed.destroy_process_group())\n";
        }
    }
    std::cerr << "  logs: " << run->runDir.logs() << "/rank<N>.log\n";
}

// What every SLURM launch takes from the command line.
SlurmLaunch slurmLaunchOf(const LaunchArgs& args, const std::string& programPath)
{
    SlurmLaunch launch;
    launch.target = args.target;
    launch.profilesFile = args.clusterProfiles;
    launch.configFile = configFileOf(args);
    // The ranks and nodes: the flags, else the config's (as a local launch takes them); a config
    // that does not load is reported by the plan's check.
    launch.numProcesses = args.numProcesses;
    launch.numMachines = args.numMachines;
    if (auto loaded = launch.configFile.empty() ? Result<config::AccelerateConfig>(makeError(""))
                                                : config::loadAccelerateConfig(launch.configFile)) {
        if (!args.givenNumProcesses)
            launch.numProcesses = static_cast<int>(loaded->intField("num_processes").value_or(launch.numProcesses));
        if (!args.givenNumMachines)
            launch.numMachines = static_cast<int>(loaded->intField("num_machines").value_or(launch.numMachines));
    }
    if (!args.mixedPrecision.empty())
        launch.nodeArgs.insert(launch.nodeArgs.end(), {"--mixed_precision", args.mixedPrecision});
    for (const auto& flag : args.accelerateFlags) // each node's launch merges them as this one does
        launch.nodeArgs.push_back(flag.value ? flag.name + "=" + *flag.value : flag.name);
    launch.engineFlags = args.workerArgs;
    launch.dryRun = args.dryRun;
    launch.detach = args.detach;
    launch.noHistory = args.noHistory;
    launch.tags = args.tags;
    launch.programPath = programPath;
    return launch;
}

// The launch as node 0 will plan it (a stand-in rendezvous: the batch script sets the real one).
LaunchArgs plannedAsANode(const LaunchArgs& args, const SlurmLaunch& launch)
{
    LaunchArgs planned = args;
    planned.numProcesses = launch.numProcesses;
    planned.numMachines = launch.numMachines;
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
int launchScriptOnSlurm(const LaunchArgs& args, const std::string& programPath)
{
    auto python = resolvePython(args.python);
    if (!python) {
        printError(python.error().message);
        return 2;
    }
    SlurmLaunch launch = slurmLaunchOf(args, programPath);
    std::error_code ec;
    launch.script = std::filesystem::absolute(args.script, ec).lexically_normal().string();
    launch.python = std::filesystem::absolute(*python, ec).string();
    launch.runName = args.runName.empty() ? timestampedRunId(std::filesystem::path(args.script).stem().string()) : args.runName;
    const LaunchArgs planned = plannedAsANode(args, launch);
    return runSlurmLaunch(launch, [&](int gpusPerNode) {
        LaunchArgs node = planned;
        if (gpusPerNode > 0)
            node.machine = config::MachineInfo{gpusPerNode, true, true, {}};
        auto accelerateConfig = scriptConfig(node);
        if (!accelerateConfig)
            return std::optional<PlannedShape>();
        const auto plan = planScript(node, *accelerateConfig, launch.python, nullptr);
        return plan ? std::optional<PlannedShape>(PlannedShape{plan->distributedType, plan->mixedPrecision}) : std::nullopt;
    });
}

// --target slurm[:PROFILE] (slurm_launch.h): the plan checked here as a local launch of the same
// shape would be, then the job written, checked and submitted.
int launchOnSlurm(const LaunchArgs& args, const std::string& programPath)
{
    if (args.target != "slurm" && args.target.rfind("slurm:", 0) != 0) {
        printError("--target " + args.target + " is not local, slurm or slurm:PROFILE");
        return 2;
    }
    for (const auto& [given, flag] : {std::pair{args.givenMachineRank, "--machine_rank"},
                                      {args.givenIp, "--main_process_ip"},
                                      {args.givenPort, "--main_process_port"}})
        if (given) {
            printError(std::string(flag) + " is the batch script's to set on each node under --target slurm; leave it out");
            return 2;
        }
    if (!args.resumeFrom.empty() || args.profile) {
        printError("--target slurm resumes by itself (a requeued job) and does not profile yet; --resume_from_checkpoint "
                   "and --profile are not taken there");
        return 2;
    }
    if (!args.script.empty())
        return launchScriptOnSlurm(args, programPath);
    auto recipe = config::loadRecipe(args.recipe);
    if (args.recipe.empty() || !recipe) {
        printError(args.recipe.empty() ? std::string("--target slurm needs --recipe R (or --script S)") : recipe.error().message);
        return 2;
    }
    SlurmLaunch launch = slurmLaunchOf(args, programPath);
    launch.runName = args.runName.empty() ? timestampedRunId(recipe->name) : args.runName;
    launch.recipe = args.recipe;
    if (args.maxSteps > 0)
        launch.nodeArgs.insert(launch.nodeArgs.end(), {"--max_steps", std::to_string(args.maxSteps)});
    LaunchArgs planned = plannedAsANode(args, launch);
    return runSlurmLaunch(launch, [&](int gpusPerNode) {
        // The nodes' GPUs, not this machine's (a login node may have none); what they support is
        // checked again on the nodes at launch.
        if (gpusPerNode > 0)
            planned.machine = config::MachineInfo{gpusPerNode, true, true, {}};
        int exitCode = 0;
        const auto plan = planRun(planned, *recipe, std::string(), exitCode);
        return plan ? std::optional<PlannedShape>(
                   PlannedShape{plan->distributedType, std::string(precision::modeName(plan->precision))})
                    : std::nullopt;
    });
}

int runLaunchCommand(const LaunchArgs& givenArgs, const std::string& programPath)
{
    LaunchArgs args = givenArgs;
    if (!reportAccelerateFlags(args))
        return 2;
    if (!args.continueRun.empty()) {
        if (args.target != "local" || !args.script.empty() || !args.resumeFrom.empty() || !args.runName.empty()
            || !args.runsDir.empty() || args.noHistory) {
            printError("--continue_run goes on with a run of this machine's history, in its folder, from its newest "
                       "checkpoint: it takes no --target, --script, --resume_from_checkpoint, --run_name, --runs_dir or "
                       "--no_history");
            return 2;
        }
        auto continued = continuationOf(args);
        if (!continued) {
            printError(continued.error().message);
            return 2;
        }
        args = std::move(*continued);
        std::cout << "shardscope launch: run " << args.continueRun << " goes on from " << args.resumeFrom << " as attempt "
                  << args.continuation->attempt.attempt << std::endl;
    }
    if (args.target != "local")
        return launchOnSlurm(args, programPath);
    if (args.dryRun || args.detach) {
        printError("--dry_run and --detach are for --target slurm (a local launch runs in the foreground; the workbench "
                   "starts it detached)");
        return 2;
    }
    blockLauncherSignals(); // before the run store's writer thread starts
    // Refused before anything starts (runLaunch refuses these too, for every other caller; a
    // training launch's plan checks them with the config's values).
    if (args.recipe.empty() && args.numMachines == 1 && !isLoopbackHost(args.mainProcessIp)) {
        printError("--main_process_ip " + args.mainProcessIp
                   + " would open the rendezvous store, which has no authentication, to the network for a run on this "
                     "machine alone; leave it unset (127.0.0.1), or give --num_machines N for a job over several machines");
        return 2;
    }
    if (args.recipe.empty() && args.numProcesses % args.numMachines != 0) {
        printError("--num_processes " + std::to_string(args.numProcesses) + " is not a multiple of --num_machines "
                   + std::to_string(args.numMachines) + "; num_processes counts the ranks of all machines together");
        return 2;
    }
    LaunchOptions options;
    options.numProcesses = args.numProcesses / args.numMachines;
    options.numMachines = args.numMachines;
    options.machineRank = args.machineRank;
    options.masterAddr = args.mainProcessIp;
    options.masterPort = args.mainProcessPort;
    options.rendezvousTimeout = std::chrono::milliseconds(static_cast<std::int64_t>(args.rendezvousTimeout * 1000));
    options.workerPath = args.worker.empty() ? defaultWorkerPath(programPath) : args.worker;
    options.workerArgs = args.workerArgs; // without a recipe: the worker's command

    std::unique_ptr<TrainingRun> run;
    if (!args.recipe.empty() && !args.script.empty()) {
        printError("--recipe and --script are two kinds of run; give one (a recipe trains Shardscope's engine, a script "
                   "runs your own Accelerate script)");
        return 2;
    }
    if (!args.script.empty() && args.maxSteps > 0) {
        printError("--max_steps sets a recipe's training.max_steps; a script takes its own step count: pass it after -- "
                   "(for example -- --max_steps "
                   + std::to_string(args.maxSteps) + ")");
        return 2;
    }
    if (!args.recipe.empty() || !args.script.empty()) {
        int exitCode = 0;
        run = args.script.empty() ? prepareTrainingRun(args, options, exitCode) : prepareScriptRun(args, options, exitCode);
        if (!run)
            return exitCode;
    }
    auto outcome = runLaunch(options);
    if (run) {
        if (run->script)
            attachScriptTraces(*run, options.numProcesses);
        run->monitor->finish();
        if (outcome) {
            judgeOutcome(*outcome, *run->monitor, run->plan.recipe.maxSteps, run->script.has_value());
            settleCheckpointStop(*outcome, *run->monitor);
        }
        if (run->script) {
            // attachScriptTraces merged them.
        } else if (auto merged = mergeRankTraces(run->runDir.layout().tracesDir().string()); !merged)
            std::cerr << "shardscope launch: warning: the ranks' traces could not be merged: " << merged.error().message << "\n";
        else if (!merged->empty())
            std::cout << "shardscope launch: trace of the run: " << *merged << " (open it in Perfetto or chrome://tracing)\n";
        if (run->recorder)
            recordEnd(*run, outcome);
    }
    if (!outcome) {
        printError(outcome.error().message);
        return 1;
    }
    if (run && run->monitor->malformedLines() > 0)
        std::cerr << "shardscope launch: " << run->monitor->malformedLines() << " malformed event lines were skipped\n";
    if (!outcome->savedCheckpoint.empty()) {
        std::cout << "shardscope launch: " << outcome->reason << "\n  continue with --resume_from_checkpoint "
                  << outcome->savedCheckpoint << "\n";
        return outcome->exitCode;
    }
    if (outcome->exitCode != 0) {
        reportFailure(*outcome, run.get());
        return outcome->exitCode;
    }
    double longest = 0;
    for (const auto& r : outcome->ranks)
        longest = std::max(longest, r.seconds);
    if (run && run->script) {
        std::cout << "shardscope launch: the script's " << options.numProcesses << " ranks finished successfully in " << longest
                  << " s (logs: " << run->runDir.logs() << ")\n";
        return 0;
    }
    std::cout << "shardscope launch: " << options.numProcesses << " ranks"
              << (options.numMachines > 1 ? " on machine " + std::to_string(options.machineRank) : std::string())
              << " finished successfully in " << longest << " s (rendezvous on " << options.masterAddr << ":"
              << outcome->masterPort << ")\n";
    return 0;
}

// Seconds of a timeout: the launcher counts them in milliseconds, and a month is past any wait.
constexpr double kLongestTimeout = 30 * 24 * 3600.0;
constexpr const char* kTimeoutUnit = " (seconds; 2592000 is 30 days)";

} // namespace

void addLaunchCommand(CLI::App& app, CommandContext& context)
{
    auto args = std::make_shared<LaunchArgs>();
    auto* cmd = app.add_subcommand("launch", "Start N local ranks of the engine and supervise them "
                                             "(arguments after -- go to every rank)");
    auto* numProcesses = cmd->add_option("--num_processes", args->numProcesses, "Number of ranks in all (over every machine)")
                             ->transform(numberIn({1, true, 1024, true}))
                             ->capture_default_str();
    auto* numMachines = cmd->add_option("--num_machines", args->numMachines, "Machines in the job (one launcher on each)")
                            ->transform(numberIn({1, true, 1024, true}))
                            ->capture_default_str();
    auto* machineRank = cmd->add_option("--machine_rank", args->machineRank, "This machine's index, 0 .. num_machines-1")
                            ->transform(numberIn({0, true, 1023, true}))
                            ->capture_default_str();
    auto* ip = cmd->add_option("--main_process_ip", args->mainProcessIp, "Rendezvous address")->capture_default_str();
    auto* port = cmd->add_option("--main_process_port", args->mainProcessPort, "Rendezvous port (0 or unset: a free port)")
                     ->transform(numberIn({0, true, 65535, true}));
    cmd->add_option("--worker", args->worker, "Worker executable (default: shardscope-worker next to shardscope)");
    cmd->add_option("--recipe", args->recipe, "Recipe YAML: train it (creates a run directory)");
    cmd->add_option("--script", args->script,
                    "Your own Accelerate / transformers.Trainer script: run it through the real `accelerate launch` "
                    "(arguments after -- go to the script; creates a run directory)");
    cmd->add_option("--python", args->python,
                    "With --script: the Python whose accelerate runs it (default: the active virtual environment's, "
                    "else python3)");
    cmd->add_option("--config_file", args->configFile,
                    "Accelerate config file (default: Accelerate's default_config.yaml when it exists); flags win over it");
    cmd->add_option("--run_name", args->runName, "Run id (default: <recipe name>-<date>-<time>)");
    cmd->add_option("--runs_dir", args->runsDir, "Where run directories go (default: $SHARDSCOPE_HOME/runs)");
    cmd->add_option("--max_steps", args->maxSteps, "Override the recipe's training.max_steps")
        ->transform(numberIn({0, false, 1e12, true}));
    cmd->add_option("--mixed_precision", args->mixedPrecision, "no, fp16, bf16, bf16-pure or fp8 (wins over the config file)");
    cmd->add_option("--resume_from_checkpoint", args->resumeFrom,
                    "Continue from a checkpoint: a step_<N> folder, a run's folder, or latest (newest of this recipe)");
    cmd->add_option("--continue_run", args->continueRun,
                    "Go on with a run of the history that failed or was stopped, from its newest checkpoint, as its next "
                    "attempt (the same run in the history; its recipe, config and process count unless given)");
    cmd->add_option("--checkpoints_dir", args->checkpointsDir,
                    "Save checkpoints here instead of the run's checkpoints/ (a run over several machines: a folder "
                    "every machine sees)");
    cmd->add_flag("--profile", args->profile, "Trace steps 3-7 (or the recipe's profile window) into the run's traces/");
    cmd->add_option("--tag", args->tags, "Tag the run in the history (repeatable): the sweep it belongs to, say");
    cmd->add_option("--rendezvous_timeout", args->rendezvousTimeout,
                    "Seconds a machine other than 0 waits for machine 0's launcher to answer before giving up")
        ->transform(numberIn({0, false, kLongestTimeout, false, kTimeoutUnit}))
        ->capture_default_str();
    cmd->add_option("--max_nonfinite_steps", args->maxNonfiniteSteps,
                    "Stop a run whose loss has been NaN or infinite for this many steps in a row, as failed (fp16's "
                    "skipped steps do not count; 0: never)")
        ->transform(numberIn({0, true, 1e6, true}))
        ->capture_default_str();
    cmd->add_option("--heartbeat_timeout", args->heartbeatTimeout,
                    "Seconds without any event from a rank before it is taken as hung (0: never)")
        ->transform(numberIn({0, true, kLongestTimeout, false, kTimeoutUnit}))
        ->capture_default_str();
    cmd->add_option("--straggler_threshold", args->stragglers.threshold,
                    "Flag a rank whose compute time (forward and backward without waits) is this much above the "
                    "other ranks' (0.2: 20 % slower)")
        ->transform(numberIn({0, false, 1e6, false}))
        ->capture_default_str();
    cmd->add_option("--straggler_window", args->stragglers.window,
                    "Steps whose median compute times are compared for --straggler_threshold (0: no straggler check)")
        ->transform(numberIn({0, true, 1e6, true}))
        ->capture_default_str();
    cmd->add_option("--loss_spike_factor", args->lossSpikes.factor,
                    "Report a step whose loss is over this many times the median of the steps before (and far outside "
                    "their spread)")
        ->transform(numberIn({1, true, 1e9, false}))
        ->capture_default_str();
    cmd->add_option("--loss_spike_window", args->lossSpikes.window,
                    "Steps before a step whose median --loss_spike_factor compares with (0: no loss-spike check)")
        ->transform(numberIn({0, true, 1e6, true}))
        ->capture_default_str();
    cmd->add_flag("--no_history", args->noHistory, "Do not record the run in the run history");
    cmd->add_option("--target", args->target,
                    "Where the run goes: local (this machine), or slurm[:PROFILE] (a SLURM cluster; the profile from "
                    "$SHARDSCOPE_HOME/clusters.ini, docs/CLUSTER.md)")
        ->capture_default_str();
    cmd->add_option("--cluster_profiles", args->clusterProfiles,
                    "The cluster profiles file (default $SHARDSCOPE_HOME/clusters.ini)");
    cmd->add_flag("--dry_run,--dry-run", args->dryRun, "--target slurm: print the batch script, submit nothing");
    cmd->add_flag("--detach", args->detach, "--target slurm: return once the job is submitted");
    cmd->add_option("worker_args", args->workerArgs,
                    "After --: with --recipe, engine flags (below); without, the worker's own command line");
    cmd->footer("Engine flags (after --, with --recipe; they win over the config):\n" + config::engineFlagHelp());
    cmd->callback([=, &context] {
        for (const auto& [name, value] : context.accelerateLaunchFlags) {
            args->accelerateFlags.push_back({name, value});
            if (const auto* flag = config::findAccelerateLaunchFlag(name);
                flag && flag->value == config::FlagValueKind::Path && value && !value->empty())
                args->accelerateFlags.back().value = fs::absolute(*value).lexically_normal().string();
        }
        args->givenNumProcesses = numProcesses->count() > 0;
        args->givenNumMachines = numMachines->count() > 0;
        args->givenMachineRank = machineRank->count() > 0;
        args->givenIp = ip->count() > 0;
        args->givenPort = port->count() > 0;
        context.exitCode = runLaunchCommand(*args, context.programPath);
    });
}

std::vector<std::string> prepareLaunchArguments(const CLI::App& launch, const std::vector<std::string>& arguments,
                                                CommandContext& context)
{
    std::vector<std::string> out;
    bool kindChosen = false; // --script or --recipe given before the first positional argument
    for (std::size_t i = 0; i < arguments.size(); ++i) {
        const std::string& token = arguments[i];
        if (token == "--") {
            out.insert(out.end(), arguments.begin() + static_cast<std::ptrdiff_t>(i), arguments.end());
            break;
        }
        if (token.size() > 1 && token[0] == '-') {
            const auto equals = token.find('=');
            std::string name = token.substr(0, equals);
            const CLI::Option* own = launch.get_option_no_throw(name);
            const config::AccelerateLaunchFlag* flag = own ? nullptr : config::findAccelerateLaunchFlag(name);
            if (flag && flag->use != config::LaunchFlagUse::Native) {
                std::optional<std::string> value;
                if (equals != std::string::npos)
                    value = token.substr(equals + 1);
                else if (flag->value != config::FlagValueKind::None && i + 1 < arguments.size())
                    value = arguments[++i];
                context.accelerateLaunchFlags.emplace_back(name, value);
                continue;
            }
            if (flag) { // one of its own options in accelerate launch's other spelling (--num-processes)
                name = "--" + flag->name;
                own = launch.get_option_no_throw(name);
            }
            kindChosen = kindChosen || name == "--script" || name == "--recipe";
            out.push_back(equals == std::string::npos ? name : name + token.substr(equals));
            if (own && equals == std::string::npos && own->get_expected_min() > 0 && i + 1 < arguments.size())
                out.push_back(arguments[++i]);
            continue;
        }
        if (kindChosen) {
            out.push_back(token);
            continue;
        }
        // accelerate launch's training script: what follows it is the script's own.
        out.insert(out.end(), {"--script", token, "--"});
        out.insert(out.end(), arguments.begin() + static_cast<std::ptrdiff_t>(i) + 1, arguments.end());
        break;
    }
    return out;
}

} // namespace shardscope::cli
