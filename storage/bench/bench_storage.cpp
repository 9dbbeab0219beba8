// bench_storage: the storage numbers of docs/BENCHMARKS.md ("Storage"). A program, not a timed
// test: it prints what it measured against the goals of the run-history issue.
//
//   bench_storage [--dir DIR] [--rows N] [--runs N] [--points N] [--buckets N]
//
// 1. batched ingestion through RunWriter (step events of 20 keys on 4 ranks), rows/s until the
//    final flush has committed;
// 2. listing every run of a history of --runs runs (default sort, no filter, and with filters);
// 3. downsampling a --points series to --buckets min/max buckets.
// Each latency is measured on a freshly opened connection ("first") and as the median of 15.

#include "storage/run_store.h"
#include "storage/run_writer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

using namespace shardscope::storage;
using Clock = std::chrono::steady_clock;

namespace {

double msSince(Clock::time_point start) { return std::chrono::duration<double, std::milli>(Clock::now() - start).count(); }

[[noreturn]] void fail(const std::string& message)
{
    std::fprintf(stderr, "bench_storage: %s\n", message.c_str());
    std::exit(1);
}

template <typename T>
T check(shardscope::Result<T> result, const char* what)
{
    if (!result)
        fail(std::string(what) + ": " + result.error().message);
    return std::move(*result);
}

void check(shardscope::Result<void> result, const char* what)
{
    if (!result)
        fail(std::string(what) + ": " + result.error().message);
}

template <typename F>
std::pair<double, double> firstAndMedian(const std::filesystem::path& db, F&& query)
{
    std::vector<double> times;
    for (int i = 0; i < 16; ++i) {
        auto store = check(RunStore::open(db), "open");
        const auto start = Clock::now();
        query(store);
        times.push_back(msSince(start));
        if (i == 0)
            continue;
        // Later rounds reuse one connection, as the GUI would.
        for (int j = 0; j < 14 && i == 1; ++j) {
            const auto again = Clock::now();
            query(store);
            times.push_back(msSince(again));
        }
        break;
    }
    const double first = times.front();
    std::vector<double> rest(times.begin() + 1, times.end());
    std::sort(rest.begin(), rest.end());
    return {first, rest[rest.size() / 2]};
}

// 1. Ingestion: 20 metrics of 4 ranks per step through the run writer.
void benchIngestion(const std::filesystem::path& db, std::int64_t totalRows)
{
    auto store = check(RunStore::open(db), "open");
    NewRun run;
    run.name = "ingest";
    const auto runId = check(store.createRun(run), "createRun");
    check(store.markRunning(runId), "markRunning");
    auto writer = check(RunWriter::open(db, runId), "RunWriter::open");
    const char* names[20] = {"loss",
                             "local_loss",
                             "lr",
                             "grad_norm",
                             "loss_scale",
                             "skipped",
                             "tokens",
                             "samples",
                             "step_time",
                             "tokens_per_s",
                             "mem.params",
                             "mem.grads",
                             "mem.optimizer",
                             "mem.activations_peak",
                             "mem.allocated",
                             "mem.reserved",
                             "mem.peak_allocated",
                             "mem.rss",
                             "comm.all_reduce",
                             "comm.all_gather"};
    constexpr int kRanks = 4;
    std::vector<MetricValue> values(20);
    const std::int64_t steps = totalRows / (20 * kRanks);
    const auto start = Clock::now();
    for (std::int64_t step = 0; step < steps; ++step) {
        for (int rank = 0; rank < kRanks; ++rank) {
            for (int k = 0; k < 20; ++k)
                values[std::size_t(k)] = {names[k], std::sin(double(step) * 0.01 + k) + rank};
            writer->addMetrics(rank, step, 1.7e9 + double(step) * 0.1, values);
        }
    }
    const double addMs = msSince(start);
    check(writer->flush(), "flush");
    const double totalMs = msSince(start);
    const double rows = double(steps * 20 * kRanks);
    std::printf("ingest: %.0f rows in %.1f ms (adding %.1f ms) = %.0f rows/s (goal >= 500000)\n", rows, totalMs, addMs,
                rows / (totalMs / 1000.0));
    check(writer->finish({}), "finish");
}

// 2. Listing runs: all, filtered and by tag, over runCount runs.
void benchListing(const std::filesystem::path& db, std::int64_t runCount)
{
    {
        auto store = check(RunStore::open(db), "open");
        const char* types[] = {"MULTI_CPU", "MULTI_GPU", "FSDP", "DEEPSPEED"};
        const char* precisions[] = {"no", "fp16", "bf16", "fp8"};
        const auto fillStart = Clock::now();
        for (std::int64_t i = 0; i < runCount; ++i) {
            NewRun run;
            run.name = "run-" + std::to_string(i);
            run.distributedType = types[i % 4];
            run.mixedPrecision = precisions[(i / 4) % 4];
            run.worldSize = int(1 + i % 8);
            if (i % 10 == 0)
                run.tags = {"sweep", "lr-" + std::to_string(i % 3)};
            const auto id = check(store.createRun(run), "createRun");
            RunEnd end;
            end.status = i % 7 == 0 ? RunStatus::Failed : RunStatus::Completed;
            check(store.finishRun(id, end), "finishRun");
        }
        std::printf("created %lld runs in %.0f ms\n", static_cast<long long>(runCount), msSince(fillStart));
    }
    {
        std::size_t listed = 0;
        auto [first, median] = firstAndMedian(db, [&](RunStore& store) { listed = check(store.listRuns(), "listRuns").size(); });
        std::printf("list all (%zu runs, newest first): first %.1f ms, median %.1f ms (goal < 100 ms)\n", listed, first, median);
        RunFilter filter;
        filter.statuses = {RunStatus::Completed};
        filter.mixedPrecision = "bf16";
        filter.text = "run-1";
        filter.sort = RunSort::Name;
        auto [ffirst,
              fmedian] = firstAndMedian(db, [&](RunStore& store) { listed = check(store.listRuns(filter), "listRuns").size(); });
        std::printf("list filtered (completed, bf16, text 'run-1', by name: %zu runs): first %.1f ms, median %.1f ms\n", listed,
                    ffirst, fmedian);
        RunFilter tagged;
        tagged.tag = "sweep";
        auto [tfirst,
              tmedian] = firstAndMedian(db, [&](RunStore& store) { listed = check(store.listRuns(tagged), "listRuns").size(); });
        std::printf("list by tag (%zu runs): first %.1f ms, median %.1f ms\n", listed, tfirst, tmedian);
    }
}

// 3. Downsampling one long series (with spikes that must survive) to bucketCount buckets.
void benchDownsampling(const std::filesystem::path& db, std::int64_t points, int bucketCount)
{
    std::int64_t seriesRun = 0;
    {
        auto store = check(RunStore::open(db), "open");
        NewRun run;
        run.name = "long-series";
        seriesRun = check(store.createRun(run), "createRun");
        auto writer = check(RunWriter::open(db, seriesRun), "RunWriter::open");
        for (std::int64_t step = 0; step < points; ++step) {
            const double spike = step % 99991 == 0 ? 50.0 : 0.0;
            writer->addMetrics(0, step, double(step), {{"loss", 2.0 * std::exp(-double(step) / 3e5) + spike}});
        }
        check(writer->finish({}), "finish");
    }
    {
        std::size_t buckets = 0;
        auto [first, median] = firstAndMedian(db, [&](RunStore& store) {
            buckets = check(store.downsampledSeries(seriesRun, 0, "loss", bucketCount), "downsample").size();
        });
        std::printf("downsample %lld points to <= %d buckets (%zu): first %.1f ms, median %.1f ms (goal < 50 ms)\n",
                    static_cast<long long>(points), bucketCount, buckets, first, median);
        std::size_t read = 0;
        auto [rfirst, rmedian] = firstAndMedian(
            db, [&](RunStore& store) { read = check(store.series(seriesRun, 0, "loss"), "series").size(); });
        std::printf("for reference, reading all %zu points: first %.1f ms, median %.1f ms\n", read, rfirst, rmedian);
    }
}

} // namespace

int main(int argc, char** argv)
{
    std::filesystem::path dir = std::filesystem::temp_directory_path() / "shardscope-bench-storage";
    std::int64_t totalRows = 2'000'000, runCount = 10'000, points = 1'000'000;
    int bucketCount = 2000;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string arg = argv[i];
        if (arg == "--dir")
            dir = argv[i + 1];
        else if (arg == "--rows")
            totalRows = std::atoll(argv[i + 1]);
        else if (arg == "--runs")
            runCount = std::atoll(argv[i + 1]);
        else if (arg == "--points")
            points = std::atoll(argv[i + 1]);
        else if (arg == "--buckets")
            bucketCount = std::atoi(argv[i + 1]);
        else
            fail("unknown option " + arg);
    }
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    const auto db = dir / "history.sqlite";
    std::printf("database: %s\n", db.c_str());

    benchIngestion(db, totalRows);
    benchListing(db, runCount);
    benchDownsampling(db, points, bucketCount);
    std::printf("database size: %.1f MiB\n", double(std::filesystem::file_size(db)) / (1024.0 * 1024.0));
    std::filesystem::remove_all(dir);
    return 0;
}
