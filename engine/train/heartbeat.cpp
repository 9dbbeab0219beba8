#include "engine/train/heartbeat.h"

#include "engine/dist/flight_recorder.h"

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

namespace shardscope::train {

const char* phaseName(Phase phase)
{
    switch (phase) {
    case Phase::Setup:
        return "setup";
    case Phase::Train:
        return "train";
    case Phase::Data:
        return "data";
    case Phase::Forward:
        return "forward";
    case Phase::Backward:
        return "backward";
    case Phase::Optimizer:
        return "optimizer";
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
    dist::FlightRecorder::instance().setActivity(stepsDone, phaseName(phase));
}

Heartbeat::Heartbeat(EventSink& sink, int rank, std::filesystem::path flightDir, std::chrono::milliseconds fallback)
    : m_sink(sink), m_rank(rank), m_flightDir(std::move(flightDir)), m_interval(fallback)
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

void Heartbeat::answerFlightRequest()
{
    std::ifstream in(protocol::flightRequestFile(m_flightDir));
    std::int64_t request = 0;
    if (!(in >> request) || request <= m_answered)
        return;
    m_answered = request;
    const auto record = dist::FlightRecorder::instance().snapshot(m_rank, request);
    // Written whole, then renamed: a reader never sees half a record.
    const auto path = protocol::flightRecordFile(m_flightDir, m_rank);
    auto partial = path;
    partial += ".partial";
    {
        std::ofstream out(partial, std::ios::trunc);
        out << protocol::flightRecordJson(record);
        if (!out)
            return;
    }
    std::error_code ignored;
    std::filesystem::rename(partial, path, ignored);
}

void Heartbeat::run()
{
    auto& recorder = dist::FlightRecorder::instance();
    std::unique_lock lock(m_mutex);
    while (!m_wake.wait_for(lock, m_interval, [this] { return m_stop; })) {
        // Before the beat: a full events pipe must not keep the answer from a launcher that waits for it.
        if (!m_flightDir.empty())
            answerFlightRequest();
        protocol::HeartbeatEvent beat;
        beat.step = recorder.stepsDone();
        beat.phase = recorder.phase();
        timespec cpu{};
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
        beat.cpuSeconds = static_cast<double>(cpu.tv_sec) + static_cast<double>(cpu.tv_nsec) * 1e-9;
        if (auto pending = recorder.oldestPending()) {
            beat.waitingFor = pending->kind;
            beat.waitingGroup = pending->group;
            beat.waitingSeq = pending->seq;
            beat.waitingSeconds = pending->seconds;
        }
        m_sink.emit(std::move(beat));
    }
}

} // namespace shardscope::train
