#pragma once

// DeepSpeed's JSON config (`deepspeed_config_file`): reading it, Accelerate's conflict rule, and
// the resolution of "auto" values as Accelerate does it (reference §6): plugin values fill only
// entries that say "auto"; what is still "auto" at prepare time is filled from the data loader,
// the model width and the optimizer.

#include "engine/common/result.h"
#include "engine/accelerate/accelerate_config.h"
#include "engine/accelerate/value.h"

#include <optional>
#include <string>
#include <vector>

namespace shardscope::config {

Result<Value> loadDeepSpeedJson(const std::string& path);

// deepspeed_config keys Accelerate refuses next to a JSON file (ACCELERATE_CONFIG_DS_FIELDS).
const std::vector<std::string>& deepSpeedConflictKeys();

// What is known at prepare time (from the recipe and the launch).
struct DeepSpeedContext {
    int numProcesses = 1;
    std::optional<std::int64_t> microBatchPerGpu; // the training data loader's batch size
    std::int64_t gradientAccumulationSteps = 1; // Accelerator(gradient_accumulation_steps=...)
    std::optional<std::int64_t> hiddenSize; // model width
    std::optional<double> learningRate; // optimizer lr / weight decay (DummyOptim)
    std::optional<double> weightDecay;
    std::optional<std::int64_t> warmupSteps;
    std::optional<std::int64_t> totalSteps;
    std::string mixedPrecision = "no"; // after CLI flags
};

// The DeepSpeed config a rank runs with: from the JSON file when deepspeed_config_file is set,
// otherwise synthesised from deepspeed_config, with every "auto" resolved. Errors carry
// Accelerate's meaning (conflicts, fp16 vs bf16, missing zero_optimization, unresolvable auto).
Result<Value> resolveDeepSpeedConfig(const AccelerateConfig& config, const DeepSpeedContext& context,
                                     const std::string& baseDir = {});

} // namespace shardscope::config
