#include "app/launcher/loss_spikes.h"

#include "app/launcher/stragglers.h" // median

#include <algorithm>
#include <cmath>
#include <vector>

namespace shardscope {

bool LossSpikeDetector::farOutsideTheSpread(double loss) const
{
    // A loss that can be zero or negative has no log scale: the ratio alone decides.
    const auto logsOf = [](const std::deque<double>& values) -> std::optional<std::vector<double>> {
        std::vector<double> logs;
        for (double value : values) {
            if (value <= 0)
                return std::nullopt;
            logs.push_back(std::log(value));
        }
        return logs;
    };
    const auto recent = logsOf(m_recent);
    const auto longer = logsOf(m_longer);
    if (!recent || !longer || loss <= 0)
        return true;
    const double centre = median(*longer);
    std::vector<double> deviations;
    for (double value : *longer)
        deviations.push_back(std::abs(value - centre));
    const double spread = 1.4826 * median(deviations);
    return std::log(loss) - median(*recent) > kSpreads * spread;
}

std::optional<protocol::Event> LossSpikeDetector::addStep(const protocol::StepEvent& step, double time)
{
    if (m_options.window < 1 || step.skipped || !std::isfinite(step.loss))
        return std::nullopt;
    std::optional<protocol::Event> spike;
    if (m_recent.size() >= std::min<std::size_t>(5, static_cast<std::size_t>(m_options.window))) {
        const double before = median(std::vector<double>(m_recent.begin(), m_recent.end()));
        if (before > 0 && step.loss > m_options.factor * before && farOutsideTheSpread(step.loss))
            spike = protocol::Event{protocol::kProtocolVersion, 0, time,
                                    protocol::LossSpikeEvent{step.step, step.loss, before, step.epoch, step.batch,
                                                             static_cast<int>(m_recent.size()), m_options.factor}};
    }
    m_recent.push_back(step.loss);
    if (static_cast<int>(m_recent.size()) > m_options.window)
        m_recent.pop_front();
    m_longer.push_back(step.loss);
    if (m_longer.size() > std::max(kSpreadSteps, static_cast<std::size_t>(m_options.window)))
        m_longer.pop_front();
    return spike;
}

} // namespace shardscope
