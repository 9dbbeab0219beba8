#pragma once

// Fault injection for the reliability and diagnosis tests (the plan's `faults`, set through the
// engine flags after `shardscope launch ... --`), behind one seam: the trainer calls these hooks
// at fixed points of a step, and each does nothing unless its fault is set for this step (and
// rank). PyTorch's c10d tests inject the same way, through a subclass at one place
// (ProcessGroupGlooDelayed), so that the training loop reads as training.
//   beforeStep      --fill-disk-at-step: from this step, writes past 64 KiB fail (EFBIG), on every
//                   rank or on --fill-disk-rank's
//   spoil           --spike-at-step: this step's batches spoilt, its loss spikes
//   afterForward    --oom-at-step: an allocation no machine has; --slow-rank/--slow-forward-ms;
//                   --spin-rank RANK:STEP: busy for good, in no collective
//   afterBackward   --inject-nonfinite-grad: a NaN in a synchronised gradient, on every rank
//   attach          --nonfinite-output MODULE:STEP: a NaN in that module's output in that step
// (--crash-in-checkpoint is the checkpointer's, --skip-collective the communicator's.)
// Includes torch: only trainer.cpp includes it.

#include "engine/plan/run_plan.h"
#include "engine/data/data.h"

#include <c10/core/Device.h>

#include <cstdint>

namespace shardscope::models {
class TrainableModel;
}

namespace shardscope::train {

class Accelerator;

class FaultInjector {
public:
    // `vocabSize`: a token batch is spoilt with ids below it.
    FaultInjector(const config::FaultInjection& faults, int rank, std::int64_t vocabSize);

    // Adds the output hook of --nonfinite-output to its module; `step` tells the hook which step
    // runs. Throws when the model has no such module.
    void attach(models::TrainableModel& model, const std::int64_t& step);
    void beforeStep(std::int64_t step) const;
    void spoil(data::BatchIterator::Batch& batch, std::int64_t step) const;
    void afterForward(const c10::Device& device, std::int64_t step) const;
    void afterBackward(Accelerator& accelerator, std::int64_t step) const;

private:
    const config::FaultInjection& m_faults;
    int m_rank = 0;
    std::int64_t m_vocabSize = 2;
};

} // namespace shardscope::train
