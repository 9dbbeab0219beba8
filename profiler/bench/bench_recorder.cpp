// ns per recorded span, with the recorder enabled and disabled, single- and multi-threaded.
// A program, not a test (docs/BENCHMARKS.md, "Profiler"):
//   bench_recorder [--spans N] [--window W] [--threads T] [--repeat R]
// Each thread records N spans in windows of W spans; the recorder is drained (take()) after each
// window, outside the timed part, as the engine drains it when a profiling window closes.

#include "profiler/span_recorder.h"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace shardscope::profiler;

namespace {

using BenchClock = std::chrono::steady_clock;

// Keeps the compiler from removing the loop body in the disabled case.
volatile std::int64_t g_sink = 0;

double nsPer(BenchClock::duration elapsed, std::int64_t count)
{
    return double(std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count()) / double(count);
}

// One thread's loop: `spans` RAII scopes, like a gradient hook would open.
void scopeLoop(SpanRecorder& recorder, std::int64_t spans)
{
    for (std::int64_t i = 0; i < spans; ++i) {
        auto scope = recorder.scope(Lane::Compute, "grad hook", "backward");
        g_sink = g_sink + 1;
    }
}

void asyncLoop(SpanRecorder& recorder, std::int64_t spans)
{
    for (std::int64_t i = 0; i < spans; ++i) {
        const auto id = recorder.begin(Lane::Communication, "all_reduce bucket", "all_reduce", 4 << 20);
        g_sink = g_sink + 1;
        recorder.end(id);
    }
}

double run(bool enabled, bool async, int threads, std::int64_t spans, std::int64_t window)
{
    // Threads live for the whole run, as the engine's do; between windows they wait at a barrier
    // while the main thread drains the recorder. Each thread times only its own recording loops.
    SpanRecorder recorder(0);
    recorder.setEnabled(enabled);
    const std::int64_t windows = (spans + window - 1) / window;
    std::barrier sync(threads + 1);
    std::vector<BenchClock::duration> elapsed(std::size_t(threads), BenchClock::duration{});
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&, t] {
            for (std::int64_t w = 0; w < windows; ++w) {
                sync.arrive_and_wait();
                const std::int64_t count = std::min(window, spans - w * window);
                const auto start = BenchClock::now();
                async ? asyncLoop(recorder, count) : scopeLoop(recorder, count);
                elapsed[std::size_t(t)] += BenchClock::now() - start;
                sync.arrive_and_wait();
            }
        });
    }
    std::int64_t recorded = 0;
    for (std::int64_t w = 0; w < windows; ++w) {
        sync.arrive_and_wait();
        sync.arrive_and_wait();
        recorded += std::int64_t(recorder.take().spans.size());
    }
    for (auto& worker : workers)
        worker.join();
    if (enabled && recorded != spans * threads) {
        std::fprintf(stderr, "lost spans: %lld of %lld\n", static_cast<long long>(recorded),
                     static_cast<long long>(spans * threads));
        std::exit(1);
    }
    BenchClock::duration total{};
    for (const auto& e : elapsed)
        total += e;
    return nsPer(total, spans * threads); // per span, as the recording thread sees it
}

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

} // namespace

int main(int argc, char** argv)
{
    std::int64_t spans = 1'000'000;
    std::int64_t window = 10'000;
    int threads = 4;
    int repeat = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--spans") == 0)
            spans = std::atoll(argv[i + 1]);
        else if (std::strcmp(argv[i], "--window") == 0)
            window = std::max<std::int64_t>(1, std::atoll(argv[i + 1]));
        else if (std::strcmp(argv[i], "--threads") == 0)
            threads = std::atoi(argv[i + 1]);
        else if (std::strcmp(argv[i], "--repeat") == 0)
            repeat = std::atoi(argv[i + 1]);
    }
    std::printf("spans per thread: %lld in windows of %lld, repeats: %d (median reported), hardware threads: %u\n",
                static_cast<long long>(spans), static_cast<long long>(window), repeat, std::thread::hardware_concurrency());
    std::printf("%-34s %12s\n", "case", "ns/span");
    struct Case {
        const char* name;
        bool enabled;
        bool async;
        int threads;
    };
    const Case cases[] = {
        {"scope, disabled, 1 thread", false, false, 1},         {"scope, enabled, 1 thread", true, false, 1},
        {"begin/end, disabled, 1 thread", false, true, 1},      {"begin/end, enabled, 1 thread", true, true, 1},
        {"scope, disabled, N threads", false, false, threads},  {"scope, enabled, N threads", true, false, threads},
        {"begin/end, enabled, N threads", true, true, threads},
    };
    for (const Case& c : cases) {
        std::vector<double> results;
        for (int r = 0; r < repeat; ++r)
            results.push_back(run(c.enabled, c.async, c.threads, spans, window));
        std::string name = c.name;
        if (c.threads > 1)
            name += " (" + std::to_string(c.threads) + ")";
        std::printf("%-34s %12.2f\n", name.c_str(), median(results));
    }
    return 0;
}
