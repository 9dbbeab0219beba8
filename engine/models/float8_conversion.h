#pragma once

// mixed_precision fp8 applied to a built model: the linear layers Accelerate's torchao filter
// keeps (config::linearLayersOf: not the first or last, both dimensions divisible by 16) run their
// matmuls in fp8 with the run's scaling recipe; every other layer stays as it was (bf16 under
// autocast). Like parallelism, it is applied after the model is built (torchtitan's way).

#include "engine/plan/float8_options.h"
#include "engine/models/models.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace shardscope::models {

struct Float8Conversion {
    std::vector<std::string> converted; // module paths, in model order
    std::vector<std::string> kept; // the other linear layers, each with why: "layers.0 (first)"
    std::int64_t stateBytes = 0; // scales and amax histories the converted layers hold
};

// Throws when the model does not have a layer linearLayersOf names (a model and its recipe out of step).
Float8Conversion convertToFloat8(TrainableModel& model, const config::Recipe& recipe, const config::Float8Options& options);

// The converted layers' weights and fp8 state (after convertToFloat8), in model order: what an
// fp8 all-gather quantizes before it gathers (parallel/sharded.h).
struct Float8LinearWeight {
    std::string name; // the weight's parameter name
    torch::Tensor weight;
    std::shared_ptr<precision::Float8Layer> layer;
};
std::vector<Float8LinearWeight> float8LinearWeights(TrainableModel& model);

} // namespace shardscope::models
