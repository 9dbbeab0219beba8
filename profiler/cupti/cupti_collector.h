#pragma once

// CuptiCollector: kernels, memcpy and memset of every device and stream, through CUPTI's activity
// API, while the profiling window is open. Built for real only where CUPTI is found
// (SHARDSCOPE_HAVE_CUPTI); elsewhere start() returns an error and the engine records host spans
// only (Tracy's "compiles to nothing" without ifdefs at the call site).
//
// Note [One CUPTI subscriber]: before CUPTI 13.3 with driver r610+ a process has one CUPTI
// subscriber and one set of activity buffer callbacks. libtorch's Kineto takes them when the torch
// profiler runs (or at import with KINETO_USE_DAEMON=1), and so do Nsight tools. start() first
// subscribes; CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED or any other failure comes back as
// an error value saying who probably owns CUPTI, nothing is left registered, and the caller falls
// back to host spans (the trace's source says "host"). Never start the torch profiler in a rank
// that uses this collector.
//
// Usage (worker, when the window opens / closes):
//   auto collector = CuptiCollector::start();
//   if (!collector) { log(collector.error().message); /* host spans only */ }
//   ...
//   auto records = (*collector)->stop();
//   if (records) attachDeviceActivity(trace, *records, (*collector)->deviceToHostOffsetNs());

#include "engine/common/result.h"
#include "profiler/cupti/activity_record.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace shardscope::profiler {

struct CuptiOptions {
    std::size_t bufferBytes = 8u << 20; // bytes per activity buffer handed to CUPTI
};

class CuptiCollector {
public:
    // Whether this build contains the CUPTI collector at all.
    static bool compiledIn();
    // Subscribes, registers the buffer callbacks and enables kernel/memcpy/memset activity.
    static Result<std::unique_ptr<CuptiCollector>> start(const CuptiOptions& options = {});

    ~CuptiCollector();
    CuptiCollector(const CuptiCollector&) = delete;
    CuptiCollector& operator=(const CuptiCollector&) = delete;

    // Flushes, disables the activity kinds and unsubscribes; returns every record collected.
    // Further calls return an error.
    Result<std::vector<ActivityRecord>> stop();

    // ns to add to a CUPTI timestamp to get steady-clock ns (sampled at start()).
    std::int64_t deviceToHostOffsetNs() const { return m_offsetNs; }
    // Records CUPTI reported as dropped (buffers too small or too few).
    std::uint64_t droppedRecords() const;

private:
    CuptiCollector() = default;
    std::int64_t m_offsetNs = 0;
    bool m_running = false;
};

} // namespace shardscope::profiler
