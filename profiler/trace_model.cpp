#include "profiler/trace_model.h"

#include <algorithm>
#include <tuple>

namespace shardscope::profiler {

std::string_view laneName(Lane lane)
{
    switch (lane) {
    case Lane::Compute:
        return "compute";
    case Lane::Communication:
        return "communication";
    case Lane::Memory:
        return "memory";
    case Lane::Host:
        return "host";
    }
    return "host";
}

std::optional<Lane> parseLane(std::string_view name)
{
    for (Lane lane : kAllLanes) {
        if (laneName(lane) == name)
            return lane;
    }
    return std::nullopt;
}

void canonicalise(RankTrace& trace)
{
    auto spanKey = [](const Span& s) {
        return std::tie(s.startNs, s.lane, s.track, s.name, s.category, s.bytes, s.step, s.device, s.correlationId);
    };
    std::stable_sort(trace.spans.begin(), trace.spans.end(), [&](const Span& a, const Span& b) {
        if (a.startNs != b.startNs)
            return a.startNs < b.startNs;
        if (a.endNs != b.endNs)
            return a.endNs > b.endNs;
        return spanKey(a) < spanKey(b);
    });
    std::stable_sort(trace.counters.begin(), trace.counters.end(), [](const CounterSample& a, const CounterSample& b) {
        return std::tie(a.timeNs, a.name, a.series, a.value) < std::tie(b.timeNs, b.name, b.series, b.value);
    });
}

} // namespace shardscope::profiler
