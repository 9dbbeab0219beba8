#pragma once

// Loss spikes: a step whose loss is over `factor` times the median of the `window` steps before it
// (rank 0's loss: the mean over ranks, equal on every rank). Reported as a `loss_spike` event with
// the step's epoch and batch number, so that the batch can be looked at. fp16's skipped steps are
// not spikes (their loss is that of a step whose update was dropped); a non-finite loss ends the
// run anyway (the rank's error says so).

#include "engine/protocol/events.h"

#include <deque>
#include <optional>

namespace shardscope {

struct LossSpikeOptions {
    double factor = 2.0;
    int window = 20; // steps before the one judged; a spike is judged once 5 of them are known
};

class LossSpikeDetector {
public:
    explicit LossSpikeDetector(LossSpikeOptions options) : m_options(options) { }

    // Rank 0's step; the spike it is, if it is one (the launcher's event, rank 0).
    std::optional<protocol::Event> addStep(const protocol::StepEvent& step, double time);

private:
    LossSpikeOptions m_options;
    std::deque<double> m_recent; // the last `window` losses, spikes included
};

} // namespace shardscope
