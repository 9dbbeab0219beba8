#pragma once

// SpanRecorder: the engine's host-side span recorder. Callable from any thread (the training
// loop, autograd threads running gradient hooks, the thread that observes a Gloo work complete).
//
// Note [Recorder cost]: with the window closed every entry point is one relaxed atomic load and a
// branch; no clock read, no allocation, no lock. With it open a span costs two steady-clock reads,
// the name's copy and a push onto a per-thread buffer under that buffer's own (uncontended) mutex;
// the buffers are only contended while take() drains them. docs/BENCHMARKS.md, "Profiler" has
// the measured numbers.
//
// Usage from the engine:
//   SpanRecorder rec(rank);
//   rec.setWindow(recipe.profileStartStep, recipe.profileSteps);   // or rec.setEnabled(true)
//   rec.stepBegan(step);                       // each optimizer step; opens/closes the window
//   { auto s = rec.scope(Lane::Compute, "forward", "forward"); ... }
//   auto id = rec.begin(Lane::Communication, "all_reduce bucket 3", "all_reduce", bytes);
//   ... later, on whatever thread waits for the work:  rec.end(id);
//   RankTrace trace = rec.take();

#include "profiler/trace_model.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace shardscope::profiler {

// ns of std::chrono::steady_clock (CLOCK_MONOTONIC on Linux): the clock of every host span.
std::int64_t steadyNowNs() noexcept;

class SpanRecorder {
public:
    using ClockFn = std::int64_t (*)() noexcept; // ns
    using SpanId = std::uint64_t;
    static constexpr SpanId kNoSpan = 0;

    explicit SpanRecorder(int rank, ClockFn clock = &steadyNowNs);
    ~SpanRecorder();
    SpanRecorder(const SpanRecorder&) = delete;
    SpanRecorder& operator=(const SpanRecorder&) = delete;

    int rank() const { return m_rank; }

    // The recipe's window (`profile: {start_step, steps}`): recording is on for steps
    // startStep .. startStep + steps - 1, as announced by stepBegan(). steps <= 0 or a negative
    // start: never (unless setEnabled(true)).
    void setWindow(std::int64_t startStep, std::int64_t steps);
    // Announces the optimizer step that begins now: stamps later spans with it and opens or closes
    // the window. Returns whether recording is on for this step.
    bool stepBegan(std::int64_t step);
    // Forces recording on for the whole run (the launch flag `--profile`), or back to the window.
    void setEnabled(bool on);
    bool enabled() const noexcept { return m_enabled.load(std::memory_order_relaxed); }
    std::int64_t currentStep() const noexcept { return m_step.load(std::memory_order_relaxed); }
    std::int64_t now() const noexcept { return m_clock(); }

    // RAII span: from construction to destruction (or finish()). Inactive, and free, when the
    // recorder is disabled at construction.
    class [[nodiscard]] Scope {
    public:
        Scope() noexcept { } // user-provided: value-initialising a Scope must not zero its Span storage
        Scope(Scope&& other) noexcept;
        Scope& operator=(Scope&& other) noexcept;
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;
        ~Scope()
        {
            if (m_recorder != nullptr)
                finish();
        }

        bool active() const { return m_recorder != nullptr; }
        void setBytes(std::int64_t bytes) // bytes
        {
            if (m_span)
                m_span->bytes = bytes;
        }
        void finish();

    private:
        friend class SpanRecorder;
        SpanRecorder* m_recorder = nullptr;
        std::optional<Span> m_span; // engaged only when active: a disabled scope builds no strings
    };

    Scope scope(Lane lane, std::string_view name, std::string_view category, std::int64_t bytes = 0)
    {
        if (!enabled())
            return Scope{};
        return beginScope(lane, name, category, bytes);
    }

    // An asynchronous span, e.g. a collective issued now and completed when waited: begin()
    // returns kNoSpan when disabled; end() may run on any thread, even after the window closed,
    // and ignores kNoSpan and unknown ids. Returns whether a span was recorded.
    SpanId begin(Lane lane, std::string_view name, std::string_view category, std::int64_t bytes = 0)
    {
        if (!enabled())
            return kNoSpan;
        return beginAsync(lane, name, category, bytes);
    }
    bool end(SpanId id);
    bool end(SpanId id, std::int64_t bytes); // also sets the bytes known only at completion

    // A span timed elsewhere (its own start/end, on this recorder's clock). Recorded only while
    // enabled; a step of -1 is replaced by the current step.
    void record(Span span);
    // A counter sample now, e.g. counter("memory", "allocated", bytes).
    void counter(std::string_view name, std::string_view series, double value);

    // Everything recorded so far, sorted by start, and forgets it. Spans still open stay open (a
    // later take() gets them once ended); the trace's notes say how many were open.
    RankTrace take();
    std::size_t openSpanCount() const;

private:
    struct ThreadBuffer;
    Scope beginScope(Lane lane, std::string_view name, std::string_view category, std::int64_t bytes);
    SpanId beginAsync(Lane lane, std::string_view name, std::string_view category, std::int64_t bytes);
    Span makeSpan(Lane lane, std::string_view name, std::string_view category, std::int64_t bytes) const;
    ThreadBuffer& threadBuffer();
    void push(Span&& span);
    void updateEnabled();

    const int m_rank;
    const ClockFn m_clock;
    const std::uint64_t m_id; // unique per recorder, keys the per-thread buffer cache

    std::atomic<bool> m_enabled{false};
    std::atomic<std::int64_t> m_step{-1};
    std::atomic<bool> m_forced{false};
    std::atomic<std::int64_t> m_windowStart{-1};
    std::atomic<std::int64_t> m_windowSteps{0};

    mutable std::mutex m_registryMutex;
    std::vector<std::shared_ptr<ThreadBuffer>> m_buffers;

    mutable std::mutex m_openMutex;
    std::unordered_map<SpanId, Span> m_open;
    std::atomic<SpanId> m_nextId{1};
};

} // namespace shardscope::profiler
