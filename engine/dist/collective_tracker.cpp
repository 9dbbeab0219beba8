#include "engine/dist/collective_tracker.h"

#include <algorithm>

namespace shardscope::dist {

namespace {
// Enough for DDP's buckets and FSDP's prefetched units in flight; completed ones go first.
constexpr std::size_t kMaxEntries = 128;
} // namespace

CollectiveTracker& CollectiveTracker::instance()
{
    // Never destroyed: the works it holds must not be released after their process groups, at exit.
    static auto* tracker = new CollectiveTracker;
    return *tracker;
}

void CollectiveTracker::dropCompleted()
{
    std::erase_if(m_entries, [](const Entry& e) { return e.work->isCompleted(); });
}

std::int64_t CollectiveTracker::issued(const char* kind, const c10::intrusive_ptr<c10d::Work>& work)
{
    std::lock_guard lock(m_mutex);
    const std::int64_t seq = ++m_lastSeq;
    if (m_entries.size() >= kMaxEntries)
        dropCompleted();
    if (m_entries.size() >= kMaxEntries)
        m_entries.pop_front(); // a flood of never-waited works: forget the oldest
    m_entries.push_back({kind, seq, std::chrono::steady_clock::now(), work});
    return seq;
}

std::optional<CollectiveTracker::Pending> CollectiveTracker::oldestPending()
{
    std::lock_guard lock(m_mutex);
    dropCompleted();
    if (m_entries.empty())
        return std::nullopt;
    const Entry& e = m_entries.front();
    return Pending{e.kind, e.seq, std::chrono::duration<double>(std::chrono::steady_clock::now() - e.issuedAt).count()};
}

} // namespace shardscope::dist
