// `shardscope launch`: the options (shardscope launch's own and `accelerate launch`'s) made into a
// runs::LaunchRequest, checked once, then run here (runs::runLocally), continued
// (runs::continuationOf) or submitted to a cluster (launchOnSlurm).

#include "app/cli/commands.h"
#include "app/cli/slurm_launch.h"
#include "app/runs/continuation.h"
#include "app/runs/launch_request.h"
#include "app/runs/local_run.h"
#include "app/runs/request_file.h"
#include "engine/accelerate/launch_flags.h"
#include "engine/plan/run_plan.h"
#include "storage/store_paths.h"

#include <CLI/CLI.hpp>

#include <algorithm>

#include <filesystem>
#include <iostream>
#include <memory>

namespace shardscope::cli {

namespace {

namespace fs = std::filesystem;

void printError(const std::string& message) { std::cerr << "shardscope launch: error: " << message << "\n"; }

int runLaunchCommand(const runs::LaunchRequest& given, const std::string& programPath)
{
    const std::vector<std::string> refusals = runs::refusalsOf(given);
    for (const std::string& refusal : refusals)
        printError(refusal);
    const bool flagsUsable = runs::reportAccelerateFlags(given); // its problems said too
    if (!refusals.empty() || !flagsUsable)
        return 2;
    runs::LaunchRequest request = given;
    if (!request.continueRun.empty()) {
        auto home = storage::shardscopeHome();
        auto continued = home ? runs::continuationOf(request, *home) : Result<runs::LaunchRequest>(home.error());
        if (!continued) {
            printError(continued.error().message);
            return 2;
        }
        request = std::move(*continued);
        std::cout << "shardscope launch: run " << request.continueRun << " goes on from " << request.resumeFrom << " as attempt "
                  << request.continuation->attempt.attempt << std::endl;
    }
    if (request.target != "local")
        return launchOnSlurm(request, programPath);
    return runs::runLocally(request, programPath);
}

// `--request FILE` (a cluster run's request.json, which each node's launcher runs): the file says
// what to run; the command line only where this launcher's part runs (nodePlaceOptions).
Result<runs::LaunchRequest> requestOfFile(const CLI::App& cmd, const std::string& file, const runs::LaunchRequest& commandLine,
                                          const CommandContext& context)
{
    const auto& allowed = runs::nodePlaceOptions();
    std::vector<std::string> extra;
    for (const CLI::Option* option : cmd.get_options())
        if (option->count() > 0 && std::find(allowed.begin(), allowed.end(), option->get_name()) == allowed.end())
            extra.push_back(option->get_name());
    for (const auto& flag : context.accelerateLaunchFlags)
        extra.push_back(flag.first);
    if (!extra.empty()) {
        std::string names;
        for (const auto& name : extra)
            names += (names.empty() ? "" : ", ") + name;
        return makeError("--request " + file + " says what to run; " + names
                         + " cannot go with it (only where this launcher's part runs: --machine_rank, "
                           "--main_process_ip, --runs_dir, ...); change the request file or launch without it");
    }
    auto fromFile = runs::readRequestFile(file);
    if (!fromFile)
        return fromFile.error();
    return runs::placedAsGiven(std::move(*fromFile), commandLine);
}

// Seconds of a timeout: the launcher counts them in milliseconds, and a month is past any wait.
constexpr double kLongestTimeout = 30 * 24 * 3600.0;
constexpr const char* kTimeoutUnit = " (seconds; 2592000 is 30 days)";

} // namespace

void addLaunchCommand(CLI::App& app, CommandContext& context)
{
    auto args = std::make_shared<runs::LaunchRequest>();
    auto requestFile = std::make_shared<std::string>();
    auto* cmd = app.add_subcommand(
        "launch", "Run a recipe on Shardscope's engine, or your own Accelerate script through the real `accelerate launch`, "
                  "on this machine's ranks or a SLURM cluster (--target), and record it in the run history. Takes "
                  "`accelerate launch`'s flags and command line too: `shardscope launch --multi_gpu train.py ...` is "
                  "`accelerate launch --multi_gpu train.py ...`, watched (arguments after -- go to the script, or to "
                  "every rank of a recipe)");
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
    cmd->add_option("--request", *requestFile,
                    "Run what a launch request file says (a cluster run's request.json, which every node's launcher "
                    "runs); with it only where this part runs: --machine_rank, --main_process_ip/port, --runs_dir, "
                    "--run_name, --checkpoints_dir, --resume_from_checkpoint, --no_history");
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
        if (requestFile->empty()) {
            context.exitCode = runLaunchCommand(*args, context.programPath);
            return;
        }
        auto request = requestOfFile(*cmd, *requestFile, *args, context);
        if (!request) {
            printError(request.error().message);
            context.exitCode = 2;
            return;
        }
        context.exitCode = runLaunchCommand(*request, context.programPath);
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
