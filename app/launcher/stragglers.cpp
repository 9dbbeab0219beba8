#include "app/launcher/stragglers.h"

#include <algorithm>
#include <iterator>

namespace shardscope {

double median(std::vector<double> values)
{
    if (values.empty())
        return 0;
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

StragglerDetector::StragglerDetector(int ranks, StragglerOptions options) : m_ranks(ranks), m_options(options) { }

std::vector<protocol::Event> StragglerDetector::addStep(int rank, const protocol::StepEvent& step, double time)
{
    std::vector<protocol::Event> flags;
    if (m_ranks < 2 || m_options.window < 1)
        return flags;
    auto& mine = m_times[rank].computeByStep;
    mine[step.step] = step.computeTime;
    // The window: the last `window` steps every rank has reported (log_every may space them).
    // The ranks are this launcher's (on another machine, not numbered from 0).
    if (static_cast<int>(m_times.size()) < m_ranks)
        return flags;
    std::int64_t last = step.step;
    for (const auto& [r, times] : m_times)
        last = std::min(last, times.computeByStep.rbegin()->first);
    if (last <= m_lastJudged)
        return flags; // each window once (every rank's event of a step would judge it again)
    std::map<int, double> medians;
    for (auto& [r, times] : m_times) {
        auto end = times.computeByStep.upper_bound(last);
        if (std::distance(times.computeByStep.begin(), end) < m_options.window)
            return flags; // not a whole window yet
        auto begin = std::prev(end, m_options.window);
        std::vector<double> window;
        for (auto it = begin; it != end; ++it)
            window.push_back(it->second);
        medians[r] = median(std::move(window));
        times.computeByStep.erase(times.computeByStep.begin(), begin); // older steps are no longer needed
    }
    m_lastJudged = last;
    for (auto& [r, times] : m_times) {
        std::vector<double> others;
        for (const auto& [q, m] : medians)
            if (q != r)
                others.push_back(m);
        const double othersTime = median(std::move(others));
        const bool slow = othersTime > 0 && medians[r] > (1.0 + m_options.threshold) * othersTime
                          && medians[r] - othersTime >= m_options.minGap;
        times.slowJudgements = slow ? times.slowJudgements + 1 : 0;
        if (times.slowJudgements >= m_options.window && !times.flagged) {
            flags.push_back(
                protocol::Event{protocol::kProtocolVersion, r, time,
                                protocol::StragglerEvent{last, medians[r], othersTime, m_options.window, m_options.threshold}});
            times.flagged = true;
        }
        if (!slow)
            times.flagged = false;
    }
    return flags;
}

} // namespace shardscope
