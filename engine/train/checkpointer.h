#pragma once

// A run's checkpoints from the rank's side: saving the whole training state every
// checkpoint_every steps (model, optimizer, data position, RNG-free loop counters, loss scaler,
// fp8 delayed scaling's amax histories) and resuming from one exactly, in the layout and with the
// checks of engine/checkpoint.

#include "engine/checkpoint/checkpoint.h"
#include "engine/common/run_layout.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace torch::optim {
class Optimizer;
}
namespace shardscope::config {
struct RunPlan;
}
namespace shardscope::data {
class BatchIterator;
}
namespace shardscope::precision {
class Float8Layer;
}

namespace shardscope::train {

class Accelerator;
class EventSink;

// What a checkpoint must agree on with the run that loads it (world size, strategy, state-dict
// type, precision, the recipe's model section).
checkpoint::Compatibility compatibilityOf(const config::RunPlan& plan, int worldSize);

// The model's fp8 layers by module path ("h.0.mlp.c_fc"): under delayed scaling their amax
// histories are training state like the optimizer's.
using Float8Layers = std::vector<std::pair<std::string, std::shared_ptr<precision::Float8Layer>>>;

class Checkpointer {
public:
    Checkpointer(const config::RunPlan& plan, Accelerator& acc, torch::optim::Optimizer& optimizer, data::BatchIterator& batches,
                 EventSink& events, Float8Layers float8Layers = {});

    // Loads plan.resumeFrom (every rank: the ranks check that they resume the same point) and
    // returns the optimizer steps it had done. Throws naming what is damaged or incompatible.
    std::int64_t resume();
    // Every rank calls it after `stepsDone` optimizer steps.
    void save(std::int64_t stepsDone);

private:
    void restoreFloat8State(const checkpoint::LoadedCheckpoint& loaded);

    const config::RunPlan& m_plan;
    Accelerator& m_acc;
    torch::optim::Optimizer& m_optimizer;
    data::BatchIterator& m_batches;
    EventSink& m_events;
    RunLayout m_layout;
    checkpoint::Compatibility m_compatibility;
    Float8Layers m_float8Layers;
};

} // namespace shardscope::train
