#pragma once

// The profiling window of a run (--profile): host spans of each phase and of every collective
// (Gloo has no device timeline); on CUDA ranks the CUPTI collector adds the device's kernels,
// memcpys and memsets (NCCL's kernels among them) while the window is open. When CUPTI cannot
// start (another subscriber, no CUPTI in this build) the run goes on with host spans and says so.
// At the window's end the rank's trace is written to the run's traces folder and announced.

#include "engine/common/run_layout.h"
#include "profiler/span_recorder.h"

#include <cstdint>
#include <memory>

namespace shardscope::config {
struct RunPlan;
}
namespace shardscope::profiler {
class CuptiCollector;
}

namespace shardscope::train {

class Accelerator;
class EventSink;

class ProfilingWindow {
public:
    // Hands the recorder to the accelerator's collectives when the plan profiles.
    ProfilingWindow(const config::RunPlan& plan, Accelerator& acc, EventSink& events);
    ~ProfilingWindow();
    ProfilingWindow(const ProfilingWindow&) = delete;
    ProfilingWindow& operator=(const ProfilingWindow&) = delete;

    // The phases' spans go here (a disabled recorder's scopes cost nothing).
    profiler::SpanRecorder& recorder() { return m_recorder; }
    // Before step `step` (1-based) runs: opens the window (and the device trace) when it begins.
    void stepBegins(std::int64_t step);
    // After the step's optimizer: writes the trace when the window closed as this step began.
    void stepEnded();
    // At the end of the run: writes the trace of a window still open.
    void runEnded();

private:
    void startDeviceTrace();
    void writeTrace();

    Accelerator& m_acc;
    EventSink& m_events;
    RunLayout m_layout;
    profiler::SpanRecorder m_recorder;
    bool m_profiling = false;
    bool m_recordingBefore = false; // whether the recorder was on before the current step began
    std::unique_ptr<profiler::CuptiCollector> m_cupti;
};

} // namespace shardscope::train
