#include "profiler/cupti/activity_record.h"

#include <algorithm>
#include <cstdlib>
#include <cxxabi.h>
#include <iterator>
#include <limits>
#include <memory>
#include <set>
#include <tuple>

namespace shardscope::profiler {

namespace {

bool startsWith(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

} // namespace

Lane classifyActivity(ActivityRecord::Kind kind, std::string_view name)
{
    if (kind == ActivityRecord::Kind::Memcpy || kind == ActivityRecord::Kind::Memset)
        return Lane::Memory;
    if (startsWith(name, "nccl"))
        return Lane::Communication;
    if (name.find("Memcpy") != std::string_view::npos || name.find("Memset") != std::string_view::npos)
        return Lane::Memory;
    return Lane::Compute;
}

std::string collectiveKind(std::string_view name)
{
    // ncclDevKernel_<Coll>_..., ncclKernel_<Coll>_...: the collective is the word after the first
    // underscore.
    static constexpr std::pair<std::string_view, std::string_view> kKinds[] = {
        {"AllReduce", "all_reduce"}, {"AllGather", "all_gather"}, {"ReduceScatter", "reduce_scatter"},
        {"Broadcast", "broadcast"},  {"Reduce", "reduce"},        {"SendRecv", "send_recv"},
        {"Send", "send_recv"},       {"Recv", "send_recv"},       {"AllToAll", "all_to_all"},
    };
    const auto underscore = name.find('_');
    if (!startsWith(name, "nccl") || underscore == std::string_view::npos)
        return "nccl";
    const std::string_view rest = name.substr(underscore + 1);
    for (const auto& [word, kind] : kKinds) {
        if (startsWith(rest, word) && (rest.size() == word.size() || rest[word.size()] == '_' || rest[word.size()] == '('))
            return std::string(kind);
    }
    return "nccl";
}

std::string demangleKernelName(const char* name)
{
    if (name == nullptr)
        return "<unnamed kernel>";
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(name, nullptr, nullptr, &status), &std::free);
    return status == 0 && demangled ? std::string(demangled.get()) : std::string(name);
}

DeviceSpansResult spansFromActivity(const std::vector<ActivityRecord>& records, std::int64_t deviceToHostOffsetNs)
{
    std::set<int> devices;
    for (const ActivityRecord& r : records)
        devices.insert(r.device);
    const bool manyDevices = devices.size() > 1;

    DeviceSpansResult out;
    out.spans.reserve(records.size());
    for (const ActivityRecord& r : records) {
        if ((r.startNs == 0 && r.endNs == 0) || r.endNs < r.startNs) {
            ++out.skipped;
            continue;
        }
        Span span;
        span.name = r.name;
        span.lane = classifyActivity(r.kind, r.name);
        switch (r.kind) {
        case ActivityRecord::Kind::Kernel:
            span.category = span.lane == Lane::Communication ? collectiveKind(r.name)
                            : span.lane == Lane::Memory      ? std::string(category::kMemcpy)
                                                             : std::string(category::kKernel);
            break;
        case ActivityRecord::Kind::Memcpy:
            span.category = std::string(category::kMemcpy);
            break;
        case ActivityRecord::Kind::Memset:
            span.category = std::string(category::kMemset);
            break;
        }
        span.track = (manyDevices ? "cuda:" + std::to_string(r.device) + " " : std::string()) + "stream "
                     + std::to_string(r.stream);
        span.startNs = r.startNs + deviceToHostOffsetNs;
        span.endNs = r.endNs + deviceToHostOffsetNs;
        span.bytes = r.bytes;
        span.device = r.device;
        span.correlationId = r.correlationId;
        out.spans.push_back(std::move(span));
    }
    return out;
}

void attachDeviceActivity(RankTrace& trace, const std::vector<ActivityRecord>& records, std::int64_t deviceToHostOffsetNs)
{
    DeviceSpansResult device = spansFromActivity(records, deviceToHostOffsetNs);
    std::vector<const Span*> markers;
    for (const Span& span : trace.spans) {
        if (span.lane == Lane::Host && span.category == category::kStep && span.step >= 0)
            markers.push_back(&span);
    }
    std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> windows; // start, end, step
    for (const Span* m : markers)
        windows.emplace_back(m->startNs, m->endNs, m->step);
    std::sort(windows.begin(), windows.end());
    for (Span& span : device.spans) {
        // The last step that began at or before the kernel started: kernels run after their launch,
        // sometimes past the host's end of the step.
        auto it = std::upper_bound(
            windows.begin(), windows.end(),
            std::make_tuple(span.startNs, std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::int64_t>::max()));
        if (it != windows.begin())
            span.step = std::get<2>(*std::prev(it));
    }
    trace.spans.insert(trace.spans.end(), std::make_move_iterator(device.spans.begin()),
                       std::make_move_iterator(device.spans.end()));
    std::stable_sort(trace.spans.begin(), trace.spans.end(), [](const Span& a, const Span& b) { return a.startNs < b.startNs; });
    trace.source = std::string(kSourceCupti);
    if (device.skipped > 0)
        trace.notes.push_back(std::to_string(device.skipped) + " CUPTI record(s) had no timestamps and were left out");
}

} // namespace shardscope::profiler
