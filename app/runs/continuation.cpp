#include "app/runs/continuation.h"

#include "engine/accelerate/yaml_io.h"
#include "engine/checkpoint/checkpoint_paths.h"
#include "engine/common/run_layout.h"
#include "engine/common/wall_clock.h"
#include "storage/run_store.h"
#include "storage/store_paths.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>

namespace shardscope::runs {

namespace fs = std::filesystem;

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

Result<LaunchRequest> continuationOf(const LaunchRequest& request, const fs::path& home)
{
    storage::StoreOptions storeOptions;
    storeOptions.markInterrupted = false;
    auto store = storage::RunStore::open(storage::historyFile(home), storeOptions);
    auto runId = store ? store->resolveRun(request.continueRun) : Result<std::int64_t>(store.error());
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
    LaunchRequest effective = request;
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
    effective.runsDir = layout.attemptsDir().string();
    effective.runName = std::to_string(attempt);
    LaunchRequest::Continuation continuation;
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

} // namespace shardscope::runs
