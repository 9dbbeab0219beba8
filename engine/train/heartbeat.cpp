#include "engine/train/heartbeat.h"

#include "engine/dist/collective_tracker.h"

#include <atomic>
#include <cstdlib>

namespace shardscope::train {

namespace {
std::atomic<std::int64_t> g_steps{0};
std::atomic<int> g_phase{static_cast<int>(Phase::Setup)};
} // namespace

const char* phaseName(Phase phase)
{
    switch (phase) {
    case Phase::Setup:
        return "setup";
    case Phase::Train:
        return "train";
    case Phase::Eval:
        return "eval";
    case Phase::Checkpoint:
        return "checkpoint";
    case Phase::Finish:
        return "finish";
    }
    return "?";
}

void setProgress(std::int64_t stepsDone, Phase phase)
{
    g_steps.store(stepsDone, std::memory_order_relaxed);
    g_phase.store(static_cast<int>(phase), std::memory_order_relaxed);
}

Heartbeat::Heartbeat(EventSink& sink, std::chrono::milliseconds fallback) : m_sink(sink), m_interval(fallback)
{
    if (const char* ms = std::getenv(kHeartbeatMsVariable); ms && std::atoi(ms) > 0)
        m_interval = std::chrono::milliseconds(std::atoi(ms));
    m_thread = std::thread([this] { run(); });
}

Heartbeat::~Heartbeat()
{
    {
        std::lock_guard lock(m_mutex);
        m_stop = true;
    }
    m_wake.notify_all();
    m_thread.join();
}

void Heartbeat::run()
{
    std::unique_lock lock(m_mutex);
    while (!m_wake.wait_for(lock, m_interval, [this] { return m_stop; })) {
        protocol::HeartbeatEvent beat;
        beat.step = g_steps.load(std::memory_order_relaxed);
        beat.phase = phaseName(static_cast<Phase>(g_phase.load(std::memory_order_relaxed)));
        if (auto pending = dist::CollectiveTracker::instance().oldestPending()) {
            beat.waitingFor = pending->kind;
            beat.waitingSeq = pending->seq;
            beat.waitingSeconds = pending->seconds;
        }
        m_sink.emit(std::move(beat));
    }
}

} // namespace shardscope::train
