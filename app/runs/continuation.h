#pragma once

// A run of the history that failed or was stopped goes on (--continue_run): from its newest
// complete checkpoint, as its next attempt, in its own folder (attempts/<N>/), training exactly
// as the run did. Which checkpoint and which attempt are decided here; the local run then runs it.

#include "app/runs/launch_request.h"
#include "engine/common/result.h"
#include "engine/plan/run_plan.h"

#include <filesystem>
#include <string>

namespace shardscope::runs {

// The request of the next attempt of run `request.continueRun` of <home>'s history: the run's
// recipe, config and process count (unless given), its newest complete checkpoint, its
// checkpoints folder, and a run folder of its own under the run's attempts/. Refused for a run
// that is live, completed, has no checkpoint, or is not an engine run of this machine.
Result<LaunchRequest> continuationOf(const LaunchRequest& request, const std::filesystem::path& home);

// An attempt trains as the run did: the settings of its plan that decide the numbers equal the
// run's plan.json (the recipe, precision, sharding and shape; not the folders, ports or faults).
Result<void> sameTraining(const std::string& originalPlanText, const config::RunPlan& plan);

} // namespace shardscope::runs
