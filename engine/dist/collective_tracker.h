#pragma once

// The collectives this rank has issued and not yet seen complete. Every Communicator (subgroups
// too) records each collective here when it issues it; the heartbeat thread asks for the oldest
// one still pending, so the launcher learns that a rank waits, in which collective and for how
// long, while its main thread is blocked in the wait. A rank that was stopped sends nothing at
// all: that tells the stopped rank from the ranks waiting for it.

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>

namespace shardscope::dist {

class CollectiveTracker {
public:
    static CollectiveTracker& instance();

    // Records `work` (kind: "all_reduce", "all_gather", ...) as issued now. Returns its number,
    // counted over every group of this process from 1.
    std::int64_t issued(const char* kind, const c10::intrusive_ptr<c10d::Work>& work);

    struct Pending {
        std::string kind;
        std::int64_t seq = 0;
        double seconds = 0; // since it was issued
    };
    // The oldest issued collective that has not completed; nothing when every one has. Safe to
    // call from any thread (c10d's Work::isCompleted takes the work's own lock).
    std::optional<Pending> oldestPending();

private:
    struct Entry {
        const char* kind;
        std::int64_t seq;
        std::chrono::steady_clock::time_point issuedAt;
        c10::intrusive_ptr<c10d::Work> work;
    };
    void dropCompleted(); // with m_mutex held
    std::mutex m_mutex;
    std::deque<Entry> m_entries;
    std::int64_t m_lastSeq = 0;
};

} // namespace shardscope::dist
