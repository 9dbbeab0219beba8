#include "app/launcher/run_monitor.h"
#include "engine/common/wall_clock.h"

#include "app/launcher/hang_report.h"

#include "engine/common/text_format.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <thread>

namespace shardscope {

namespace {

std::string humanRate(double perSecond)
{
    char text[32];
    if (perSecond >= 1e6)
        std::snprintf(text, sizeof text, "%.2fM", perSecond / 1e6);
    else if (perSecond >= 1e3)
        std::snprintf(text, sizeof text, "%.1fk", perSecond / 1e3);
    else
        std::snprintf(text, sizeof text, "%.0f", perSecond);
    return text;
}

std::string clock(double seconds)
{
    const auto s = static_cast<long>(std::lround(std::max(0.0, seconds)));
    char text[32];
    if (s >= 3600)
        std::snprintf(text, sizeof text, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
    else
        std::snprintf(text, sizeof text, "%ld:%02ld", s / 60, s % 60);
    return text;
}

} // namespace

RunMonitor::RunMonitor(const std::string& eventsFile, std::int64_t totalSteps, std::FILE* progress, bool interactive)
    : m_totalSteps(totalSteps), m_progress(progress), m_interactive(interactive), m_start(std::chrono::steady_clock::now()),
      m_lastPrint(m_start)
{
    if (!eventsFile.empty()) {
        m_eventsPath = eventsFile;
        m_eventsFd = ::open(eventsFile.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (m_eventsFd < 0)
            noteWriteFailure(errno);
    }
}

RunMonitor::~RunMonitor()
{
    if (m_eventsFd >= 0)
        ::close(m_eventsFd);
}

void RunMonitor::onEventLine(int rank, std::string_view line)
{
    auto event = protocol::decodeEvent(line);
    if (!event) {
        ++m_malformed;
        // The line is the rank's (a user's script's): shown escaped, never obeyed by the terminal.
        std::fprintf(stderr, "%sshardscope launch: rank %d sent a malformed event line (%s); skipped: %.120s\n",
                     m_interactive ? "\n" : "", rank, terminalSafe(event.error().message).c_str(),
                     terminalSafe(std::string(line.substr(0, 120))).c_str());
        return;
    }
    m_heard.insert(event->rank);
    if (const auto* beat = std::get_if<protocol::HeartbeatEvent>(&event->body)) {
        // Liveness only: kept for the hang check, neither written to events.jsonl nor stored.
        const auto now = std::chrono::steady_clock::now();
        m_beats[event->rank] = Beat{*beat, now};
        auto& history = m_cpuHistory[event->rank];
        history.emplace_back(now, beat->cpuSeconds);
        if (history.size() > 512) // at the slowest beat (2 s), 17 minutes: more than any timeout looks back
            history.pop_front();
        return;
    }
    if (const auto* hello = std::get_if<protocol::HelloEvent>(&event->body))
        m_pids[event->rank] = hello->pid;
    if (const auto* done = std::get_if<protocol::DoneEvent>(&event->body)) {
        m_done[event->rank] = {done->status, event->time};
    }
    if (const auto* step = std::get_if<protocol::StepEvent>(&event->body)) {
        m_lastSteps[event->rank] = step->step;
        auto& clock = m_stepClocks[event->rank];
        clock.lastStepAt = std::chrono::steady_clock::now();
        clock.recentStepTimes.push_back(step->stepTime);
        if (clock.recentStepTimes.size() > 20)
            clock.recentStepTimes.pop_front();
    }
    if (const auto* saved = std::get_if<protocol::CheckpointEvent>(&event->body); saved && saved->kind == "state")
        m_lastCheckpoint = saved->path;
    if (const auto* error = std::get_if<protocol::ErrorEvent>(&event->body)) {
        m_reported.push_back({event->rank, event->time, error->kind});
        m_reportedMessages.push_back(error->message);
    }
    if (!m_eventsPath.empty()) {
        // Buffered: written by tick() (every ~50 ms) and at the end, not per line — the launcher
        // shares the cores with the ranks, and a syscall per event shows in small models' speed.
        // What cannot be written (a full disk) stays here and is written when space returns.
        if (m_unwritten.size() + line.size() + 1 > kMaxUnwrittenBytes) {
            ++m_droppedLines; // beyond the backlog's bound: lost from the file (the history has them)
        } else {
            m_unwritten.append(line.data(), line.size());
            m_unwritten.push_back('\n');
        }
    }
    if (event->rank == 0) {
        if (const auto* step = std::get_if<protocol::StepEvent>(&event->body)) {
            m_lastStep = *step;
            if (!std::isfinite(step->loss) && !step->skipped) {
                if (m_nonfiniteSteps++ == 0) {
                    m_nonfiniteFrom = step->step;
                    m_nonfiniteLoss = step->loss;
                }
            } else if (!step->skipped) {
                m_nonfiniteSteps = 0;
                m_nonfiniteNote.clear();
            }
        }
    }
    // The first word of it since the last finite step: where the values began.
    if (const auto* log = std::get_if<protocol::LogEvent>(&event->body);
        log && m_nonfiniteNote.empty() && log->message.find("non-finite") != std::string::npos)
        m_nonfiniteNote = log->message;
    if (const auto* error = std::get_if<protocol::ErrorEvent>(&event->body))
        m_errors.push_back("rank " + std::to_string(event->rank) + ": " + error->kind + ": " + error->message);
    if (onEvent)
        onEvent(*event);
    if (const auto* step = std::get_if<protocol::StepEvent>(&event->body)) {
        if (m_stragglers)
            for (const auto& flag : m_stragglers->addStep(event->rank, *step, event->time))
                reportStraggler(flag);
        if (m_lossSpikes && event->rank == 0)
            if (auto spike = m_lossSpikes->addStep(*step, event->time))
                reportLossSpike(*spike);
    }
}

void RunMonitor::reportLossSpike(const protocol::Event& spike)
{
    const auto& s = std::get<protocol::LossSpikeEvent>(spike.body);
    std::fprintf(stderr,
                 "%sshardscope launch: warning: loss spike at step %lld: %.4g, %.2f x the median of the %d steps "
                 "before (its data: epoch %lld, batch %lld of rank 0)\n",
                 m_interactive ? "\n" : "", static_cast<long long>(s.step), s.loss, s.loss / s.median, s.window,
                 static_cast<long long>(s.epoch), static_cast<long long>(s.batch));
    reportFinding(spike);
}

void RunMonitor::detectLossSpikes(LossSpikeOptions options) { m_lossSpikes.emplace(options); }

void RunMonitor::reportFinding(const protocol::Event& finding)
{
    if (!m_eventsPath.empty()) {
        m_unwritten += protocol::encodeEvent(finding);
        m_unwritten.push_back('\n');
    }
    if (onEvent)
        onEvent(finding);
}

void RunMonitor::detectStragglers(int ranks, StragglerOptions options) { m_stragglers.emplace(ranks, options); }

void RunMonitor::reportStraggler(const protocol::Event& flag)
{
    const auto& s = std::get<protocol::StragglerEvent>(flag.body);
    std::fprintf(stderr,
                 "%sshardscope launch: warning: rank %d is a straggler: its compute time (forward and backward "
                 "without waits) is %.3g s, %.2f x the other ranks' %.3g s (medians of the %d steps up to step %lld)\n",
                 m_interactive ? "\n" : "", flag.rank, s.computeTime, s.othersTime > 0 ? s.computeTime / s.othersTime : 0.0,
                 s.othersTime, s.window, static_cast<long long>(s.step));
    reportFinding(flag);
}

std::optional<std::string> RunMonitor::divergence(int steps) const
{
    if (steps <= 0 || m_nonfiniteSteps < steps)
        return std::nullopt;
    // Said as of the step the limit was reached: a fast run has taken more steps by the time it
    // is stopped, and the reason must read the same whenever it is asked.
    char text[200];
    std::snprintf(
        text, sizeof text,
        "the run diverged: its loss is %s from step %lld on (%d step%s in a row by step %lld; --max_nonfinite_steps %d)",
        std::isnan(m_nonfiniteLoss) ? "NaN" : "infinite", static_cast<long long>(m_nonfiniteFrom), steps, steps == 1 ? "" : "s",
        static_cast<long long>(m_nonfiniteFrom + steps - 1), steps);
    std::string reason = text;
    if (!m_nonfiniteNote.empty())
        reason += "; a rank said: " + m_nonfiniteNote;
    return reason + ". Lower the learning rate or clip the gradients (max_grad_norm)";
}

std::optional<std::int64_t> RunMonitor::pidOf(int rank) const
{
    const auto found = m_pids.find(rank);
    return found == m_pids.end() ? std::nullopt : std::optional<std::int64_t>(found->second);
}

std::optional<double> RunMonitor::doneAt(int rank) const
{
    const auto found = m_done.find(rank);
    return found == m_done.end() ? std::nullopt : std::optional<double>(found->second.time);
}

std::string RunMonitor::doneStatusOf(int rank) const
{
    const auto found = m_done.find(rank);
    return found == m_done.end() ? std::string() : found->second.status;
}

bool RunMonitor::isEnding(int rank) const
{
    return m_done.count(rank) > 0
           || std::any_of(m_reported.begin(), m_reported.end(), [&](const ReportedError& e) { return e.rank == rank; });
}

std::set<int> RunMonitor::ranksDone(const std::string& wanted) const
{
    std::set<int> out;
    for (const auto& [rank, done] : m_done)
        if (done.status == wanted)
            out.insert(rank);
    return out;
}

std::int64_t RunMonitor::lastStepOf(int rank) const
{
    auto it = m_lastSteps.find(rank);
    return it == m_lastSteps.end() ? 0 : it->second;
}

std::optional<double> RunMonitor::cpuUse(int rank, std::chrono::duration<double> window) const
{
    auto it = m_cpuHistory.find(rank);
    if (it == m_cpuHistory.end() || it->second.size() < 2)
        return std::nullopt;
    const auto& history = it->second;
    const auto& newest = history.back();
    // No CPU time reported (the Python reporter's heartbeats carry none): unknown, never idle.
    if (newest.second <= 0)
        return std::nullopt;
    // The oldest beat inside the window; the window must be mostly covered.
    auto oldest = history.end() - 2;
    while (oldest != history.begin() && newest.first - (oldest - 1)->first <= window)
        --oldest;
    const std::chrono::duration<double> span = newest.first - oldest->first;
    if (span < window / 2 || span.count() <= 0)
        return std::nullopt;
    return (newest.second - oldest->second) / span.count();
}

std::optional<double> RunMonitor::stuckInStep(int rank, double limit) const
{
    const auto it = m_stepClocks.find(rank);
    if (it == m_stepClocks.end() || it->second.recentStepTimes.empty())
        return std::nullopt; // no step yet: setup and the first step may take any time
    std::vector<double> times(it->second.recentStepTimes.begin(), it->second.recentStepTimes.end());
    std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2), times.end());
    const double usual = times[times.size() / 2];
    const double inStep = std::chrono::duration<double>(std::chrono::steady_clock::now() - it->second.lastStepAt).count();
    if (inStep < std::max(limit, 3 * usual))
        return std::nullopt;
    return inStep;
}

std::optional<std::pair<int, std::string>> RunMonitor::stuckRank(std::chrono::milliseconds timeout) const
{
    const auto now = std::chrono::steady_clock::now();
    const double limit = static_cast<double>(timeout.count()) / 1000.0;
    if (m_beats.empty())
        return std::nullopt;
    // A hang: a rank has waited in a collective for longer than the timeout, and either every
    // rank waits (a deadlock: the rank on the earliest collective is behind) or a rank waits in
    // none and is idle (it never entered the collective the others wait in: a rank that skipped
    // it, or is blocked elsewhere). A rank that computes, however slowly, uses its cores and is not
    // blamed, nor is one that evaluates, checkpoints or finishes (work the others may wait for);
    // a rank whose heartbeats stopped is the silence check's.
    constexpr double kIdleCores = 0.25;
    const Beat* behind = nullptr;
    int behindRank = -1;
    int absentRank = -1;
    double absentCores = 0;
    std::optional<double> absentBusyFor; // set when the absent rank is busy, not idle
    int longestRank = -1;
    double longest = 0;
    double shortest = 0;
    for (const auto& [rank, beat] : m_beats) {
        const double since = std::chrono::duration<double>(now - beat.at).count();
        if (since > limit / 2)
            return std::nullopt;
        if (beat.event.waitingFor.empty()) {
            const std::string& phase = beat.event.phase;
            const auto cores = cpuUse(rank, std::chrono::duration<double>(limit));
            if (phase == "eval" || phase == "checkpoint" || phase == "finish" || !cores)
                return std::nullopt;
            std::optional<double> busyFor;
            if (*cores >= kIdleCores) {
                busyFor = stuckInStep(rank, limit);
                if (!busyFor)
                    return std::nullopt; // computing a step of its usual length: work
            }
            if (absentRank < 0) {
                absentRank = rank;
                absentCores = *cores;
                absentBusyFor = busyFor;
            }
            continue;
        }
        const double waited = beat.event.waitingSeconds + since;
        if (waited > longest) {
            longest = waited;
            longestRank = rank;
        }
        shortest = behind ? std::min(shortest, waited) : waited;
        if (!behind || beat.event.waitingSeq < behind->event.waitingSeq) {
            behind = &beat;
            behindRank = rank;
        }
    }
    char text[512];
    if (absentRank >= 0) {
        if (longestRank < 0 || longest < limit)
            return std::nullopt;
        const auto& waiter = m_beats.at(longestRank).event;
        const auto& absent = m_beats.at(absentRank).event;
        if (absentBusyFor) {
            std::snprintf(text, sizeof text,
                          "rank %d has waited %.1f s in %s #%lld of %s, and this rank is in no collective but busy (%.2f "
                          "cores), %.1f s into step %lld, far past its usual step time: a loop that never reaches that "
                          "collective (if it is work, raise --heartbeat_timeout)",
                          longestRank, longest, waiter.waitingFor.c_str(), static_cast<long long>(waiter.waitingSeq),
                          waiter.waitingGroup.c_str(), absentCores, *absentBusyFor, static_cast<long long>(absent.step + 1));
            return std::pair{absentRank, std::string(text)};
        }
        std::snprintf(text, sizeof text,
                      "rank %d has waited %.1f s in %s #%lld of %s, and this rank is in no collective and idle (%.2f "
                      "cores over the last %.1f s): it never entered that one (it is in %s)",
                      longestRank, longest, waiter.waitingFor.c_str(), static_cast<long long>(waiter.waitingSeq),
                      waiter.waitingGroup.c_str(), absentCores, limit, rankPosition(absent.step, absent.phase).c_str());
        return std::pair{absentRank, std::string(text)};
    }
    if (shortest < limit)
        return std::nullopt;
    // The rank on the earliest collective is behind the others (they wait in later ones).
    std::snprintf(text, sizeof text,
                  "every rank has waited %.1f s or more in a collective; this rank waits in %s #%lld of %s, "
                  "the earliest (it was in %s)",
                  shortest, behind->event.waitingFor.c_str(), static_cast<long long>(behind->event.waitingSeq),
                  behind->event.waitingGroup.c_str(), rankPosition(behind->event.step, behind->event.phase).c_str());
    return std::pair{behindRank, std::string(text)};
}

std::string RunMonitor::progressLine() const
{
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
    char text[256];
    if (!m_lastStep) {
        std::snprintf(text, sizeof text, "starting… %s", clock(elapsed).c_str());
        return text;
    }
    const auto& s = *m_lastStep;
    if (m_totalSteps <= 0) { // a script run: its step count is its own
        std::snprintf(text, sizeof text, "step %lld | loss %.4f | %s tok/s | elapsed %s", static_cast<long long>(s.step), s.loss,
                      s.hasTokens ? humanRate(s.tokensPerS).c_str() : "?", clock(elapsed).c_str());
        return text;
    }
    const double eta = s.step > 0 ? elapsed / static_cast<double>(s.step) * static_cast<double>(m_totalSteps - s.step) : 0;
    std::snprintf(text, sizeof text, "step %lld/%lld | loss %.4f | %s tok/s | elapsed %s | ETA %s",
                  static_cast<long long>(s.step), static_cast<long long>(m_totalSteps), s.loss, humanRate(s.tokensPerS).c_str(),
                  clock(elapsed).c_str(), clock(eta).c_str());
    return text;
}

void RunMonitor::noteWriteFailure(int error)
{
    if (!m_writeFailingSince) {
        m_writeFailingSince = std::chrono::steady_clock::now();
        std::fprintf(stderr,
                     "%sshardscope launch: warning: cannot write %s (%s); the events are kept in memory and "
                     "written when it works again\n",
                     m_interactive ? "\n" : "", m_eventsPath.c_str(), std::strerror(error));
        if (onEvent)
            onEvent(protocol::Event{
                protocol::kProtocolVersion, 0, unixSeconds(),
                protocol::LogEvent{"warning", "the launcher cannot write " + m_eventsPath + ": " + std::strerror(error)}});
    }
    m_lastWriteError = error;
}

void RunMonitor::writeEvents()
{
    if (m_eventsPath.empty() || m_unwritten.empty())
        return;
    if (m_eventsFd < 0) {
        m_eventsFd = ::open(m_eventsPath.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (m_eventsFd < 0) {
            noteWriteFailure(errno);
            return;
        }
    }
    // Whole lines only: a partial write is cut back to the last complete line, so the file never
    // holds half an event (the store's recovery reads it line by line).
    std::size_t written = 0;
    while (written < m_unwritten.size()) {
        const ssize_t n = ::write(m_eventsFd, m_unwritten.data() + written, m_unwritten.size() - written);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            const int error = n < 0 ? errno : ENOSPC;
            const auto end = m_unwritten.rfind('\n', written == 0 ? 0 : written - 1);
            if (written > 0 && (end == std::string::npos || end + 1 != written)) {
                // Take back the tail of a line cut in two, then keep that line whole in memory.
                const std::size_t keep = end == std::string::npos ? 0 : end + 1;
                if (::ftruncate(m_eventsFd, ::lseek(m_eventsFd, 0, SEEK_END) - static_cast<off_t>(written - keep)) == 0)
                    written = keep;
            }
            noteWriteFailure(error);
            break;
        }
        written += static_cast<std::size_t>(n);
    }
    m_unwritten.erase(0, written);
    if (m_writeFailingSince && m_unwritten.empty()) {
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - *m_writeFailingSince).count();
        char text[512];
        std::snprintf(text, sizeof text, "%s could not be written for %.1f s (%s); every event was written once it could be%s",
                      m_eventsPath.c_str(), seconds, std::strerror(m_lastWriteError),
                      m_droppedLines > 0 ? ", except those beyond the launcher's memory bound" : "");
        m_eventFileTrouble = text;
        std::fprintf(stderr, "%sshardscope launch: %s\n", m_interactive ? "\n" : "", text);
        m_writeFailingSince.reset();
    }
}

std::string RunMonitor::eventFileTrouble() const
{
    const auto unwritten = std::count(m_unwritten.begin(), m_unwritten.end(), '\n');
    if (unwritten > 0 || m_droppedLines > 0)
        return std::to_string(unwritten + m_droppedLines) + " event lines could not be written to " + m_eventsPath + " ("
               + std::strerror(m_lastWriteError) + ") before the launcher ended; the history has what it could record";
    return m_eventFileTrouble;
}

void RunMonitor::tick()
{
    const auto now0 = std::chrono::steady_clock::now();
    // While writing fails, try again every half second, not on every tick.
    if (!m_writeFailingSince || now0 - m_lastWriteAttempt >= std::chrono::milliseconds(500)) {
        m_lastWriteAttempt = now0;
        writeEvents();
    }
    if (!m_progress)
        return;
    const auto now = std::chrono::steady_clock::now();
    if (m_interactive) {
        if (now - m_lastPrint < std::chrono::milliseconds(200))
            return;
        std::fprintf(m_progress, "\r\033[K%s", progressLine().c_str());
    } else {
        // A log, not an animation: about every tenth of the run, or every 10 s.
        const std::int64_t step = stepsDone();
        const std::int64_t every = std::max<std::int64_t>(1, m_totalSteps / 10);
        if (step == m_lastPrintedStep
            || (step / every == m_lastPrintedStep / every && now - m_lastPrint < std::chrono::seconds(10)))
            return;
        m_lastPrintedStep = step;
        std::fprintf(m_progress, "%s\n", progressLine().c_str());
    }
    m_lastPrint = now;
    std::fflush(m_progress);
}

void RunMonitor::finish(std::chrono::milliseconds patience)
{
    // The ranks are gone; what the file still lacks gets a last chance while the disk is full.
    const auto deadline = std::chrono::steady_clock::now() + patience;
    writeEvents();
    while (!m_unwritten.empty() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
        writeEvents();
    }
    if (!m_progress)
        return;
    std::fprintf(m_progress, m_interactive ? "\r\033[K%s\n" : "%s\n", progressLine().c_str());
    std::fflush(m_progress);
}

} // namespace shardscope
