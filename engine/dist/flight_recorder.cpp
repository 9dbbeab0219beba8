#include "engine/dist/flight_recorder.h"

#include <cstdlib>

namespace shardscope::dist {

namespace {

double wallNow() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

std::atomic<std::int64_t> g_skippedSeq{-1};

} // namespace

FlightRecorder& FlightRecorder::instance()
{
    // Never destroyed: the works it holds must not be released after their process groups, at exit.
    static auto* recorder = new FlightRecorder;
    return *recorder;
}

FlightRecorder::FlightRecorder() : m_capacity(kDefaultFlightRecorderEntries)
{
    if (const char* entries = std::getenv("SHARDSCOPE_FLIGHT_RECORDER_ENTRIES"); entries && std::atoi(entries) > 0)
        m_capacity = static_cast<std::size_t>(std::atoi(entries));
}

void FlightRecorder::setActivity(std::int64_t stepsDone, const char* phase)
{
    m_steps.store(stepsDone, std::memory_order_relaxed);
    m_phase.store(phase, std::memory_order_relaxed);
}

void FlightRecorder::issued(const Issue& issue, const c10::intrusive_ptr<c10d::Work>& work)
{
    if (!enabled())
        return;
    Entry e;
    e.record.group = *issue.group;
    e.record.seq = issue.seq;
    e.record.kind = issue.kind;
    e.record.bytes = issue.bytes;
    e.record.dtype = issue.dtype;
    e.record.step = stepsDone();
    e.record.phase = phase();
    e.record.issuedAt = wallNow();
    e.issuedAt = std::chrono::steady_clock::now();
    e.work = work;
    std::lock_guard lock(m_mutex);
    m_issued[e.record.group] = issue.seq;
    if (m_entries.size() >= m_capacity)
        m_entries.pop_front();
    m_entries.push_back(std::move(e));
}

void FlightRecorder::completed(const c10d::Work* work)
{
    const double now = wallNow();
    std::lock_guard lock(m_mutex);
    for (auto it = m_entries.rbegin(); it != m_entries.rend(); ++it)
        if (it->work.get() == work) {
            it->record.completedAt = now;
            it->work.reset();
            return;
        }
}

void FlightRecorder::pollCompletions()
{
    double now = 0;
    for (auto& e : m_entries)
        if (e.work && e.work->isCompleted()) {
            e.record.completedAt = now > 0 ? now : (now = wallNow());
            e.work.reset();
        }
}

std::optional<FlightRecorder::Pending> FlightRecorder::oldestPending()
{
    std::lock_guard lock(m_mutex);
    pollCompletions();
    for (const auto& e : m_entries)
        if (!e.record.completedAt)
            return Pending{e.record.kind, e.record.group, e.record.seq,
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - e.issuedAt).count()};
    return std::nullopt;
}

protocol::FlightRecord FlightRecorder::snapshot(int rank, std::int64_t request)
{
    protocol::FlightRecord r;
    r.rank = rank;
    r.request = request;
    r.step = stepsDone();
    r.phase = phase();
    std::lock_guard lock(m_mutex);
    pollCompletions();
    r.time = wallNow();
    r.issued = m_issued;
    for (const auto& e : m_entries)
        r.collectives.push_back(e.record);
    return r;
}

void injectSkippedCollective(std::int64_t seq) { g_skippedSeq.store(seq, std::memory_order_relaxed); }

bool isSkippedCollective(const std::string& group, std::int64_t seq)
{
    return seq == g_skippedSeq.load(std::memory_order_relaxed) && group == "default_pg";
}

} // namespace shardscope::dist
