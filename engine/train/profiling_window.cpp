#include "engine/train/profiling_window.h"

#include "engine/plan/run_plan.h"
#include "engine/train/accelerator.h"
#include "engine/train/event_sink.h"
#include "profiler/analysis.h"
#include "profiler/chrome_trace.h"
#include "profiler/cupti/cupti_collector.h"

#include <torch/cuda.h>

#include <filesystem>

namespace shardscope::train {

ProfilingWindow::ProfilingWindow(const config::RunPlan& plan, Accelerator& acc, EventSink& events)
    : m_acc(acc), m_events(events), m_layout(plan.runDir), m_recorder(acc.processIndex())
{
    m_profiling = plan.profileStartStep >= 0 && plan.profileSteps > 0 && !plan.runDir.empty();
    if (!m_profiling)
        return;
    m_recorder.setWindow(plan.profileStartStep, plan.profileSteps);
    acc.setRecorder(&m_recorder);
}

ProfilingWindow::~ProfilingWindow() = default;

void ProfilingWindow::stepBegins(std::int64_t step)
{
    m_recordingBefore = m_recorder.enabled();
    m_recorder.stepBegan(step);
    if (!m_recordingBefore && m_recorder.enabled())
        startDeviceTrace(); // the window opened with this step
}

void ProfilingWindow::stepEnded()
{
    if (m_recordingBefore && !m_recorder.enabled() && m_profiling)
        writeTrace(); // the window closed with this step
}

void ProfilingWindow::runEnded()
{
    if (!m_profiling || !m_recorder.enabled())
        return;
    m_recorder.setEnabled(false);
    writeTrace(); // the run ended inside the window
}

void ProfilingWindow::startDeviceTrace()
{
    if (!m_acc.device().is_cuda())
        return;
    auto started = profiler::CuptiCollector::start();
    if (!started) {
        m_events.emit(protocol::LogEvent{"warning", "CUPTI trace not started (host spans only): " + started.error().message});
        return;
    }
    m_cupti = std::move(*started);
}

void ProfilingWindow::writeTrace()
{
    auto trace = m_recorder.take();
    if (m_cupti) {
        torch::cuda::synchronize(); // the window's kernels have finished and are in CUPTI's buffers
        if (auto records = m_cupti->stop(); records)
            profiler::attachDeviceActivity(trace, *records, m_cupti->deviceToHostOffsetNs());
        else
            m_events.emit(protocol::LogEvent{"warning", "CUPTI trace lost (host spans only): " + records.error().message});
        m_cupti.reset();
    }
    const std::string path = m_layout.rankTrace(m_acc.processIndex()).string();
    std::error_code ec;
    std::filesystem::create_directories(m_layout.tracesDir(), ec);
    if (auto written = profiler::writeRankTrace(path, trace); !written) {
        m_events.emit(protocol::LogEvent{"warning", "trace not written: " + written.error().message});
        return;
    }
    const auto s = profiler::summarise(trace);
    m_events.emit(protocol::TraceEvent{
        path, trace.source.empty() ? "host" : trace.source, {s.compute, s.comm, s.memory, s.idle, s.overlap}});
}

} // namespace shardscope::train
