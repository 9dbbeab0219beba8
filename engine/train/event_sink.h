#pragma once

// Where a rank's events go: the pipe the launcher gave it (SHARDSCOPE_EVENTS_FD), else stdout.

#include "engine/protocol/events.h"

namespace shardscope::train {

class EventSink {
public:
    // Uses SHARDSCOPE_EVENTS_FD when set, else standard output.
    explicit EventSink(int rank);
    void emit(protocol::EventBody body);
    int rank() const { return m_rank; }

private:
    int m_rank;
    int m_fd;
};

inline constexpr const char* kEventsFdVariable = "SHARDSCOPE_EVENTS_FD";

} // namespace shardscope::train
