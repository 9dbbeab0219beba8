#pragma once

// The flight recorder: a ring of the last collectives this process issued, every process group's
// (per group: its sequence number, kind, bytes, dtype, when it was issued and completed, and what
// the rank was doing), as PyTorch's NCCL flight recorder keeps them. Every Communicator records
// each collective here as it issues it; dist::waitFor notes its completion. The heartbeat thread
// reads it while the training thread is blocked in a wait: the oldest pending collective for each
// beat, the whole ring when asked (engine/protocol/flight_record.h), so that a hang can be
// explained from every rank's side (app/launcher/hang_report.h).
//
// Issue and completion times only: neither Gloo nor NCCL (without its timing events) says when a
// queued collective started running.

#include "engine/protocol/flight_record.h"

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace shardscope::dist {

class FlightRecorder {
public:
    static FlightRecorder& instance();

    // What the training thread is doing (cheap: two relaxed stores). `phase` must be a string
    // literal or otherwise live for the process ("forward", "backward", "eval", ...).
    void setActivity(std::int64_t stepsDone, const char* phase);
    std::int64_t stepsDone() const { return m_steps.load(std::memory_order_relaxed); }
    const char* phase() const { return m_phase.load(std::memory_order_relaxed); }

    struct Issue {
        const std::string* group; // lives as long as its Communicator
        std::int64_t seq; // within the group
        const char* kind; // "all_reduce", ...
        std::int64_t bytes;
        std::string dtype;
    };
    void issued(const Issue& issue, const c10::intrusive_ptr<c10d::Work>& work);
    // `work` finished (its wait returned): its completion time is now.
    void completed(const c10d::Work* work);

    struct Pending {
        std::string kind;
        std::string group;
        std::int64_t seq = 0; // within the group
        double seconds = 0; // since it was issued
    };
    // The oldest issued collective that has not completed; nothing when every one has. Safe to
    // call from any thread (c10d's Work::isCompleted takes the work's own lock).
    std::optional<Pending> oldestPending();

    // Off: collectives are not recorded nor their waits timed (one half of the overhead
    // benchmark, scripts/bench-diagnostics.sh; a hang report then lacks them).
    void setEnabled(bool on) { m_enabled.store(on, std::memory_order_relaxed); }
    bool enabled() const { return m_enabled.load(std::memory_order_relaxed); }

    // The ring as it is now, for `rank`'s answer to `request`.
    protocol::FlightRecord snapshot(int rank, std::int64_t request);

private:
    FlightRecorder();
    struct Entry {
        protocol::CollectiveRecord record;
        std::chrono::steady_clock::time_point issuedAt;
        c10::intrusive_ptr<c10d::Work> work; // released once it completed
    };
    void pollCompletions(); // with m_mutex held
    std::atomic<bool> m_enabled{true};
    std::atomic<std::int64_t> m_steps{0};
    std::atomic<const char*> m_phase{"setup"};
    std::size_t m_capacity;
    std::mutex m_mutex;
    std::deque<Entry> m_entries;
    std::map<std::string, std::int64_t> m_issued; // per group: the last sequence number
};

// Fault injection for the hang diagnosis's tests: this process does not issue collective `seq`
// of the default group, and holds there (as a rank that went down another code path) until it
// is killed.
void injectSkippedCollective(std::int64_t seq);
bool isSkippedCollective(const std::string& group, std::int64_t seq);

// Capacity of the ring: SHARDSCOPE_FLIGHT_RECORDER_ENTRIES, else this.
inline constexpr std::size_t kDefaultFlightRecorderEntries = 256;

} // namespace shardscope::dist
