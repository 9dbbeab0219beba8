#pragma once

// RunWriter: how the launcher writes one run's events. Calls only append to a buffer (no I/O, a
// hash lookup per key); a thread of the writer's own, with its own connection, commits the buffer
// as one transaction when the oldest buffered row is flushInterval old, or when maxBufferedRows
// are waiting, or on flush(). So a live view lags by at most about flushInterval, and a commit
// never costs the launcher's event loop anything.
//
// Atomicity: everything one add*() call buffers lands in the same transaction (a step event's
// rows are never split), and each transaction also advances the run's last_step, so a reader in
// one read transaction sees rows and summary agree. A failed commit keeps its rows buffered and
// is retried at the next interval; lastError() tells what failed.

#include "engine/common/result.h"
#include "storage/run_types.h"

#include <chrono>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <span>

namespace shardscope::storage {

struct WriterOptions {
    std::chrono::milliseconds flushInterval{200};
    std::size_t maxBufferedRows = 50000; // commit early once this many metric rows wait
    std::chrono::milliseconds busyTimeout{5000};
};

class RunWriter {
public:
    static Result<std::unique_ptr<RunWriter>> open(const std::filesystem::path& databaseFile, std::int64_t runId,
                                                   WriterOptions options = {});
    ~RunWriter(); // commits what is buffered (errors are lost here: call flush() or finish())
    RunWriter(const RunWriter&) = delete;
    RunWriter& operator=(const RunWriter&) = delete;

    // The rows of one event (one rank, one step, one time [s since the epoch]).
    void addMetrics(int rank, std::int64_t step, double time, std::span<const MetricValue> values);
    void addMetrics(int rank, std::int64_t step, double time, std::initializer_list<MetricValue> values)
    {
        addMetrics(rank, step, time, std::span<const MetricValue>(values.begin(), values.size()));
    }
    void addRank(const RankInfo& rank);
    void addEval(const EvalRecord& eval);
    void addEvalSample(const EvalSample& sample);
    void addTrace(const TraceRecord& trace);
    void addCheckpoint(const CheckpointRecord& checkpoint);

    // Returns once everything added before the call is committed (or the attempt failed).
    Result<void> flush();
    // Commits what is buffered together with the run's end (completed, failed or cancelled);
    // afterwards the writer accepts nothing more.
    Result<void> finish(const RunEnd& end);

    // Whether the run's end has been committed (finish may fail once and land on a later attempt).
    bool finishedRun() const;
    std::optional<Error> lastError() const;
    std::int64_t committedRows() const; // metric rows committed by this writer
    std::int64_t runId() const;

    struct State;

private:
    explicit RunWriter(std::unique_ptr<State> state);
    // Asks the writer thread for a commit and waits until it has been attempted (`lock` holds the
    // state's mutex): flush and finish alike.
    Result<void> requestCommitAndWait(std::unique_lock<std::mutex>& lock);
    std::unique_ptr<State> m_state;
};

} // namespace shardscope::storage
