#pragma once

// Chrome trace-event JSON (what Perfetto and chrome://tracing open): one file per rank and a
// merged, clock-aligned file for the run; and the importer the GUI's trace page reads them with.
//
// Note [Trace file layout]: {"traceEvents": [...], "displayTimeUnit": "ms",
// "distributedInfo": {"rank": r} (per-rank files, for HTA), "otherData": {"shardscope": {
// "version": 1, "ranks": [{"rank", "source", "clock_offset_ns", "aligned", "notes"}]}}}.
// One process per rank (pid = rank, process_name "rank N", process_sort_index N), one thread per
// lane or track (tid >= 1, thread_name, thread_sort_index); spans are complete "X" events with
// ts/dur in µs (fractional, ns resolution) and args {lane, track, bytes, step, device,
// correlation}; memory and other counters are "C" events (tid 0). Complete events on one thread
// always nest or are disjoint: overlapping spans of a lane (two all-reduces in flight) go to
// extra threads of that lane ("communication #2"), since Perfetto moves overlapping events off
// their track.

#include "engine/common/result.h"
#include "profiler/trace_model.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope::profiler {

inline constexpr int kTraceFormatVersion = 1;

// How the merged file puts ranks on one clock.
struct ClockAlignment {
    enum class Mode {
        Offsets, // each trace's clockOffsetNs, as the caller measured it
        ReferenceEvent, // the first span named `referenceName` happens at the same instant on every rank
    };
    Mode mode = Mode::Offsets;
    std::string referenceName; // e.g. "barrier" recorded around a barrier at the window's start
    bool alignOnEnd = true; // a barrier ends together on all ranks; its start does not
};

// The offset (ns) to add to each trace's timestamps, in the order of `traces`. ReferenceEvent puts
// every rank on the first trace's clock (plus that trace's own clockOffsetNs).
Result<std::vector<std::int64_t>> clockOffsets(const std::vector<RankTrace>& traces, const ClockAlignment& alignment);

// A per-rank file: the rank's own clock, its clockOffsetNs recorded in otherData.
std::string toChromeTraceJson(const RankTrace& trace);
// The merged file: every rank as its own process, timestamps shifted onto the run clock.
Result<std::string> toMergedChromeTraceJson(const std::vector<RankTrace>& traces, const ClockAlignment& alignment);

Result<void> writeRankTrace(const std::filesystem::path& path, const RankTrace& trace);
Result<void> writeMergedTrace(const std::filesystem::path& path, const std::vector<RankTrace>& traces,
                              const ClockAlignment& alignment);

// Reads a trace file back, one RankTrace per rank (ascending). Reads Shardscope's files exactly
// (a per-rank file round-trips to an equal RankTrace) and other Chrome traces as far as their
// complete, counter and metadata events go. Bad input is an error naming the file, the event
// index and the field; phases we don't import (B/E, instant, async, flow) are skipped and
// counted in the traces' notes.
Result<std::vector<RankTrace>> parseChromeTrace(std::string_view json, std::string_view origin = "trace");
Result<std::vector<RankTrace>> readChromeTrace(const std::filesystem::path& path);

} // namespace shardscope::profiler
