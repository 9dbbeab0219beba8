// `shardscope launch`: start N local ranks of shardscope-worker and supervise them.

#include "app/cli/commands.h"
#include "app/launcher/launcher.h"
#include "app/launcher/run_directory.h"
#include "app/launcher/run_monitor.h"
#include "app/launcher/run_recorder.h"
#include "engine/config/recipe.h"
#include "engine/precision/precision_mode.h"
#include "storage/store_paths.h"

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <memory>
#include <optional>

namespace shardscope::cli {

namespace {

struct LaunchArgs {
    int numProcesses = 1; // in all, over every machine (Accelerate's meaning)
    int numMachines = 1;
    int machineRank = 0;
    std::string mainProcessIp = "127.0.0.1";
    int mainProcessPort = 0;
    std::string worker;
    std::vector<std::string> workerArgs;
    std::string recipe;
    std::string configFile;
    std::string runName;
    std::string runsDir;
    std::int64_t maxSteps = 0;
    std::string mixedPrecision;
    bool noHistory = false;
};

std::string readText(const std::string& path)
{
    std::ifstream in(path);
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

// shardscope-worker lives next to shardscope; SHARDSCOPE_WORKER overrides that.
std::string defaultWorkerPath(const std::string& programPath)
{
    if (const char* fromEnv = std::getenv("SHARDSCOPE_WORKER"); fromEnv && *fromEnv)
        return fromEnv;
    std::error_code ec;
    auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec)
        self = std::filesystem::absolute(programPath, ec);
    return (self.parent_path() / "shardscope-worker").string();
}

bool copyFile(const std::string& from, const std::string& to, std::string& error)
{
    std::error_code ec;
    std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing, ec);
    if (ec)
        error = "cannot copy " + from + " to " + to + ": " + ec.message();
    return !ec;
}

int runLaunchCommand(const LaunchArgs& args, const std::string& programPath)
{
    if (args.numProcesses % args.numMachines != 0) {
        std::cerr << "shardscope launch: error: --num_processes " << args.numProcesses << " is not a multiple of --num_machines "
                  << args.numMachines << "; num_processes counts the ranks of all machines together\n";
        return 2;
    }
    LaunchOptions options;
    options.numProcesses = args.numProcesses / args.numMachines;
    options.numMachines = args.numMachines;
    options.machineRank = args.machineRank;
    options.masterAddr = args.mainProcessIp;
    options.masterPort = args.mainProcessPort;
    options.workerPath = args.worker.empty() ? defaultWorkerPath(programPath) : args.worker;
    options.workerArgs = args.workerArgs;

    // With a recipe, this is a training run: it gets a run directory with the files that define
    // it, per-rank logs and the event stream, and a progress line.
    std::optional<RunDirectory> runDir;
    std::unique_ptr<RunMonitor> monitor;
    std::unique_ptr<RunRecorder> recorder;
    if (!args.mixedPrecision.empty()) {
        if (auto mode = precision::parseMode(args.mixedPrecision); !mode) {
            std::cerr << "shardscope launch: error: " << mode.error().message << "\n";
            return 2;
        }
    }
    if (!args.recipe.empty()) {
        auto recipe = config::loadRecipe(args.recipe);
        if (!recipe) {
            std::cerr << "shardscope launch: error: " << recipe.error().message << "\n";
            return 2;
        }
        const std::string id = args.runName.empty() ? timestampedRunId(recipe->name) : args.runName;
        auto home = storage::shardscopeHome();
        if (!home && args.runsDir.empty()) {
            std::cerr << "shardscope launch: error: " << home.error().message << "\n";
            return 2;
        }
        auto created = createRunDirectory(args.runsDir.empty() ? storage::runsFolder(*home).string() : args.runsDir, id);
        if (!created) {
            std::cerr << "shardscope launch: error: " << created.error().message << "\n";
            return 2;
        }
        runDir = *created;
        std::string error;
        if (!copyFile(args.recipe, runDir->path + "/recipe.yaml", error)
            || (!args.configFile.empty() && !copyFile(args.configFile, runDir->path + "/config.yaml", error))) {
            std::cerr << "shardscope launch: error: " << error << "\n";
            return 2;
        }
        std::vector<std::string> workerArgs{"train", "--recipe", runDir->path + "/recipe.yaml"};
        if (!args.mixedPrecision.empty()) {
            workerArgs.push_back("--mixed_precision");
            workerArgs.push_back(args.mixedPrecision);
        }
        if (args.maxSteps > 0) {
            workerArgs.push_back("--max_steps");
            workerArgs.push_back(std::to_string(args.maxSteps));
        }
        workerArgs.insert(workerArgs.end(), args.workerArgs.begin(), args.workerArgs.end());
        options.workerArgs = workerArgs;
        options.logDirectory = runDir->logs();
        const std::int64_t total = args.maxSteps > 0 ? args.maxSteps : recipe->maxSteps;
        monitor = std::make_unique<RunMonitor>(runDir->eventsFile(), total, stdout, isatty(STDOUT_FILENO) != 0);
        options.onEventLine = [m = monitor.get()](int rank, std::string_view line) { m->onEventLine(rank, line); };
        // The run history: every run, every metric. A store that cannot be used costs the history,
        // never the run.
        if (!args.noHistory && home) {
            storage::NewRun newRun;
            newRun.name = runDir->id;
            newRun.recipeText = readText(runDir->path + "/recipe.yaml");
            newRun.configText = args.configFile.empty() ? std::string() : readText(runDir->path + "/config.yaml");
            newRun.runDir = runDir->path;
            newRun.distributedType = args.numProcesses > 1 ? "MULTI_CPU" : "NO";
            newRun.mixedPrecision = args.mixedPrecision.empty() ? "no" : args.mixedPrecision;
            newRun.worldSize = args.numProcesses;
            auto started = RunRecorder::start(*home, newRun);
            if (started) {
                recorder = std::move(*started);
                monitor->onEvent = [r = recorder.get()](const protocol::Event& e) { r->record(e); };
            } else {
                std::cerr << "shardscope launch: warning: the run is not recorded in the history: "
                          << started.error().message << "\n";
            }
        }
        options.onTick = [m = monitor.get()] { m->tick(); };
        std::cout << "shardscope launch: run " << runDir->id << " (" << args.numProcesses << " ranks) in "
                  << runDir->path << std::endl;
    }

    auto outcome = runLaunch(options);
    if (monitor)
        monitor->finish();
    if (recorder) {
        LaunchOutcome ended;
        if (outcome) {
            ended = *outcome;
        } else {
            ended.exitCode = 1; // the launch itself failed: no rank ran
        }
        std::string log;
        if (ended.rootCauseRank)
            log = tailOfFile(runDir->logs() + "/rank" + std::to_string(*ended.rootCauseRank) + ".log", 10);
        if (auto finished = recorder->finish(ended, log); !finished)
            std::cerr << "shardscope launch: warning: recording the end of the run failed: " << finished.error().message << "\n";
    }
    if (!outcome) {
        std::cerr << "shardscope launch: error: " << outcome.error().message << "\n";
        return 1;
    }
    if (monitor && monitor->malformedLines() > 0)
        std::cerr << "shardscope launch: " << monitor->malformedLines() << " malformed event lines were skipped\n";
    if (outcome->exitCode != 0) {
        std::cerr << "shardscope launch: " << outcome->failureSummary();
        if (monitor)
            for (const auto& message : monitor->errorMessages())
                std::cerr << "  reported by " << message << "\n";
        if (runDir)
            std::cerr << "  logs: " << runDir->logs() << "/rank<N>.log\n";
        return outcome->exitCode;
    }
    double longest = 0;
    for (const auto& r : outcome->ranks)
        longest = std::max(longest, r.seconds);
    std::cout << "shardscope launch: " << options.numProcesses << " ranks"
              << (options.numMachines > 1 ? " on machine " + std::to_string(options.machineRank) : std::string())
              << " finished successfully in " << longest
              << " s (rendezvous on " << options.masterAddr << ":" << outcome->masterPort << ")\n";
    return 0;
}

} // namespace

void addLaunchCommand(CLI::App& app, CommandContext& context)
{
    auto args = std::make_shared<LaunchArgs>();
    auto* cmd = app.add_subcommand("launch", "Start N local ranks of the engine and supervise them "
                                             "(arguments after -- go to every rank)");
    cmd->add_option("--num_processes", args->numProcesses, "Number of ranks in all (over every machine)")
        ->check(CLI::Range(1, 1024))
        ->capture_default_str();
    cmd->add_option("--num_machines", args->numMachines, "Machines in the job (one launcher on each)")
        ->check(CLI::Range(1, 1024))
        ->capture_default_str();
    cmd->add_option("--machine_rank", args->machineRank, "This machine's index, 0 .. num_machines-1")
        ->check(CLI::Range(0, 1023))
        ->capture_default_str();
    cmd->add_option("--main_process_ip", args->mainProcessIp, "Rendezvous address")->capture_default_str();
    cmd->add_option("--main_process_port", args->mainProcessPort, "Rendezvous port (0 or unset: a free port)")
        ->check(CLI::Range(0, 65535));
    cmd->add_option("--worker", args->worker, "Worker executable (default: shardscope-worker next to shardscope)");
    cmd->add_option("--recipe", args->recipe, "Recipe YAML: train it (creates a run directory)");
    cmd->add_option("--config_file", args->configFile, "Accelerate config file for the run");
    cmd->add_option("--run_name", args->runName, "Run id (default: <recipe name>-<date>-<time>)");
    cmd->add_option("--runs_dir", args->runsDir, "Where run directories go (default: $SHARDSCOPE_HOME/runs)");
    cmd->add_option("--max_steps", args->maxSteps, "Override the recipe's training.max_steps")->check(CLI::PositiveNumber);
    cmd->add_option("--mixed_precision", args->mixedPrecision, "no, fp16, bf16, bf16-pure or fp8 (wins over the config file)");
    cmd->add_flag("--no_history", args->noHistory, "Do not record the run in the run history");
    cmd->add_option("worker_args", args->workerArgs, "Arguments for each rank, after --");
    cmd->callback([args, &context] { context.exitCode = runLaunchCommand(*args, context.programPath); });
}

} // namespace shardscope::cli
