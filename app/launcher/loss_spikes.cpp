#include "app/launcher/loss_spikes.h"

#include "app/launcher/stragglers.h" // median

#include <algorithm>
#include <cmath>
#include <vector>

namespace shardscope {

bool LossSpikeDetector::farOutsideTheSpread(double loss) const
{
    // A loss that can be zero or negative has no log scale: the ratio alone decides.
    std::vector<double> logs;
    for (double value : m_losses) {
        if (value <= 0)
            return true;
        logs.push_back(std::log(value));
    }
    if (loss <= 0 || logs.empty())
        return true;
    const double centre = median(logs);
    std::vector<double> deviations;
    for (double value : logs)
        deviations.push_back(std::abs(value - centre));
    const double spread = 1.4826 * median(deviations);
    const std::vector<double> window(logs.end() - static_cast<std::ptrdiff_t>(windowSize()), logs.end());
    return std::log(loss) - median(window) > kSpreads * spread;
}

std::optional<protocol::Event> LossSpikeDetector::addStep(const protocol::StepEvent& step, double time)
{
    if (m_options.window < 1 || step.skipped || !std::isfinite(step.loss))
        return std::nullopt;
    std::optional<protocol::Event> spike;
    if (windowSize() >= std::min<std::size_t>(5, static_cast<std::size_t>(m_options.window))) {
        const double before = median(
            std::vector<double>(m_losses.end() - static_cast<std::ptrdiff_t>(windowSize()), m_losses.end()));
        if (before > 0 && step.loss > m_options.factor * before && farOutsideTheSpread(step.loss))
            spike = protocol::Event{protocol::kProtocolVersion, 0, time,
                                    protocol::LossSpikeEvent{step.step, step.loss, before, step.epoch, step.batch,
                                                             static_cast<int>(windowSize()), m_options.factor}};
    }
    m_losses.push_back(step.loss);
    if (m_losses.size() > std::max(kSpreadSteps, static_cast<std::size_t>(m_options.window)))
        m_losses.pop_front();
    return spike;
}

} // namespace shardscope
