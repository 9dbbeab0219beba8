#pragma once

// From an Accelerate config (merged with the launch flags, which win) to what our launcher does:
// how many ranks, which c10d backend, which engine options (mixed precision, FSDP strategy and
// wrap policy, ZeRO stage, state-dict type) and the environment Accelerate's launcher would give
// each rank. What the config asks and this engine cannot do yet is an error naming the key and
// the fix, never silently ignored.

#include "engine/common/result.h"
#include "engine/config/accelerate_config.h"
#include "engine/config/env_export.h"

#include <string>
#include <utility>
#include <vector>

namespace shardscope {

struct LaunchPlan {
    int numProcesses = 1; // in all, over every machine
    int numMachines = 1;
    int machineRank = 0;
    std::string mainProcessIp = "127.0.0.1";
    int mainProcessPort = 0;
    std::string distributedType; // Accelerate's spelling, for the history
    std::string mixedPrecision = "no";
    std::vector<std::string> workerArgs; // engine options for `shardscope-worker train`
    std::vector<std::string> environment; // NAME=VALUE
};

// `hasGpu`: whether this machine can run NCCL ranks; without one, MULTI_GPU is an error and FSDP /
// DeepSpeed runs use Gloo on the CPU (the engine's CPU path, for trying a config out).
// `environment`: what Accelerate's environment depends on besides the config (this machine's
// physical cores, the launching environment's OMP_NUM_THREADS, --cpu).
Result<LaunchPlan> planLaunch(const config::AccelerateConfig& merged, bool hasGpu,
                              const config::EnvironmentOptions& environment = {});

} // namespace shardscope
