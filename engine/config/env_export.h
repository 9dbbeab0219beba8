#pragma once

// The environment Accelerate's launcher gives each training process, per distributed_type
// (reference §4.6), so a rank started by our launcher sees what it would under
// `accelerate launch`. Casing is Accelerate's: str(bool) "True"/"False" for the simple launcher
// and dynamo, lower-case "true"/"false" for FSDP, DeepSpeed and ACCELERATE_DEBUG_MODE.

#include "engine/config/accelerate_config.h"

#include <string>
#include <utility>
#include <vector>

namespace shardscope::config {

enum class LauncherKind { Simple, MultiGpu, DeepSpeed, Tpu, SageMaker };

// Which launcher `accelerate launch` would pick for this (merged) config (reference §4.5).
LauncherKind launcherFor(const AccelerateConfig& config);

struct EnvironmentOptions {
    bool honourFsdp1Strategy = true; // Shardscope's fix of Accelerate's FSDP1 bug (docs/CONFIG.md)
    int numCpuThreadsPerProcess = 1; // OMP_NUM_THREADS
    bool enableCpuAffinity = false;  // --enable_cpu_affinity (the YAML key never reaches Accelerate)
};

// The variables added to the parent environment, in a stable order.
std::vector<std::pair<std::string, std::string>> launchEnvironment(const AccelerateConfig& config,
                                                                   const EnvironmentOptions& options = {});

} // namespace shardscope::config
