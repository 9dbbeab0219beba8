// storage_ingest_helper: a stand-in for the launcher's writing side, driven by
// tst_storage_multiproc. It creates a run, marks it running (as its launcher), and writes step
// events (one per rank per step, --keys values each) through RunWriter.
//
//   --db FILE             the run history
//   --ranks N --keys K    event shape (default 4 x 20)
//   --steps N             steps to write, 0: until killed
//   --flush-every N       call flush() every N steps and print "committed <rows>" once it
//                         returned (0: rely on the writer's own interval)
//   --interval-ms N       the writer's flush interval (default 200)
//   --max-buffered N      the writer's maxBufferedRows (default 50000)
//   --busy-timeout-ms N   the writer's busy timeout (0: any lock wait is an error)
//   --step-sleep-us N     pause after each step, to spread ingestion over time
//   --fsize-after N       after N steps (and their flush), cap the size of any file this process
//                         writes (RLIMIT_FSIZE, SIGXFSZ ignored) at the current size of the
//                         database or its WAL, whichever is larger, plus --fsize-slack bytes
//                         (default 4096): a disk that fills up. Prints "limited <bytes>".
//
// Prints "run <id>" first, "done" at the end; exits 3 when a commit fails (message on stderr).

#include "storage/run_store.h"
#include "storage/run_writer.h"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

using namespace shardscope::storage;

int main(int argc, char** argv)
{
    std::string db;
    int ranks = 4, keyCount = 20, flushEvery = 0, intervalMs = 200, busyMs = 5000, sleepUs = 0;
    long long steps = 0, maxBuffered = 50000, fsizeAfter = -1, fsizeSlack = 4096;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string arg = argv[i];
        const char* value = argv[i + 1];
        if (arg == "--db")
            db = value;
        else if (arg == "--ranks")
            ranks = std::atoi(value);
        else if (arg == "--keys")
            keyCount = std::atoi(value);
        else if (arg == "--steps")
            steps = std::atoll(value);
        else if (arg == "--flush-every")
            flushEvery = std::atoi(value);
        else if (arg == "--interval-ms")
            intervalMs = std::atoi(value);
        else if (arg == "--max-buffered")
            maxBuffered = std::atoll(value);
        else if (arg == "--busy-timeout-ms")
            busyMs = std::atoi(value);
        else if (arg == "--step-sleep-us")
            sleepUs = std::atoi(value);
        else if (arg == "--fsize-after")
            fsizeAfter = std::atoll(value);
        else if (arg == "--fsize-slack")
            fsizeSlack = std::atoll(value);
        else
            return 64;
    }

    auto store = RunStore::open(db);
    if (!store) {
        std::fprintf(stderr, "%s\n", store.error().message.c_str());
        return 2;
    }
    NewRun run;
    run.name = "ingest";
    run.worldSize = ranks;
    auto id = store->createRun(run);
    if (!id || !store->markRunning(*id)) {
        std::fprintf(stderr, "cannot create the run\n");
        return 2;
    }
    WriterOptions options;
    options.flushInterval = std::chrono::milliseconds(intervalMs);
    options.maxBufferedRows = std::size_t(maxBuffered);
    options.busyTimeout = std::chrono::milliseconds(busyMs);
    auto writer = RunWriter::open(db, *id, options);
    if (!writer) {
        std::fprintf(stderr, "%s\n", writer.error().message.c_str());
        return 2;
    }
    std::printf("run %lld\n", static_cast<long long>(*id));
    std::fflush(stdout);

    std::vector<std::string> names;
    for (int k = 0; k < keyCount; ++k)
        names.push_back(k == 0 ? "loss" : "key" + std::to_string(k));
    std::vector<MetricValue> values(static_cast<std::size_t>(keyCount));
    for (long long step = 0; steps == 0 || step < steps; ++step) {
        if (step == fsizeAfter) {
            if (auto rc = (*writer)->flush(); !rc) {
                std::fprintf(stderr, "%s\n", rc.error().message.c_str());
                return 3;
            }
            std::printf("committed %lld\n", static_cast<long long>((*writer)->committedRows()));
            std::error_code ec;
            std::uintmax_t largest = 0;
            for (const char* suffix : {"", "-wal", "-shm"}) {
                const auto size = std::filesystem::file_size(db + suffix, ec);
                if (!ec)
                    largest = std::max(largest, size);
            }
            // Ignored, a write past the limit fails with EFBIG instead of killing the process.
            std::signal(SIGXFSZ, SIG_IGN);
            const rlimit limit{rlim_t(largest) + rlim_t(fsizeSlack), rlim_t(largest) + rlim_t(fsizeSlack)};
            if (setrlimit(RLIMIT_FSIZE, &limit) != 0) {
                std::fprintf(stderr, "setrlimit: %s\n", std::strerror(errno));
                return 2;
            }
            std::printf("limited %llu\n", static_cast<unsigned long long>(limit.rlim_cur));
            std::fflush(stdout);
        }
        for (int rank = 0; rank < ranks; ++rank) {
            for (int k = 0; k < keyCount; ++k)
                values[std::size_t(k)] = {names[std::size_t(k)], double(step) + k * 0.001 + rank};
            (*writer)->addMetrics(rank, step, double(step), values);
        }
        if (flushEvery > 0 && (step + 1) % flushEvery == 0) {
            if (auto rc = (*writer)->flush(); !rc) {
                std::fprintf(stderr, "%s\n", rc.error().message.c_str());
                return 3;
            }
            std::printf("committed %lld\n", static_cast<long long>((*writer)->committedRows()));
            std::fflush(stdout);
        }
        if (auto error = (*writer)->lastError()) {
            std::fprintf(stderr, "%s\n", error->message.c_str());
            return 3;
        }
        if (sleepUs > 0)
            std::this_thread::sleep_for(std::chrono::microseconds(sleepUs));
    }
    if (auto rc = (*writer)->finish({}); !rc) {
        std::fprintf(stderr, "%s\n", rc.error().message.c_str());
        return 3;
    }
    std::printf("done %lld\n", static_cast<long long>((*writer)->committedRows()));
    return 0;
}
