#pragma once

// Loss spikes: a step whose loss is over `factor` times the median of the `window` steps before it
// (rank 0's loss: the mean over ranks, equal on every rank) and far outside the loss's own spread:
// its log is over kSpreads robust standard deviations above the recent logs' median (1.4826 x the
// median absolute deviation of the last kSpreadSteps logs: 20 steps' deviation was too unsteady an
// estimate, and a small one made ordinary noise look like a spike). The ratio alone raised false alarms on noisy healthy runs (a small
// batch's per-step loss is heavy-tailed: 9 in 400 steps of an MLP at batch 8, 3,763 in 50,000; #43);
// in log space the noise of a loss is about the same at every scale. Reported as a `loss_spike`
// event with the step's epoch and batch number, so that the batch can be looked at. fp16's skipped
// steps are not spikes (their loss is that of a step whose update was dropped); a non-finite loss
// is the non-finite check's.

#include "engine/protocol/events.h"

#include <algorithm>
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
    // Whether `loss`'s log is over kSpreads robust standard deviations above the recent logs' median.
    bool farOutsideTheSpread(double loss) const;

    static constexpr double kSpreads = 5.0;
    static constexpr std::size_t kSpreadSteps = 100;

private:
    LossSpikeOptions m_options;
    // The last max(window, kSpreadSteps) losses, spikes included: the last `window` of them are
    // the steps a loss is compared with, all of them give the spread.
    std::deque<double> m_losses;
    std::size_t windowSize() const { return std::min(m_losses.size(), static_cast<std::size_t>(m_options.window)); }
};

} // namespace shardscope
