// `shardscope tune`: the fastest setup of a recipe that fits a memory budget per rank. The search
// (candidates, pruning, successive halving, the time budget) is app/runs/tuner.h; its trials run
// as `shardscope launch` runs of the history (app/runs/tune_trials.h). Here: the options, the
// request, and the report (a table, or --json for the workbench's Tune dialog).

#include "app/cli/commands.h"
#include "app/launcher/program.h"
#include "app/runs/tune_trials.h"
#include "app/runs/tuner.h"
#include "engine/estimate/memory_estimate.h"
#include "engine/common/byte_size.h"
#include "engine/plan/machine_probe.h"
#include "storage/store_paths.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <tuple>

namespace shardscope::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using runs::Candidate;

struct TuneArgs {
    std::string recipe;
    int numProcesses = 2;
    std::string memoryBudget; // "300MB", bytes; empty: the GPU's memory
    double timeBudget = 600; // seconds for all trials
    int trialSteps = 6; // the first round's steps per trial (2 of them warm-up)
    std::string runsDir;
    std::string outDir; // where the chosen files go (default: the recipe's folder)
    std::string mixedPrecision = "no";
    std::vector<std::string> layouts; // empty: all
    bool json = false;
};

std::string bytes(double b) { return config::formatBytes(b); } // the estimate's units

// The request of the command line; an error names the option.
Result<runs::TuneRequest> requestOf(const TuneArgs& args)
{
    runs::TuneRequest request;
    request.recipeFile = args.recipe;
    request.numProcesses = args.numProcesses;
    request.timeBudget = args.timeBudget;
    request.trialSteps = args.trialSteps;
    request.outDir = args.outDir;
    request.mixedPrecision = args.mixedPrecision;
    request.gpu = config::probeMachine().gpuCount > 0;
    if (args.memoryBudget.empty()) {
        const auto device = request.gpu ? runs::smallestGpuMemory() : std::nullopt;
        if (!device)
            return makeError(std::string(request.gpu ? "nvidia-smi did not say how much memory this machine's GPUs have"
                                                     : "this machine has no GPU whose memory would be the budget")
                             + "; give --memory_budget (bytes per rank, e.g. 300MB)");
        request.memoryBudget = *device;
    } else if (const std::string problem = byteSizeProblem(args.memoryBudget, &request.memoryBudget); !problem.empty()) {
        return makeError("--memory_budget " + problem);
    }
    request.runsDir = args.runsDir;
    return request;
}

// --layouts, by the names users write.
Result<std::vector<config::DataParallelLayout>> layoutsOf(const TuneArgs& args)
{
    std::vector<config::DataParallelLayout> layouts;
    for (const std::string& given : args.layouts) {
        const auto layout = config::layoutNamed(given);
        if (!layout)
            return makeError("--layouts: '" + given
                             + "' is not a layout; choose among DDP, FULL_SHARD, SHARD_GRAD_OP, ZeRO-1, ZeRO-2, ZeRO-3");
        layouts.push_back(*layout);
    }
    return layouts;
}

// The trials' runs go where `shardscope launch` puts runs by default, beside the history.
Result<void> resolveRunsDir(runs::TuneRequest& request)
{
    if (!request.runsDir.empty())
        return {};
    auto home = storage::shardscopeHome();
    if (!home)
        return home.error();
    request.runsDir = storage::runsFolder(*home).string();
    return {};
}

std::string sessionIdOf(const std::string& recipeFile)
{
    const std::time_t now = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
    return "tune-" + fs::path(recipeFile).stem().string() + "-" + stamp;
}

void printTable(const std::vector<Candidate>& all, const Candidate* best)
{
    std::vector<std::vector<std::string>> rows;
    for (const Candidate& c : all) {
        char speed[32];
        std::snprintf(speed, sizeof speed, "%.0f", c.measured.tokensPerS);
        rows.push_back({(&c == best ? "* " : "") + c.label(), bytes(c.estimate), c.rounds ? bytes(c.measured.peak) : "-",
                        c.rounds ? speed : "-", c.rounds ? c.run : "-",
                        &c == best          ? "best"
                        : c.dropped.empty() ? "in the race"
                                            : c.dropped});
    }
    std::cout << config::renderTable("shardscope tune", {"setup", "estimate", "measured", "tokens/s", "run", "result"}, rows);
}

json candidateJson(const Candidate& c)
{
    const auto& m = c.measured;
    return {{"setup", c.label()},
            {"layout", c.layoutName()},
            {"micro_batch", c.microBatch},
            {"accumulation", c.accumulation},
            {"activation_checkpointing", c.choice.activationCheckpointing},
            {"offload", c.choice.offload},
            {"estimate_bytes", c.estimate},
            {"measured_bytes", c.rounds ? json(m.peak) : json(nullptr)},
            {"tokens_per_s", c.rounds ? json(m.tokensPerS) : json(nullptr)},
            {"estimate_fields",
             {{"params", c.fields.parameters + c.fields.hostParameters},
              {"grads", c.fields.gradients + c.fields.hostGradients},
              {"optimizer", c.fields.optimizer + c.fields.hostOptimizer}}},
            {"measured_fields",
             c.rounds ? json{{"params", m.params}, {"grads", m.grads}, {"optimizer", m.optimizer}} : json(nullptr)},
            {"rounds", c.rounds},
            {"steps", c.steps},
            {"run", c.run},
            {"dropped", c.dropped}};
}

json reportJson(const runs::TuneSession& s, const std::vector<Candidate>& all, const Candidate* best,
                const std::string& configOut, const std::string& recipeOut)
{
    json trials = json::array();
    for (const Candidate& c : all)
        trials.push_back(candidateJson(c));
    return {{"session", s.request().sessionId},
            {"budget_bytes", s.request().memoryBudget},
            {"trials_run", s.trials()},
            {"seconds", s.elapsed()},
            {"out_of_time", s.outOfTime()},
            {"best", best ? json(best->label()) : json(nullptr)},
            {"best_run", best ? json(best->run) : json(nullptr)},
            {"best_steps", best ? json(best->steps) : json(nullptr)},
            {"config", configOut},
            {"recipe", recipeOut},
            {"candidates", trials}};
}

int tune(const TuneArgs& args, const std::string& programPath)
{
    const auto started = std::chrono::steady_clock::now();
    auto request = requestOf(args);
    auto recipe = request ? config::loadRecipe(args.recipe) : Result<config::Recipe>(request.error());
    auto layouts = recipe ? layoutsOf(args) : Result<std::vector<config::DataParallelLayout>>(recipe.error());
    if (layouts)
        request->layouts = *layouts;
    auto candidates = layouts ? runs::candidatesOf(*recipe, *request) : Result<std::vector<Candidate>>(layouts.error());
    if (!candidates) {
        std::cerr << "shardscope tune: " << candidates.error().message << "\n";
        return 2;
    }
    std::vector<Candidate>& all = *candidates;
    if (std::none_of(all.begin(), all.end(), [&](const Candidate& c) { return c.estimate <= request->memoryBudget; })) {
        std::cerr << "shardscope tune: " << runs::budgetBelowEveryEstimate(all, request->memoryBudget) << "\n";
        return 2;
    }
    if (auto resolved = resolveRunsDir(*request); !resolved) {
        std::cerr << "shardscope tune: " << resolved.error().message << "\n";
        return 2;
    }
    request->sessionId = sessionIdOf(args.recipe);
    runs::LaunchTrialRunner runner(thisExecutable(programPath).string(), request->runsDir, request->gpu);
    runs::TuneSession session(*request, runner, [started] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    });
    session.prune(all);
    session.race(all, *recipe);
    const Candidate* best = runs::bestOf(all);
    std::string configOut, recipeOut;
    if (best) {
        auto written = runs::writeTunedFiles(session.request(), *best);
        if (!written) {
            std::cerr << "shardscope tune: " << written.error().message << "\n";
            return 1;
        }
        std::tie(configOut, recipeOut) = *written;
    }
    if (args.json) {
        std::cout << reportJson(session, all, best, configOut, recipeOut).dump(1) << "\n";
    } else {
        printTable(all, best);
        std::printf("%d trials in %.0f s%s (tag %s)\n", session.trials(), session.elapsed(),
                    session.outOfTime() ? ", stopped by the time budget" : "", request->sessionId.c_str());
        if (best)
            std::cout << "best: " << best->label() << "\nwrote " << configOut << " and " << recipeOut << "\n\n"
                      << config::toYamlText(best->config);
    }
    if (!best) {
        std::cerr << "shardscope tune: no trial finished within the budget of " << args.timeBudget << " s; raise --time_budget\n";
        return 1;
    }
    return 0;
}

} // namespace

void addTuneCommand(CLI::App& app, CommandContext& context)
{
    auto args = std::make_shared<TuneArgs>();
    auto* cmd = app.add_subcommand("tune", "Find the fastest sharding, micro-batch, checkpointing and offload that fit a "
                                           "memory budget per rank (short trials, one at a time)");
    cmd->add_option("--recipe", args->recipe, "Recipe YAML to tune")->required()->check(CLI::ExistingFile);
    cmd->add_option("--num_processes", args->numProcesses, "Ranks of every trial")
        ->transform(numberIn({1, true, 1024, true}))
        ->capture_default_str();
    cmd->add_option("--memory_budget", args->memoryBudget,
                    "Bytes per rank a setup may use (e.g. 300MB, 40GB): model states on CPU ranks, the device's peak on GPUs "
                    "(default there: the smallest GPU's memory)");
    cmd->add_option("--time_budget", args->timeBudget, "Seconds for all trials together")
        ->transform(numberIn({1, true, 7 * 24 * 3600.0, false, " seconds"}))
        ->capture_default_str();
    cmd->add_option("--trial_steps", args->trialSteps, "Steps of each first-round trial (the first 2 are warm-up)")
        ->transform(numberIn({3, true, 100000, true}))
        ->capture_default_str();
    cmd->add_option("--mixed_precision", args->mixedPrecision, "The precision every trial keeps (no, bf16, ...)")
        ->capture_default_str();
    cmd->add_option("--runs_dir", args->runsDir, "Where the trials' runs go (default: $SHARDSCOPE_HOME/runs)");
    cmd->add_option("--out", args->outDir, "Folder for the chosen config and recipe (default: the recipe's; never overwritten)");
    cmd->add_option("--layouts", args->layouts,
                    "Only these layouts (comma-separated): DDP, FSDP FULL_SHARD, FSDP SHARD_GRAD_OP, ZeRO-1, ZeRO-2, ZeRO-3")
        ->delimiter(',');
    cmd->add_flag("--json", args->json, "Print the result as JSON");
    cmd->callback([args, &context] { context.exitCode = tune(*args, context.programPath); });
}

} // namespace shardscope::cli
