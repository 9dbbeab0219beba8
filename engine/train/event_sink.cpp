#include "engine/train/event_sink.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>

namespace shardscope::train {

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
    const char* p = line.data();
    std::size_t left = line.size();
    while (left > 0) {
        const ssize_t n = ::write(m_fd, p, left);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return; // the launcher is gone; the parent-death signal ends this rank
        }
        p += n;
        left -= static_cast<std::size_t>(n);
    }
}

} // namespace shardscope::train
