#include "profiler/span_recorder.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <string>
#include <utility>

namespace shardscope::profiler {

struct SpanRecorder::ThreadBuffer {
    std::mutex mutex;
    std::vector<Span> spans;
    std::vector<CounterSample> counters;
};

namespace {

std::atomic<std::uint64_t> g_nextRecorderId{1};

// The calling thread's buffers, one per recorder it recorded into. Keyed by the recorder's unique
// id rather than its address, so that a recorder created where an old one died never inherits a
// stale buffer.
struct ThreadCacheEntry {
    std::uint64_t recorderId = 0;
    std::shared_ptr<void> buffer;
};
thread_local std::vector<ThreadCacheEntry> t_cache;

} // namespace

std::int64_t steadyNowNs() noexcept
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

SpanRecorder::SpanRecorder(int rank, ClockFn clock)
    : m_rank(rank), m_clock(clock), m_id(g_nextRecorderId.fetch_add(1, std::memory_order_relaxed))
{
}

SpanRecorder::~SpanRecorder() = default;

void SpanRecorder::setWindow(std::int64_t startStep, std::int64_t steps)
{
    m_windowStart.store(startStep, std::memory_order_relaxed);
    m_windowSteps.store(steps, std::memory_order_relaxed);
    updateEnabled();
}

bool SpanRecorder::stepBegan(std::int64_t step)
{
    m_step.store(step, std::memory_order_relaxed);
    updateEnabled();
    return enabled();
}

void SpanRecorder::setEnabled(bool on)
{
    m_forced.store(on, std::memory_order_relaxed);
    updateEnabled();
}

void SpanRecorder::updateEnabled()
{
    const std::int64_t start = m_windowStart.load(std::memory_order_relaxed);
    const std::int64_t steps = m_windowSteps.load(std::memory_order_relaxed);
    const std::int64_t step = m_step.load(std::memory_order_relaxed);
    const bool inWindow = start >= 0 && steps > 0 && step >= start && step - start < steps;
    m_enabled.store(inWindow || m_forced.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

Span SpanRecorder::makeSpan(Lane lane, std::string_view name, std::string_view category, std::int64_t bytes) const
{
    Span span;
    span.name.assign(name);
    span.category.assign(category);
    span.lane = lane;
    span.bytes = bytes;
    span.step = currentStep();
    span.startNs = m_clock();
    return span;
}

SpanRecorder::Scope SpanRecorder::beginScope(Lane lane, std::string_view name, std::string_view category, std::int64_t bytes)
{
    Scope scope;
    scope.m_recorder = this;
    scope.m_span = makeSpan(lane, name, category, bytes);
    return scope;
}

SpanRecorder::Scope::Scope(Scope&& other) noexcept
    : m_recorder(std::exchange(other.m_recorder, nullptr)), m_span(std::move(other.m_span))
{
    other.m_span.reset();
}

SpanRecorder::Scope& SpanRecorder::Scope::operator=(Scope&& other) noexcept
{
    if (this != &other) {
        finish();
        m_recorder = std::exchange(other.m_recorder, nullptr);
        m_span = std::move(other.m_span);
        other.m_span.reset();
    }
    return *this;
}

void SpanRecorder::Scope::finish()
{
    if (m_recorder == nullptr)
        return;
    m_span->endNs = m_recorder->m_clock();
    m_recorder->push(std::move(*m_span));
    m_span.reset();
    m_recorder = nullptr;
}

SpanRecorder::SpanId SpanRecorder::beginAsync(Lane lane, std::string_view name, std::string_view category, std::int64_t bytes)
{
    Span span = makeSpan(lane, name, category, bytes);
    const SpanId id = m_nextId.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(m_openMutex);
    m_open.emplace(id, std::move(span));
    return id;
}

bool SpanRecorder::end(SpanId id)
{
    if (id == kNoSpan)
        return false;
    const std::int64_t endNs = m_clock();
    Span span;
    {
        std::lock_guard lock(m_openMutex);
        auto it = m_open.find(id);
        if (it == m_open.end())
            return false;
        span = std::move(it->second);
        m_open.erase(it);
    }
    span.endNs = std::max(endNs, span.startNs);
    push(std::move(span));
    return true;
}

bool SpanRecorder::end(SpanId id, std::int64_t bytes)
{
    if (id == kNoSpan)
        return false;
    {
        std::lock_guard lock(m_openMutex);
        auto it = m_open.find(id);
        if (it == m_open.end())
            return false;
        it->second.bytes = bytes;
    }
    return end(id);
}

void SpanRecorder::record(Span span)
{
    if (!enabled())
        return;
    if (span.step < 0)
        span.step = currentStep();
    push(std::move(span));
}

void SpanRecorder::counter(std::string_view name, std::string_view series, double value)
{
    if (!enabled())
        return;
    CounterSample sample{std::string(name), std::string(series), m_clock(), value};
    ThreadBuffer& buffer = threadBuffer();
    std::lock_guard lock(buffer.mutex);
    buffer.counters.push_back(std::move(sample));
}

SpanRecorder::ThreadBuffer& SpanRecorder::threadBuffer()
{
    for (const ThreadCacheEntry& entry : t_cache) {
        if (entry.recorderId == m_id)
            return *static_cast<ThreadBuffer*>(entry.buffer.get());
    }
    // First span of this thread for this recorder: register a buffer. Entries of dead recorders
    // (their registry let go, so only this thread holds the buffer) are dropped on the way.
    std::erase_if(t_cache, [](const ThreadCacheEntry& entry) { return entry.buffer.use_count() == 1; });
    auto buffer = std::make_shared<ThreadBuffer>();
    {
        std::lock_guard lock(m_registryMutex);
        m_buffers.push_back(buffer);
    }
    t_cache.push_back(ThreadCacheEntry{m_id, buffer});
    return *buffer;
}

void SpanRecorder::push(Span&& span)
{
    ThreadBuffer& buffer = threadBuffer();
    std::lock_guard lock(buffer.mutex);
    buffer.spans.push_back(std::move(span));
}

RankTrace SpanRecorder::take()
{
    RankTrace trace;
    trace.rank = m_rank;
    trace.source = std::string(kSourceHost);
    {
        std::lock_guard lock(m_registryMutex);
        for (const auto& buffer : m_buffers) {
            std::lock_guard bufferLock(buffer->mutex);
            std::move(buffer->spans.begin(), buffer->spans.end(), std::back_inserter(trace.spans));
            buffer->spans.clear();
            std::move(buffer->counters.begin(), buffer->counters.end(), std::back_inserter(trace.counters));
            buffer->counters.clear();
        }
    }
    std::stable_sort(trace.spans.begin(), trace.spans.end(), [](const Span& a, const Span& b) {
        return a.startNs != b.startNs ? a.startNs < b.startNs : a.endNs > b.endNs;
    });
    std::stable_sort(trace.counters.begin(), trace.counters.end(),
                     [](const CounterSample& a, const CounterSample& b) { return a.timeNs < b.timeNs; });
    if (const std::size_t open = openSpanCount(); open > 0)
        trace.notes.push_back(std::to_string(open)
                              + " span(s) were still open when the trace was taken "
                                "(a collective never waited?); they are not in this trace");
    return trace;
}

std::size_t SpanRecorder::openSpanCount() const
{
    std::lock_guard lock(m_openMutex);
    return m_open.size();
}

} // namespace shardscope::profiler
