#pragma once

// Where a rank's events go: the pipe the launcher gave it (SHARDSCOPE_EVENTS_FD), else stdout.
// Thread-safe: the heartbeat thread emits too.

#include "engine/protocol/events.h"

#include <mutex>

namespace shardscope::train {

class EventSink {
public:
    // Uses SHARDSCOPE_EVENTS_FD when set, else standard output.
    explicit EventSink(int rank);
    void emit(protocol::EventBody body);
    // For the terminate handler: emits unless another thread is in the middle of a line (it
    // must not wait for a lock the dying thread may hold).
    bool tryEmit(protocol::EventBody body);
    int rank() const { return m_rank; }

private:
    void write(const protocol::EventBody& body);
    int m_rank;
    int m_fd;
    std::mutex m_mutex;
};

inline constexpr const char* kEventsFdVariable = "SHARDSCOPE_EVENTS_FD";

} // namespace shardscope::train
