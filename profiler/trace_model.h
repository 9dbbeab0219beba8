#pragma once

// The trace model: what one rank did, as spans on lanes, plus counters (memory over time).
// Plain value types with no dependency beyond std, so that the engine (recording), the CUPTI
// collector (device activity), the exporter/importer and the GUI's trace page share one shape.
// Note [Lanes and tracks]: a lane says what kind of work a span is (compute, communication,
// memory, host) and drives the analysis; a track names where it ran (a CUDA stream, "stream 7")
// and drives only the display. Host spans leave the track empty and show on their lane's thread.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope::profiler {

enum class Lane : std::uint8_t {
    Compute, // forward, backward, optimizer; compute kernels
    Communication, // collectives (Gloo on the host, NCCL kernels on the device)
    Memory, // memcpy / memset, host<->device and offload copies
    Host, // everything else the host does: step and phase markers, data loading, I/O, waits
};

inline constexpr Lane kAllLanes[] = {Lane::Compute, Lane::Communication, Lane::Memory, Lane::Host};

// "compute", "communication", "memory", "host": the names used in files and thread names.
std::string_view laneName(Lane lane);
std::optional<Lane> parseLane(std::string_view name);

// Where a trace's spans came from; written into every exported file and the `trace` event.
inline constexpr std::string_view kSourceCupti = "cupti";
inline constexpr std::string_view kSourceHost = "host";

// Categories the engine and the collector use; free-form otherwise (the category is the span's
// kind, written as the trace event's `cat`).
namespace category {
inline constexpr std::string_view kStep = "step"; // one optimizer step, on the host lane
inline constexpr std::string_view kKernel = "kernel"; // a device compute kernel
inline constexpr std::string_view kMemcpy = "memcpy";
inline constexpr std::string_view kMemset = "memset";
// On the host lane: the host blocked waiting for a collective inside a compute phase (a unit
// waiting for its all-gather). Host compute spans include such waits; the analysis takes them
// out of compute, as a device timeline would show no kernel running then.
inline constexpr std::string_view kWait = "wait";
} // namespace category

struct Span {
    std::string name; // "backward", "all_reduce bucket 3", "ncclDevKernel_AllReduce_..."
    std::string category; // kind: "forward", "all_reduce", "kernel", "step", ...
    Lane lane = Lane::Host;
    std::string track; // named stream ("stream 7"); empty = the lane's own thread
    std::int64_t startNs = 0; // ns, on the rank's clock (steady clock for host spans)
    std::int64_t endNs = 0; // ns, >= startNs
    std::int64_t bytes = 0; // bytes moved by a collective or copy; 0 when unknown
    std::int64_t step = -1; // optimizer step the span belongs to; -1 = none
    int device = -1; // CUDA device of a device span; -1 = a host span
    std::uint64_t correlationId = 0; // CUPTI correlation id of a device span; 0 = none

    std::int64_t durationNs() const { return endNs - startNs; }
    bool operator==(const Span&) const = default;
};

// One sample of a counter track: Chrome trace "C" events, one series per name.
struct CounterSample {
    std::string name; // counter track, e.g. "memory"
    std::string series; // series within the track, e.g. "allocated"
    std::int64_t timeNs = 0; // ns, rank clock
    double value = 0; // unit given by the series (bytes for memory)

    bool operator==(const CounterSample&) const = default;
};

struct RankTrace {
    int rank = 0;
    // Ranks in the job when the trace says so (torch.profiler's distributedInfo); 0: not known.
    int worldSize = 0;
    std::string source{kSourceHost}; // "cupti" or "host"
    // ns to add to this rank's timestamps to put them on the run's common clock (the merged file).
    std::int64_t clockOffsetNs = 0;
    std::vector<Span> spans;
    std::vector<CounterSample> counters;
    // Things a reader should know (CUPTI unavailable and why, dropped records, open spans).
    std::vector<std::string> notes;

    bool operator==(const RankTrace&) const = default;
};

// Sorts spans by (start, longest first, lane, track, name, category, ...) and counters by (time,
// name, series): one canonical order, so that traces built in different orders compare equal.
void canonicalise(RankTrace& trace);

} // namespace shardscope::profiler
