#pragma once

// The environment Accelerate's launcher gives each training process, per distributed_type
// (reference §4.6), so a rank started by our launcher sees what it would under
// `accelerate launch`. Casing is Accelerate's: str(bool) "True"/"False" for the simple launcher
// and dynamo, lower-case "true"/"false" for FSDP, DeepSpeed and ACCELERATE_DEBUG_MODE.

#include "engine/accelerate/accelerate_config.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace shardscope::config {

enum class LauncherKind { Simple, MultiGpu, DeepSpeed, Tpu, SageMaker };

// Which launcher `accelerate launch` would pick for this (merged) config (reference §4.5). The
// file's use_cpu does not change it (Accelerate reads it into args.use_cpu, while the launcher
// choice looks at the --cpu flag only): an FSDP file with use_cpu: true still goes through
// torchrun with the FSDP variables.
LauncherKind launcherFor(const AccelerateConfig& config, bool cpuFlag = false);

struct EnvironmentOptions {
    bool honourFsdp1Strategy = true; // Shardscope's fix of Accelerate's FSDP1 bug (docs/CONFIG.md)
    bool cpuFlag = false; // `--cpu` was given: the simple launcher, whatever the file says
    // OMP_NUM_THREADS, as accelerate launch picks it: the parent's value when it has one; else,
    // when training on the CPU (use_cpu), physical cores / processes per machine if that is > 1;
    // else 1. torchrun adds 1 for DeepSpeed's several local processes.
    int physicalCores = 0; // 0: unknown (then 1 thread); see physicalCoreCount()
    std::optional<int> inheritedOmpThreads; // OMP_NUM_THREADS of the launching environment
    bool enableCpuAffinity = false; // --enable_cpu_affinity (the YAML key never reaches Accelerate)
};

// The variables added to the parent environment, in a stable order.
std::vector<std::pair<std::string, std::string>> launchEnvironment(const AccelerateConfig& config,
                                                                   const EnvironmentOptions& options = {});

} // namespace shardscope::config
