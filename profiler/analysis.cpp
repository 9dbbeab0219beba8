#include "profiler/analysis.h"

#include <algorithm>
#include <iterator>
#include <map>

namespace shardscope::profiler {

std::vector<Interval> mergeIntervals(std::vector<Interval> intervals)
{
    std::erase_if(intervals, [](const Interval& i) { return i.endNs <= i.startNs; });
    std::sort(intervals.begin(), intervals.end(), [](const Interval& a, const Interval& b) { return a.startNs < b.startNs; });
    std::vector<Interval> merged;
    for (const Interval& i : intervals) {
        if (!merged.empty() && i.startNs <= merged.back().endNs)
            merged.back().endNs = std::max(merged.back().endNs, i.endNs);
        else
            merged.push_back(i);
    }
    return merged;
}

std::int64_t totalLength(const std::vector<Interval>& merged)
{
    std::int64_t total = 0;
    for (const Interval& i : merged)
        total += i.endNs - i.startNs;
    return total;
}

std::vector<Interval> intersectIntervals(const std::vector<Interval>& a, const std::vector<Interval>& b)
{
    // A two-pointer sweep over both unions: the time where at least one interval of each is active.
    std::vector<Interval> out;
    std::size_t i = 0;
    std::size_t j = 0;
    while (i < a.size() && j < b.size()) {
        const std::int64_t start = std::max(a[i].startNs, b[j].startNs);
        const std::int64_t end = std::min(a[i].endNs, b[j].endNs);
        if (start < end)
            out.push_back({start, end});
        if (a[i].endNs < b[j].endNs)
            ++i;
        else
            ++j;
    }
    return out;
}

std::vector<Interval> subtractIntervals(const std::vector<Interval>& a, const std::vector<Interval>& b)
{
    std::vector<Interval> out;
    std::size_t j = 0;
    for (Interval piece : a) {
        while (j < b.size() && b[j].endNs <= piece.startNs)
            ++j;
        std::size_t k = j;
        while (k < b.size() && b[k].startNs < piece.endNs) {
            if (b[k].startNs > piece.startNs)
                out.push_back({piece.startNs, b[k].startNs});
            piece.startNs = std::max(piece.startNs, b[k].endNs);
            if (piece.startNs >= piece.endNs)
                break;
            ++k;
        }
        if (piece.startNs < piece.endNs)
            out.push_back(piece);
    }
    return out;
}

std::vector<Interval> clipIntervals(const std::vector<Interval>& merged, Interval window)
{
    std::vector<Interval> out;
    for (const Interval& i : merged) {
        const std::int64_t start = std::max(i.startNs, window.startNs);
        const std::int64_t end = std::min(i.endNs, window.endNs);
        if (start < end)
            out.push_back({start, end});
    }
    return out;
}

Breakdown computeBreakdown(const std::vector<Span>& spans, std::optional<Interval> window)
{
    std::vector<Interval> compute;
    std::vector<Interval> comm;
    std::vector<Interval> memory;
    std::vector<Interval> waits;
    for (const Span& span : spans) {
        const Interval interval{span.startNs, span.endNs};
        switch (span.lane) {
        case Lane::Compute:
            compute.push_back(interval);
            break;
        case Lane::Communication:
            comm.push_back(interval);
            break;
        case Lane::Memory:
            memory.push_back(interval);
            break;
        case Lane::Host:
            if (span.category == category::kWait)
                waits.push_back(interval);
            break;
        }
    }
    // Time blocked in a collective is not compute, though a host phase span encloses it.
    auto mergedCompute = subtractIntervals(mergeIntervals(std::move(compute)), mergeIntervals(std::move(waits)));
    auto mergedComm = mergeIntervals(std::move(comm));
    auto mergedMemory = mergeIntervals(std::move(memory));

    Breakdown b;
    Interval extent;
    if (window) {
        extent = *window;
        mergedCompute = clipIntervals(mergedCompute, extent);
        mergedComm = clipIntervals(mergedComm, extent);
        mergedMemory = clipIntervals(mergedMemory, extent);
    } else {
        bool any = false;
        for (const auto* list : {&mergedCompute, &mergedComm, &mergedMemory}) {
            if (list->empty())
                continue;
            extent.startNs = any ? std::min(extent.startNs, list->front().startNs) : list->front().startNs;
            extent.endNs = any ? std::max(extent.endNs, list->back().endNs) : list->back().endNs;
            any = true;
        }
        if (!any)
            return b;
    }
    b.spanNs = std::max<std::int64_t>(0, extent.endNs - extent.startNs);

    std::vector<Interval> all = mergedCompute;
    all.insert(all.end(), mergedComm.begin(), mergedComm.end());
    all.insert(all.end(), mergedMemory.begin(), mergedMemory.end());
    const auto busy = mergeIntervals(std::move(all));
    std::vector<Interval> computeOrComm = mergedCompute;
    computeOrComm.insert(computeOrComm.end(), mergedComm.begin(), mergedComm.end());
    const auto mergedComputeOrComm = mergeIntervals(std::move(computeOrComm));

    b.computeNs = totalLength(mergedCompute);
    b.commTotalNs = totalLength(mergedComm);
    b.overlapNs = totalLength(intersectIntervals(mergedComm, mergedCompute));
    b.commNs = b.commTotalNs - b.overlapNs;
    b.memoryNs = totalLength(subtractIntervals(mergedMemory, mergedComputeOrComm));
    b.idleNs = b.spanNs - totalLength(busy);
    return b;
}

std::vector<Span> analysedSpans(const RankTrace& trace)
{
    const bool device = std::any_of(trace.spans.begin(), trace.spans.end(), [](const Span& s) { return s.device >= 0; });
    std::vector<Span> out;
    for (const Span& span : trace.spans) {
        if ((span.lane == Lane::Host && span.category != category::kWait) || span.endNs < span.startNs)
            continue;
        if (device && span.device < 0)
            continue;
        out.push_back(span);
    }
    return out;
}

std::vector<std::pair<std::int64_t, Interval>> stepWindows(const RankTrace& trace)
{
    std::map<std::int64_t, Interval> windows;
    auto widen = [&windows](std::int64_t step, const Span& span) {
        auto [it, inserted] = windows.try_emplace(step, Interval{span.startNs, span.endNs});
        if (!inserted) {
            it->second.startNs = std::min(it->second.startNs, span.startNs);
            it->second.endNs = std::max(it->second.endNs, span.endNs);
        }
    };
    for (const Span& span : trace.spans) {
        if (span.lane == Lane::Host && span.category == category::kStep && span.step >= 0)
            widen(span.step, span);
    }
    if (windows.empty()) {
        for (const Span& span : analysedSpans(trace)) {
            if (span.step >= 0)
                widen(span.step, span);
        }
    }
    return {windows.begin(), windows.end()};
}

RankAnalysis analyseRank(const RankTrace& trace)
{
    RankAnalysis analysis;
    analysis.rank = trace.rank;
    analysis.source = trace.source;
    const std::vector<Span> spans = analysedSpans(trace);
    analysis.deviceSpans = std::any_of(spans.begin(), spans.end(), [](const Span& s) { return s.device >= 0; });
    analysis.total = computeBreakdown(spans);
    for (const auto& [step, window] : stepWindows(trace))
        analysis.steps.push_back(StepAnalysis{step, window, computeBreakdown(spans, window)});

    std::map<std::string, CollectiveStats> collectives;
    for (const Span& span : spans) {
        if (span.lane != Lane::Communication)
            continue;
        CollectiveStats& stats = collectives[span.category];
        stats.kind = span.category;
        ++stats.count;
        stats.bytes += span.bytes;
        stats.timeNs += span.durationNs();
    }
    for (auto& [kind, stats] : collectives) {
        std::vector<Span> alone; // compute, waits and this kind's communication
        std::copy_if(spans.begin(), spans.end(), std::back_inserter(alone),
                     [&kind = kind](const Span& s) { return s.lane != Lane::Communication || s.category == kind; });
        stats.overlap = computeBreakdown(alone).overlap();
        analysis.collectives.push_back(std::move(stats));
    }
    return analysis;
}

TraceSummaryValues summarise(const RankAnalysis& analysis)
{
    const Breakdown& b = analysis.total;
    return TraceSummaryValues{double(b.computeNs) * 1e-9, double(b.commNs) * 1e-9, double(b.memoryNs) * 1e-9,
                              double(b.idleNs) * 1e-9, b.overlap()};
}

std::vector<StepSkew> findStragglers(const std::vector<RankTrace>& traces)
{
    struct PerRank {
        int rank;
        std::int64_t offset;
        std::map<std::int64_t, StepAnalysis> steps;
    };
    std::vector<PerRank> ranks;
    for (const RankTrace& trace : traces) {
        PerRank r{trace.rank, trace.clockOffsetNs, {}};
        for (StepAnalysis& step : analyseRank(trace).steps)
            r.steps.emplace(step.step, step);
        ranks.push_back(std::move(r));
    }
    std::vector<StepSkew> out;
    if (ranks.empty())
        return out;
    for (const auto& [step, unused] : ranks.front().steps) {
        const bool everywhere = std::all_of(ranks.begin(), ranks.end(),
                                            [step = step](const PerRank& r) { return r.steps.count(step) > 0; });
        if (!everywhere)
            continue;
        StepSkew skew;
        skew.step = step;
        std::int64_t mostCompute = -1;
        for (const PerRank& r : ranks) {
            const StepAnalysis& s = r.steps.at(step);
            skew.ranks.push_back(r.rank);
            skew.startNs.push_back(s.window.startNs + r.offset);
            skew.endNs.push_back(s.window.endNs + r.offset);
            skew.computeNs.push_back(s.breakdown.computeNs);
            if (s.breakdown.computeNs > mostCompute) {
                mostCompute = s.breakdown.computeNs;
                skew.slowestRank = r.rank;
            }
        }
        auto spread = [](const std::vector<std::int64_t>& v) {
            const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
            return *hi - *lo;
        };
        skew.startSkewNs = spread(skew.startNs);
        skew.endSkewNs = spread(skew.endNs);
        skew.computeSkewNs = spread(skew.computeNs);
        out.push_back(std::move(skew));
    }
    return out;
}

} // namespace shardscope::profiler
