#include "engine/train/event_sink.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

namespace shardscope::train {

namespace {

void writeAll(int fd, const std::string& text)
{
    const char* p = text.data();
    std::size_t left = text.size();
    while (left > 0) {
        const ssize_t n = ::write(fd, p, left);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return; // the launcher is gone; the parent-death signal ends this rank
        }
        p += n;
        left -= static_cast<std::size_t>(n);
    }
}

// What the rank's log (its stderr, logs/rank<N>.log) says of an event, as a person reads it: the
// Run page's log pane and `tail -f` show the run's progress, not only its errors. Heartbeats,
// memory samples and trace summaries stay in the event stream.
std::string logLine(int rank, const protocol::EventBody& body)
{
    char buffer[512];
    const std::string prefix = "[rank " + std::to_string(rank) + "] ";
    return std::visit(
        [&](const auto& e) -> std::string {
            using T = std::decay_t<decltype(e)>;
            if constexpr (std::is_same_v<T, protocol::HelloEvent>) {
                return prefix + "started: pid " + std::to_string(e.pid) + " on " + e.host + ", " + e.device + ", torch " + e.torch
                       + "\n";
            } else if constexpr (std::is_same_v<T, protocol::StepEvent>) {
                char mfu[32] = "";
                if (e.mfu)
                    std::snprintf(mfu, sizeof mfu, "  MFU %.1f%%", 100.0 * *e.mfu);
                std::snprintf(buffer, sizeof buffer, "step %lld  loss %.4f  lr %.3g  grad_norm %.3g  %.0f tokens/s%s  %.3f s%s",
                              static_cast<long long>(e.step), e.loss, e.lr, e.gradNorm, e.tokensPerS, mfu, e.stepTime,
                              e.skipped ? "  (skipped: fp16 overflow)" : "");
                return prefix + buffer + "\n";
            } else if constexpr (std::is_same_v<T, protocol::EvalEvent>) {
                std::snprintf(buffer, sizeof buffer, "eval at step %lld  loss %.4f", static_cast<long long>(e.step), e.loss);
                return prefix + buffer + "\n";
            } else if constexpr (std::is_same_v<T, protocol::CheckpointEvent>) {
                return prefix + e.kind + " saved at step " + std::to_string(e.step) + ": " + e.path + "\n";
            } else if constexpr (std::is_same_v<T, protocol::LogEvent>) {
                return prefix + e.level + ": " + e.message + "\n";
            } else if constexpr (std::is_same_v<T, protocol::ErrorEvent>) {
                return prefix + "error (" + e.kind + "): " + e.message + "\n";
            } else if constexpr (std::is_same_v<T, protocol::DoneEvent>) {
                std::snprintf(buffer, sizeof buffer, "%s after %lld steps, %.1f s", e.status.c_str(),
                              static_cast<long long>(e.steps), e.wall);
                return prefix + buffer + "\n";
            } else {
                return std::string();
            }
        },
        body);
}

} // namespace

EventSink::EventSink(int rank) : m_rank(rank), m_fd(STDOUT_FILENO)
{
    if (const char* fd = std::getenv(kEventsFdVariable); fd && *fd)
        m_fd = std::atoi(fd);
}

void EventSink::emit(protocol::EventBody body)
{
    std::lock_guard lock(m_mutex);
    write(body);
}

bool EventSink::tryEmit(protocol::EventBody body)
{
    std::unique_lock lock(m_mutex, std::try_to_lock);
    if (!lock.owns_lock())
        return false;
    write(body);
    return true;
}

void EventSink::write(const protocol::EventBody& body)
{
    const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    std::string line = protocol::encodeEvent({protocol::kProtocolVersion, m_rank, now, body});
    line.push_back('\n');
    // One write per line: lines up to PIPE_BUF are atomic, and the launcher reassembles longer ones.
    writeAll(m_fd, line);
    // With the events on their own pipe, stderr is the rank's log: it says the same for people.
    if (m_fd != STDOUT_FILENO)
        if (const std::string human = logLine(m_rank, body); !human.empty())
            writeAll(STDERR_FILENO, human);
}

} // namespace shardscope::train
