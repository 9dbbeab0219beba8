#pragma once

// The seam between CUPTI and the trace model (Note [CUPTI seam]): CUPTI's versioned activity
// structs are converted by one small function (cupti_collector.cpp, built only with CUPTI) into
// this plain struct; everything after it, classification and span building, is plain C++ that
// CPU-only builds compile and test with synthetic records.

#include "profiler/trace_model.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope::profiler {

struct ActivityRecord {
    enum class Kind : std::uint8_t { Kernel, Memcpy, Memset };
    Kind kind = Kind::Kernel;
    std::string name; // demangled kernel name; "Memcpy HtoD", "Memset" for copies
    std::int64_t startNs = 0; // ns, CUPTI's clock (cuptiGetTimestamp); 0/0 = unknown
    std::int64_t endNs = 0; // ns
    int device = 0; // CUDA device id
    std::uint32_t stream = 0; // CUDA stream id
    std::uint32_t correlationId = 0;
    std::int64_t bytes = 0; // bytes of a memcpy / memset; 0 for kernels

    bool operator==(const ActivityRecord&) const = default;
};

// HTA's kernel classification (§7.2-7.3 of the engine ground notes): names starting with "nccl"
// are communication (both ncclDevKernel_* and the older ncclKernel_*), memcpy/memset records or
// names containing "Memcpy"/"Memset" are memory, everything else is compute.
Lane classifyActivity(ActivityRecord::Kind kind, std::string_view name);
// The collective an NCCL kernel runs, as the host spans name it: "all_reduce", "all_gather",
// "reduce_scatter", "broadcast", "reduce", "send_recv"; "nccl" when the name doesn't say.
std::string collectiveKind(std::string_view ncclKernelName);
// Demangles an Itanium C++ name; returns the input when it isn't one.
std::string demangleKernelName(const char* name);

struct DeviceSpansResult {
    std::vector<Span> spans;
    std::size_t skipped = 0; // records with unknown (0/0) or reversed timestamps
};
// Device spans on the host clock: hostNs = deviceNs + deviceToHostOffsetNs. Track "stream N"
// (or "cuda:D stream N" when the records span several devices).
DeviceSpansResult spansFromActivity(const std::vector<ActivityRecord>& records, std::int64_t deviceToHostOffsetNs);

// Adds device activity to a host-span trace: device spans, each stamped with the step whose host
// "step" span contains its start, and marks the trace's source "cupti". Notes skipped records.
void attachDeviceActivity(RankTrace& trace, const std::vector<ActivityRecord>& records, std::int64_t deviceToHostOffsetNs);

} // namespace shardscope::profiler
