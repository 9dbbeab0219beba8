#pragma once

// Trace analysis with Holistic Trace Analysis' definitions, so that numbers agree with HTA on the
// same kernels (../shared/refs/libtorch-engine-ground.md §7.3; docs/PROFILING.md, "Definitions").
//
// Note [Analysed spans]: a trace with device spans (CUPTI) is analysed on its device spans only,
// as HTA analyses GPU kernels only; a host-only trace is analysed on its compute, communication
// and memory lanes. Host-lane spans (step and phase markers, data loading, I/O) are never work:
// they only delimit steps, except waits (category "wait": the host blocked on a collective inside
// a compute phase), which are taken out of compute.
//
// Note [Breakdown]: per rank and per step, over a span of time S (first start to last end of the
// analysed spans, or the step's window):
//   compute = |union of compute \ union of waits|          (HTA's computation time)
//   comm    = |union of comm \ compute|                   (communication not hidden by compute)
//   memory  = |union of memory \ (compute ∪ comm)|
//   idle    = S - |union of everything|                   (HTA's idle time)
// so compute + comm + memory + idle = S exactly; HTA's "non-compute" is comm + memory.
// Overlap = |union comm ∩ union compute| / |union comm| (HTA's comp_comm_overlap, as a fraction);
// 0 when there is no communication (HTA would divide by zero).

#include "profiler/trace_model.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardscope::profiler {

struct Interval {
    std::int64_t startNs = 0; // ns
    std::int64_t endNs = 0; // ns
    bool operator==(const Interval&) const = default;
};

// Sorted, disjoint union (touching intervals are joined; empty ones dropped).
std::vector<Interval> mergeIntervals(std::vector<Interval> intervals);
// The following take merged lists.
std::int64_t totalLength(const std::vector<Interval>& merged);
std::vector<Interval> intersectIntervals(const std::vector<Interval>& a, const std::vector<Interval>& b);
std::vector<Interval> subtractIntervals(const std::vector<Interval>& a, const std::vector<Interval>& b);
std::vector<Interval> clipIntervals(const std::vector<Interval>& merged, Interval window);

struct Breakdown {
    std::int64_t spanNs = 0; // ns, the time analysed
    std::int64_t computeNs = 0; // ns, see Note [Breakdown]
    std::int64_t commNs = 0; // ns, exposed communication
    std::int64_t memoryNs = 0; // ns, exposed memory
    std::int64_t idleNs = 0; // ns
    std::int64_t commTotalNs = 0; // ns, union of communication (overlap's denominator)
    std::int64_t overlapNs = 0; // ns, communication and compute both active

    double overlap() const { return commTotalNs > 0 ? double(overlapNs) / double(commTotalNs) : 0.0; }
    double share(std::int64_t partNs) const { return spanNs > 0 ? double(partNs) / double(spanNs) : 0.0; }
};

// Breakdown of `spans` (all taken as work, by lane; host-lane spans ignored but waits, which are
// subtracted from compute) over `window`, or over
// first start .. last end when no window is given.
Breakdown computeBreakdown(const std::vector<Span>& spans, std::optional<Interval> window = std::nullopt);

struct StepAnalysis {
    std::int64_t step = 0;
    Interval window; // ns, the step's extent on the rank's clock
    Breakdown breakdown;
};

struct CollectiveStats {
    std::string kind; // the span's category: "all_reduce", "reduce_scatter", ...
    std::int64_t count = 0;
    std::int64_t bytes = 0; // bytes, summed
    std::int64_t timeNs = 0; // ns, summed durations (issue to completion for host spans)
    // This kind's share of the overlap: |union of its spans ∩ compute| / |union of its spans| (the
    // whole-trace overlap, for this kind alone: a run's all-gathers may hide while its
    // reduce-scatters do not).
    double overlap = 0.0;
    // bytes per second over the summed time (algorithm bandwidth; 0 when bytes or time unknown).
    double bandwidth() const { return timeNs > 0 ? double(bytes) * 1e9 / double(timeNs) : 0.0; }
};

struct RankAnalysis {
    int rank = 0;
    std::string source;
    bool deviceSpans = false; // analysed on device spans (Note [Analysed spans])
    Breakdown total; // whole trace, HTA's span (first start .. last end)
    std::vector<StepAnalysis> steps; // ascending step
    std::vector<CollectiveStats> collectives; // by kind, ascending
};

// The spans Note [Analysed spans] selects.
std::vector<Span> analysedSpans(const RankTrace& trace);
// Step windows: the host lane's "step" spans when there are any, else each step's extent
// (first start .. last end of the analysed spans carrying that step).
std::vector<std::pair<std::int64_t, Interval>> stepWindows(const RankTrace& trace);
RankAnalysis analyseRank(const RankTrace& trace);

// The `trace` event's summary: seconds and the overlap fraction, of the whole trace.
struct TraceSummaryValues {
    double compute = 0; // s
    double comm = 0; // s, exposed communication (Note [Breakdown])
    double memory = 0; // s
    double idle = 0; // s
    double overlap = 0; // [0, 1]
};
TraceSummaryValues summarise(const RankAnalysis& analysis);
inline TraceSummaryValues summarise(const RankTrace& trace) { return summarise(analyseRank(trace)); }

// Stragglers: per step present on every rank, how far apart the ranks are on the run clock
// (each rank's clockOffsetNs applied) and who computed longest.
struct StepSkew {
    std::int64_t step = 0;
    std::vector<int> ranks; // rank of each column below
    std::vector<std::int64_t> startNs; // ns, run clock
    std::vector<std::int64_t> endNs; // ns, run clock
    std::vector<std::int64_t> computeNs; // ns, compute in the step
    std::int64_t startSkewNs = 0; // ns, latest start - earliest start
    std::int64_t endSkewNs = 0; // ns, latest end - earliest end
    std::int64_t computeSkewNs = 0; // ns, most compute - least compute
    int slowestRank = -1; // the rank with the most compute (the others wait for it)
};
std::vector<StepSkew> findStragglers(const std::vector<RankTrace>& traces);

} // namespace shardscope::profiler
