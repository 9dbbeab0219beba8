#pragma once

// `shardscope launch --target slurm[:PROFILE]`: a launch request made into a cluster launch
// (app/cluster/cluster_launch.h), its plan checked as node 0's local launch would check it.

#include "app/runs/launch_request.h"

#include <string>

namespace shardscope::cli {

// --target slurm[:PROFILE] of a launch request (runs::refusalsOf has passed it). Returns the exit code.
int launchOnSlurm(const runs::LaunchRequest& request, const std::string& programPath);

} // namespace shardscope::cli
