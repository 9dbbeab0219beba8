#include "app/runs/local_run.h"

#include "app/launcher/hang_report.h"
#include "app/launcher/launcher.h"
#include "app/launcher/program.h"
#include "app/launcher/run_monitor.h"
#include "app/launcher/run_recorder.h"
#include "app/launcher/script_run.h"
#include "app/launcher/script_traces.h"
#include "app/launcher/trace_merge.h"
#include "app/runs/continuation.h"
#include "app/runs/run_end.h"
#include "engine/accelerate/yaml_io.h"
#include "engine/checkpoint/checkpoint_paths.h"
#include "engine/common/text_format.h"
#include "engine/plan/precision_mode.h"
#include "storage/run_outcome.h"
#include "storage/store_paths.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

namespace shardscope::runs {

namespace fs = std::filesystem;

namespace {

void printError(const std::string& message) { std::cerr << "shardscope launch: error: " << message << "\n"; }

} // namespace

std::string defaultWorkerPath(const std::string& programPath)
{
    if (const char* fromEnv = std::getenv("SHARDSCOPE_WORKER"); fromEnv && *fromEnv)
        return fromEnv;
    return (thisExecutable(programPath).parent_path() / "shardscope-worker").string();
}

std::optional<config::RunPlan> planRun(const LaunchRequest& request, const config::Recipe& recipe, const std::string& runDir,
                                       int& exitCode)
{
    config::PlanInputs inputs;
    const std::string path = configFileOf(request);
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
    inputs.config = launchConfigOf(request, file);
    inputs.numProcesses = request.numProcesses;
    inputs.numMachines = request.numMachines;
    inputs.machineRank = request.machineRank;
    inputs.mainProcessIp = request.mainProcessIp;
    inputs.mainProcessPort = request.mainProcessPort;
    inputs.recipe = recipe;
    inputs.recipeSource = request.recipe;
    inputs.maxSteps = request.maxSteps;
    inputs.mixedPrecision = request.mixedPrecision;
    inputs.profile = request.profile;
    inputs.engineFlags = request.workerArgs;
    inputs.runDir = runDir;
    inputs.machine = request.machine ? *request.machine : config::probeMachine();
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

std::optional<config::AccelerateConfig> scriptConfig(const LaunchRequest& request)
{
    const std::string path = configFileOf(request);
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
    if (request.mixedPrecision == "bf16-pure") {
        printError("--mixed_precision bf16-pure is a mode of Shardscope's engine; an Accelerate script takes no, fp16, bf16 "
                   "or fp8");
        return std::nullopt;
    }
    return launchConfigOf(request, *loaded);
}

std::optional<config::ScriptPlan> planScript(const LaunchRequest& request, const config::AccelerateConfig& accelerateConfig,
                                             const std::string& python, const RunDirectory* runDir)
{
    config::ScriptInputs inputs;
    inputs.config = accelerateConfig;
    inputs.configBaseDir = std::filesystem::path(configFileOf(request)).parent_path().string();
    inputs.configPath = runDir ? runDir->layout().configFile().string() : configFileOf(request);
    inputs.python = python;
    std::error_code ec;
    inputs.script = request.script.empty() ? std::string() : std::filesystem::absolute(request.script, ec).string();
    inputs.scriptArgs = request.workerArgs;
    inputs.torchrunLogDir = runDir ? (runDir->layout().logsDir() / "torchrun").string() : std::string("logs/torchrun");
    inputs.machine = request.machine ? *request.machine : config::probeMachine();
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
Result<void> keepRunConfig(const LaunchRequest& request, const RunLayout& layout)
{
    const std::string configFile = configFileOf(request);
    if (!flagsSetConfigKeys(request)) // the user's bytes, comments and all
        return configFile.empty() ? Result<void>{} : copyFile(configFile, layout.configFile().string());
    std::optional<config::AccelerateConfig> file;
    if (!configFile.empty()) {
        auto loaded = config::loadAccelerateConfig(configFile);
        if (!loaded)
            return loaded.error();
        file = *loaded;
    }
    const auto merged = launchConfigOf(request, file);
    return merged ? writeTextFile(config::toYamlText(*merged), layout.configFile(), "the run's config") : Result<void>{};
}

// The run keeps the recipe it really ran (the file as written, or with --max_steps that step
// count, so the history and the workbench know the target), its Accelerate config and the plan
// every rank reads.
Result<void> writeRunFiles(const LaunchRequest& request, const config::Recipe& recipe, const TrainingRun& run)
{
    const RunLayout layout = run.runDir.layout();
    config::Recipe effective = recipe;
    effective.maxSteps = request.maxSteps;
    auto saved = request.maxSteps > 0 ? writeTextFile(config::recipeToYaml(effective), layout.recipeFile(), "the recipe")
                                      : copyFile(request.recipe, layout.recipeFile().string());
    if (!saved)
        return saved;
    if (auto kept = keepRunConfig(request, layout); !kept)
        return kept;
    return writeTextFile(config::planToJson(run.plan), layout.planFile(), "the run plan");
}

// The run history: every run, every metric. A store that cannot be used costs the history, never
// the run.
void startHistory(const std::filesystem::path& home, const storage::NewRun& newRun, TrainingRun& run,
                  const std::optional<LaunchRequest::Continuation>& continuation)
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
void watchRun(const LaunchRequest& request, const std::optional<std::filesystem::path>& home, const storage::NewRun& newRun,
              std::int64_t totalSteps, TrainingRun& run, LaunchOptions& options)
{
    options.logDirectory = run.runDir.logs();
    run.monitor = std::make_unique<RunMonitor>(run.runDir.eventsFile(), totalSteps, stdout, isatty(STDOUT_FILENO) != 0);
    RunMonitor* monitor = run.monitor.get();
    options.onEventLine = [monitor](int rank, std::string_view line) { monitor->onEventLine(rank, line); };
    if (!request.noHistory && home)
        startHistory(*home, newRun, run, request.continuation);
    options.onTick = [monitor] { monitor->tick(); };
    options.hangTimeout = std::chrono::milliseconds(static_cast<std::int64_t>(request.heartbeatTimeout * 1000));
    options.findStuckRank = [monitor](std::chrono::milliseconds timeout) { return monitor->stuckRank(timeout); };
    options.rankIsEnding = [monitor](int rank) { return monitor->isEnding(rank); };
    options.findAbortReason = [monitor, steps = request.maxNonfiniteSteps] { return monitor->divergence(steps); };
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

// With a recipe: the plan checked before anything is created, then the run directory and its
// files, per-rank logs, the event stream and a progress line; `options` get the plan's shape.
// Null with `exitCode` set when the launch is refused.
std::unique_ptr<TrainingRun> prepareTrainingRun(const LaunchRequest& request, LaunchOptions& options, int& exitCode)
{
    exitCode = 2;
    auto recipe = config::loadRecipe(request.recipe);
    if (!recipe) {
        printError(recipe.error().message);
        return nullptr;
    }
    auto plan = planRun(request, *recipe, std::string(), exitCode);
    if (!plan)
        return nullptr;
    exitCode = 2;
    if (request.continuation)
        if (auto same = sameTraining(request.continuation->originalPlan, *plan); !same) {
            printError(same.error().message);
            return nullptr;
        }
    auto home = storage::shardscopeHome();
    if (!home && request.runsDir.empty()) {
        printError(home.error().message);
        return nullptr;
    }
    const std::string runsDir = request.runsDir.empty() ? storage::runsFolder(*home).string() : request.runsDir;
    std::string resumeFrom;
    if (!request.resumeFrom.empty()) {
        auto resolved = checkpoint::resolveCheckpoint(request.resumeFrom, runsDir, recipe->name);
        if (!resolved) {
            printError(resolved.error().message);
            return nullptr;
        }
        resumeFrom = *resolved;
    }
    auto created = createRunDirectory(runsDir, request.runName.empty() ? timestampedRunId(recipe->name) : request.runName);
    if (!created) {
        printError(created.error().message);
        return nullptr;
    }
    auto run = std::make_unique<TrainingRun>(TrainingRun{*created, *plan, nullptr, nullptr, std::nullopt, {}});
    run->plan.runDir = run->runDir.path;
    run->plan.resumeFrom = resumeFrom;
    if (!request.checkpointsDir.empty())
        run->plan.checkpointsDir = std::filesystem::absolute(request.checkpointsDir).lexically_normal().string();
    if (home)
        run->plan.machinePeaksFile = storage::machinePeaksFile(*home).string();
    if (auto reserved = storage::reserveOutcomeFile(run->runDir.path); !reserved)
        std::cerr << "shardscope launch: warning: " << reserved.error().message << "\n";
    if (auto written = writeRunFiles(request, *recipe, *run); !written) {
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
    auto recipeText = config::readTextFile(layout.recipeFile().string());
    newRun.recipeText = recipeText ? *recipeText : std::string();
    newRun.configText = fs::exists(layout.configFile()) ? ranConfigText(request, layout.configFile().string()) : std::string();
    newRun.runDir = run->runDir.path;
    newRun.distributedType = p.distributedType;
    newRun.mixedPrecision = std::string(precision::modeName(p.precision));
    newRun.worldSize = p.numProcesses;
    newRun.tags = request.tags;
    watchRun(request, home ? std::optional<std::filesystem::path>(*home) : std::nullopt, newRun, p.recipe.maxSteps, *run,
             options);
    if (p.numMachines == 1)
        watchForHangs(*run, options);
    run->monitor->detectStragglers(p.localProcesses(), request.stragglers);
    if (p.machineRank == 0)
        run->monitor->detectLossSpikes(request.lossSpikes); // rank 0's launcher
    std::cout << "shardscope launch: run " << run->runDir.id << " (" << p.numProcesses << " ranks) in " << run->runDir.path
              << std::endl;
    exitCode = 0;
    return run;
}

// With --script: the user's script through the real `accelerate launch` of a Python environment,
// in a run directory like an engine run's (config.yaml, script.yaml, command.sh, logs/, events).
std::unique_ptr<TrainingRun> prepareScriptRun(const LaunchRequest& request, LaunchOptions& options, int& exitCode)
{
    exitCode = 2;
    auto accelerateConfig = scriptConfig(request);
    if (!accelerateConfig)
        return nullptr;
    auto python = resolvePython(request.python);
    if (!python) {
        printError(python.error().message);
        return nullptr;
    }
    if (!planScript(request, *accelerateConfig, *python, nullptr))
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
    if (!home && request.runsDir.empty()) {
        printError(home.error().message);
        return nullptr;
    }
    const std::string runsDir = request.runsDir.empty() ? storage::runsFolder(*home).string() : request.runsDir;
    auto created = createRunDirectory(runsDir, request.runName.empty()
                                                   ? timestampedRunId(std::filesystem::path(request.script).stem().string())
                                                   : request.runName);
    if (!created) {
        printError(created.error().message);
        return nullptr;
    }
    auto run = std::make_unique<TrainingRun>(TrainingRun{*created, config::RunPlan{}, nullptr, nullptr, std::nullopt, {}});
    const RunLayout layout = run->runDir.layout();
    if (auto reserved = storage::reserveOutcomeFile(run->runDir.path); !reserved)
        std::cerr << "shardscope launch: warning: " << reserved.error().message << "\n";
    run->script = planScript(request, *accelerateConfig, *python, &run->runDir);
    if (!run->script) {
        printError("the script run's plan changed between checks");
        return nullptr;
    }
    if (auto copied = keepRunConfig(request, layout); !copied) {
        printError(copied.error().message);
        return nullptr;
    }
    const config::ScriptPlan& plan = *run->script;
    std::error_code ec;
    const std::string scriptText = scriptDescriptionYaml(plan, std::filesystem::absolute(request.script, ec).string(),
                                                         request.workerArgs, *environment);
    std::ofstream(layout.scriptFile()) << scriptText;
    std::ofstream(layout.commandFile()) << commandScript(plan, std::filesystem::current_path(ec).string());

    options.workerPath = plan.python;
    options.workerArgs = plan.args;
    options.numProcesses = plan.numProcesses / plan.numMachines; // this machine's
    options.numMachines = plan.numMachines;
    options.machineRank = plan.machineRank;
    options.launcherStartsRanks = true;
    options.eventPipeDirectory = run->runDir.layout().eventPipesDir().string();
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
    newRun.configText = ranConfigText(request, layout.configFile().string());
    newRun.runDir = run->runDir.path;
    newRun.distributedType = plan.distributedType;
    newRun.mixedPrecision = plan.mixedPrecision;
    newRun.worldSize = plan.numProcesses;
    newRun.tags = request.tags;
    watchRun(request, home ? std::optional<std::filesystem::path>(*home) : std::nullopt, newRun, 0, *run, options);
    if (plan.numMachines == 1)
        watchForHangs(*run, options); // the reporter answers for the ranks (python/shardscope/collectives.py)
    std::cout << "shardscope launch: script run " << run->runDir.id << " (" << plan.numProcesses << " ranks, "
              << plan.distributedType << ", accelerate " << environment->accelerateVersion << ") in " << run->runDir.path
              << "\n  command: " << plan.commandLine() << std::endl;
    exitCode = 0;
    return run;
}

// The evidence of this machine's run for the one decision of its end (app/runs/run_end.h).
runs::RunEvidence evidenceOf(const TrainingRun& run, const Result<LaunchOutcome>& outcome)
{
    runs::RunEvidence evidence;
    std::vector<int> ranks;
    if (outcome)
        for (const auto& r : outcome->ranks)
            ranks.push_back(r.rank);
    evidence.ranks = runs::testimonyOf(*run.monitor, ranks);
    evidence.world.insert(ranks.begin(), ranks.end());
    evidence.launch = outcome;
    evidence.scriptRun = run.script.has_value();
    evidence.totalSteps = run.plan.recipe.maxSteps;
    evidence.logTail = [layout = run.runDir.layout()](int rank) { return tailOfFile(layout.rankLog(rank).string(), 10); };
    return evidence;
}

// The end of the run: first into the run directory (its space reserved at the start), then the
// history.
void recordEnd(TrainingRun& run, storage::RunEnd end)
{
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

// What the launch says at its end: the checkpoint to continue from, the failure and its root
// cause, or the success.
int reportEnd(const Result<LaunchOutcome>& outcome, const TrainingRun* run, const LaunchOptions& options)
{
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
        reportFailure(*outcome, run);
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

} // namespace

int runLocally(const LaunchRequest& request, const std::string& programPath)
{
    blockLauncherSignals(); // before the run store's writer thread starts
    LaunchOptions options;
    options.numProcesses = request.numProcesses / request.numMachines;
    options.numMachines = request.numMachines;
    options.machineRank = request.machineRank;
    options.masterAddr = request.mainProcessIp;
    options.masterPort = request.mainProcessPort;
    options.rendezvousTimeout = std::chrono::milliseconds(static_cast<std::int64_t>(request.rendezvousTimeout * 1000));
    options.workerPath = request.worker.empty() ? defaultWorkerPath(programPath) : request.worker;
    options.workerArgs = request.workerArgs; // without a recipe: the worker's command

    std::unique_ptr<TrainingRun> run;
    if (!request.recipe.empty() || !request.script.empty()) {
        int exitCode = 0;
        run = request.script.empty() ? prepareTrainingRun(request, options, exitCode)
                                     : prepareScriptRun(request, options, exitCode);
        if (!run)
            return exitCode;
    }
    auto outcome = runLaunch(options);
    if (run) {
        if (run->script)
            attachScriptTraces(*run, options.numProcesses);
        run->monitor->finish();
        const runs::RunVerdict verdict = runs::decideRunEnd(evidenceOf(*run, outcome));
        if (const std::string trouble = run->monitor->eventFileTrouble(); outcome && !trouble.empty())
            std::cerr << "shardscope launch: warning: " << trouble << "\n";
        if (outcome)
            *outcome = verdict.launch;
        if (run->script) {
            // attachScriptTraces merged them.
        } else if (auto merged = mergeRankTraces(run->runDir.layout().tracesDir().string()); !merged)
            std::cerr << "shardscope launch: warning: the ranks' traces could not be merged: " << merged.error().message << "\n";
        else if (!merged->empty())
            std::cout << "shardscope launch: trace of the run: " << *merged << " (open it in Perfetto or chrome://tracing)\n";
        if (run->recorder)
            recordEnd(*run, verdict.end);
    }
    return reportEnd(outcome, run.get(), options);
}

} // namespace shardscope::runs
