#include "engine/dist/wait_clock.h"

#include "engine/dist/flight_recorder.h"

#include <atomic>
#include <chrono>

namespace shardscope::dist {

namespace {

std::atomic<std::int64_t> g_waitedNanoseconds{0};

} // namespace

void waitFor(const c10::intrusive_ptr<c10d::Work>& work)
{
    if (!FlightRecorder::instance().enabled()) {
        work->wait();
        return;
    }
    const auto start = std::chrono::steady_clock::now();
    work->wait();
    const auto waited = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
    g_waitedNanoseconds.fetch_add(waited.count(), std::memory_order_relaxed);
    FlightRecorder::instance().completed(work.get());
}

double secondsWaited() { return static_cast<double>(g_waitedNanoseconds.load(std::memory_order_relaxed)) * 1e-9; }

} // namespace shardscope::dist
