#include "app/launcher/loss_spikes.h"

#include "app/launcher/stragglers.h" // median

#include <algorithm>
#include <cmath>
#include <vector>

namespace shardscope {

std::optional<protocol::Event> LossSpikeDetector::addStep(const protocol::StepEvent& step, double time)
{
    if (m_options.window < 1 || step.skipped || !std::isfinite(step.loss))
        return std::nullopt;
    std::optional<protocol::Event> spike;
    if (m_recent.size() >= std::min<std::size_t>(5, static_cast<std::size_t>(m_options.window))) {
        const double before = median(std::vector<double>(m_recent.begin(), m_recent.end()));
        if (before > 0 && step.loss > m_options.factor * before)
            spike = protocol::Event{protocol::kProtocolVersion, 0, time,
                                    protocol::LossSpikeEvent{step.step, step.loss, before, step.epoch, step.batch,
                                                             static_cast<int>(m_recent.size()), m_options.factor}};
    }
    m_recent.push_back(step.loss);
    if (static_cast<int>(m_recent.size()) > m_options.window)
        m_recent.pop_front();
    return spike;
}

} // namespace shardscope
