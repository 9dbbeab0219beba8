#pragma once

// A run on this machine: prepared (the plan checked before anything is created, the run folder
// and its files, the event stream's monitor, the history's recorder), run (the launcher's ranks,
// or a user's script through the real `accelerate launch`), and ended (runs::decideRunEnd, then
// outcome.json and the history). `shardscope launch` without --target, and each node's launcher
// of a cluster job.

#include "app/launcher/run_directory.h"
#include "app/runs/launch_request.h"
#include "engine/plan/run_plan.h"
#include "engine/plan/script_plan.h"
#include "engine/recipe/recipe.h"

#include <optional>
#include <string>

namespace shardscope::runs {

// The launch, run in the foreground to its end (refusalsOf(request) must be empty). Returns the
// launcher's exit code: 0, the root cause's status, kCheckpointedExitCode after a checkpointed
// stop, 2 when refused before anything started.
int runLocally(const LaunchRequest& request, const std::string& programPath);

// The run plan of a training launch: the config (the flags merged in, they win), the recipe, the
// launch options, the engine flags after -- and this machine, checked together. Prints every
// problem; nullopt (with exitCode 2) when one is an error.
std::optional<config::RunPlan> planRun(const LaunchRequest& request, const config::Recipe& recipe, const std::string& runDir,
                                       int& exitCode);
// The Accelerate config of a script run, with the launch flags merged in. Null (error printed)
// when there is none or it does not load.
std::optional<config::AccelerateConfig> scriptConfig(const LaunchRequest& request);
// The command of a script run, checked before anything is created; prints every problem.
std::optional<config::ScriptPlan> planScript(const LaunchRequest& request, const config::AccelerateConfig& accelerateConfig,
                                             const std::string& python, const RunDirectory* runDir);

// shardscope-worker: the one beside shardscope, or $SHARDSCOPE_WORKER.
std::string defaultWorkerPath(const std::string& programPath);

} // namespace shardscope::runs
