#pragma once

// The step event: what one optimizer step measured (loss, timing) together with what the rank
// holds after it (memory by kind, the process's and the device's) and what it communicated.

#include "engine/protocol/events.h"

#include <c10/core/Device.h>

#include <cstdint>
#include <optional>

namespace torch::optim {
class Optimizer;
}

namespace shardscope::train {

class Accelerator;

// What the training step itself measured.
struct StepMeasurement {
    std::int64_t step = 0; // optimizer steps done
    std::int64_t epoch = 0;
    std::int64_t batch = 0; // the step's first batch within the epoch (this rank's)
    double loss = 0; // mean over ranks
    double localLoss = 0; // this rank's
    double lr = 0;
    double gradNorm = 0; // before clipping
    std::int64_t samples = 0; // this rank's, this step
    std::int64_t tokens = 0; // this rank's, this step
    double stepTime = 0; // seconds
    double dataTime = 0; // seconds of it spent waiting for batches
    double waitTime = 0; // seconds of it blocked in collectives (dist::waitFor)
    double optimizerTime = 0; // seconds of it in the optimizer step
    protocol::PhaseMemory phaseMemory; // what the rank held after forward, backward, the optimizer
};

// What this rank holds now, in bytes: the caching allocator's allocated bytes on CUDA, the
// process's resident set on CPU (one short read of /proc/self/statm). For PhaseMemory.
std::int64_t memoryInUse(c10::Device device);

// After the optimizer step (the data-parallel footprint is the step's then).
protocol::StepEvent makeStepEvent(const StepMeasurement& measured, Accelerator& acc, torch::optim::Optimizer& optimizer);

} // namespace shardscope::train
