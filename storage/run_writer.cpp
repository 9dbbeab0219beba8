#include "storage/run_writer.h"

#include "storage/metric_blocks.h"
#include "storage/metric_keys.h"
#include "storage/schema.h"
#include "storage/sqlite_db.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace shardscope::storage {

namespace {

// Rows per multi-row INSERT: fewer statement executions per row, well under SQLite's limit of
// 32766 parameters.
constexpr int kRowsPerInsert = 64;
constexpr int kColumnsPerRow = 6;

struct PendingMetric {
    std::int32_t key; // index into the writer's key names
    std::int32_t rank;
    std::int64_t step;
    double time;
    double value;
};

struct Buffer {
    std::vector<PendingMetric> metrics;
    std::vector<RankInfo> ranks;
    std::vector<EvalRecord> evals;
    std::vector<EvalSample> samples;
    std::vector<TraceRecord> traces;
    std::vector<CheckpointRecord> checkpoints;

    bool empty() const
    {
        return metrics.empty() && ranks.empty() && evals.empty() && samples.empty() && traces.empty() && checkpoints.empty();
    }
    // Puts a failed batch back in front of what arrived meanwhile, keeping the order.
    void prepend(Buffer&& older)
    {
        auto front = [](auto& mine, auto& theirs) {
            theirs.insert(theirs.end(), std::make_move_iterator(mine.begin()), std::make_move_iterator(mine.end()));
            mine = std::move(theirs);
        };
        front(metrics, older.metrics);
        front(ranks, older.ranks);
        front(evals, older.evals);
        front(samples, older.samples);
        front(traces, older.traces);
        front(checkpoints, older.checkpoints);
    }
};

struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};

struct BlockId {
    std::int64_t key;
    std::int64_t rank;
    std::int64_t block;
    bool operator==(const BlockId&) const = default;
};

struct BlockIdHash {
    std::size_t operator()(const BlockId& id) const
    {
        return std::hash<std::int64_t>{}((id.key * 1000003 + id.rank) * 1000003 + id.block);
    }
};

std::string multiRowInsert(int rows)
{
    std::string sql = "INSERT INTO metrics (run_id, rank, step, time, key_id, value) VALUES ";
    for (int i = 0; i < rows; ++i)
        sql += i ? ", (?, ?, ?, ?, ?, ?)" : "(?, ?, ?, ?, ?, ?)";
    return sql;
}

} // namespace

struct RunWriter::State {
    std::int64_t runId = 0;
    WriterOptions options;

    // Shared with the callers, under mutex.
    mutable std::mutex mutex;
    std::condition_variable wake; // callers -> thread
    std::condition_variable done; // thread -> callers
    Buffer buffer;
    std::chrono::steady_clock::time_point oldest; // when the buffer stopped being empty
    std::unordered_map<std::string, std::int32_t, StringHash, std::equal_to<>> keyIndex;
    std::vector<std::string> keyNames;
    std::uint64_t requested = 0; // flush generations asked for
    std::uint64_t attempted = 0; // flush generations the thread has tried
    std::optional<Error> attemptError; // of the latest attempt
    std::optional<Error> lastError;
    std::optional<RunEnd> finishRequest;
    // After a failed commit (a full disk), no new attempt before this, unless a caller asks.
    std::chrono::steady_clock::time_point retryAt;
    bool finished = false;
    bool stopping = false;
    std::atomic<std::int64_t> committedRows{0};

    // The thread's own.
    Database db;
    std::vector<std::int64_t> dbKeyIds; // key index -> metric_keys.id
    Statement insertMany, insertOne, upsertBlock, insertKey, selectKey, upsertRank, insertEval, insertSample, insertTrace,
        insertCheckpoint, updateSummary, finishRun, rankExit;
    std::thread thread;

    // Returns true when the buffer was empty: the thread may be in its untimed wait then and must
    // be woken to start the flush interval's clock (else an idle writer commits only on flush()).
    bool markBuffered()
    {
        if (!buffer.empty())
            return false;
        oldest = std::chrono::steady_clock::now();
        return true;
    }
    // Buffers one record (a rank, eval, trace or checkpoint), waking the thread as markBuffered says.
    template <typename Record>
    void append(std::vector<Record>& list, const Record& record)
    {
        bool wasEmpty = false;
        {
            std::lock_guard lock(mutex);
            wasEmpty = markBuffered();
            list.push_back(record);
        }
        if (wasEmpty)
            wake.notify_one();
    }
    Result<void> prepareStatements();
    void run();
    // Commits one batch; `warning` gets a problem that did not stop the commit.
    // lossKey: the key index of "loss" (-1 when none yet), for the run's last_loss.
    Result<void> commit(const Buffer& batch, const std::vector<std::string>& newKeys, std::int32_t lossKey,
                        const std::optional<RunEnd>& end, std::optional<Error>& warning);
};

Result<void> RunWriter::State::prepareStatements()
{
    struct Item {
        Statement* target;
        std::string sql;
    };
    const Item items[] = {
        {&insertMany, multiRowInsert(kRowsPerInsert)},
        {&insertOne, multiRowInsert(1)},
        {&upsertBlock,
         "INSERT INTO metric_blocks (run_id, key_id, rank, block, count, sum_value, min_value, min_step, max_value, "
         "max_step) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) ON CONFLICT (run_id, key_id, rank, block) DO UPDATE "
         "SET count = count + excluded.count, sum_value = sum_value + excluded.sum_value, "
         "min_step = CASE WHEN excluded.min_value IS NOT NULL AND (min_value IS NULL OR excluded.min_value < min_value) "
         "THEN excluded.min_step ELSE min_step END, "
         "min_value = CASE WHEN excluded.min_value IS NOT NULL AND (min_value IS NULL OR excluded.min_value < min_value) "
         "THEN excluded.min_value ELSE min_value END, "
         "max_step = CASE WHEN excluded.max_value IS NOT NULL AND (max_value IS NULL OR excluded.max_value > max_value) "
         "THEN excluded.max_step ELSE max_step END, "
         "max_value = CASE WHEN excluded.max_value IS NOT NULL AND (max_value IS NULL OR excluded.max_value > max_value) "
         "THEN excluded.max_value ELSE max_value END"},
        {&insertKey, "INSERT OR IGNORE INTO metric_keys (name) VALUES (?)"},
        {&selectKey, "SELECT id FROM metric_keys WHERE name = ?"},
        {&upsertRank, kUpsertRank},
        {&insertEval, "INSERT INTO evals (run_id, rank, step, time, name, value) VALUES (?, ?, ?, ?, ?, ?)"},
        {&insertSample, "INSERT INTO eval_samples (run_id, step, time, prompt, text) VALUES (?, ?, ?, ?, ?)"},
        {&insertTrace, "INSERT INTO traces (run_id, rank, time, path, source, compute, comm, memory, idle, overlap) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"},
        {&insertCheckpoint, "INSERT INTO checkpoints (run_id, rank, step, time, path, kind, bytes) "
                            "VALUES (?, ?, ?, ?, ?, ?, ?)"},
        // ?2: the batch's highest step; ?3/?4: the loss at the batch's highest loss step, ?5 = 1 when present.
        {&updateSummary, "UPDATE runs SET last_step = CASE WHEN last_step IS NULL OR ?2 > last_step THEN ?2 ELSE last_step END, "
                         "last_loss = CASE WHEN ?5 = 1 AND (last_step IS NULL OR ?3 >= last_step) THEN ?4 ELSE last_loss END "
                         "WHERE id = ?1"},
        {&finishRun, "UPDATE runs SET status = ?, ended_at = ?, exit_code = ?, root_cause_rank = ?, error = ? "
                     "WHERE id = ? AND status IN ('pending', 'running')"},
        {&rankExit, "INSERT INTO run_ranks (run_id, rank, exit_code) VALUES (?, ?, ?) "
                    "ON CONFLICT (run_id, rank) DO UPDATE SET exit_code = excluded.exit_code"},
    };
    for (const auto& item : items) {
        auto stmt = db.preparePersistent(item.sql);
        if (!stmt)
            return stmt.error();
        *item.target = std::move(*stmt);
    }
    return {};
}

Result<void> RunWriter::State::commit(const Buffer& batch, const std::vector<std::string>& newKeys, std::int32_t lossKey,
                                      const std::optional<RunEnd>& end, std::optional<Error>& warning)
{
    auto tx = Transaction::begin(db);
    if (!tx)
        return tx.error();

    // Key ids become ours only once the transaction commits.
    std::vector<std::int64_t> keyIds = dbKeyIds;
    for (const auto& name : newKeys) {
        insertKey.bind(1, name);
        if (auto rc = insertKey.run(); !rc)
            return rc;
        selectKey.bind(1, name);
        auto row = selectKey.step();
        if (!row)
            return row.error();
        keyIds.push_back(selectKey.int64(0));
        selectKey.reset();
    }

    for (const auto& r : batch.ranks) {
        bindRank(upsertRank, runId, r);
        if (auto rc = upsertRank.run(); !rc)
            return rc;
    }

    // Rows, and the block summaries they change (Note [Metric blocks]).
    std::unordered_map<BlockId, BlockAccumulator, BlockIdHash> blocks;
    std::int64_t maxStep = std::numeric_limits<std::int64_t>::min();
    std::optional<std::pair<std::int64_t, double>> lastLoss; // (step, value)
    const auto& rows = batch.metrics;
    std::size_t i = 0;
    auto bindRow = [&](Statement& stmt, int base, const PendingMetric& m) {
        stmt.bind(base + 1, runId).bind(base + 2, std::int64_t{m.rank}).bind(base + 3, m.step);
        stmt.bind(base + 4, m.time).bind(base + 5, keyIds[std::size_t(m.key)]).bindMeasured(base + 6, m.value);
    };
    for (; i + kRowsPerInsert <= rows.size(); i += kRowsPerInsert) {
        for (int j = 0; j < kRowsPerInsert; ++j)
            bindRow(insertMany, j * kColumnsPerRow, rows[i + std::size_t(j)]);
        if (auto rc = insertMany.run(); !rc)
            return rc;
    }
    for (; i < rows.size(); ++i) {
        bindRow(insertOne, 0, rows[i]);
        if (auto rc = insertOne.run(); !rc)
            return rc;
    }
    for (const auto& m : rows) {
        blocks[{keyIds[std::size_t(m.key)], m.rank, blockOf(m.step)}].add(m.step, m.value);
        maxStep = std::max(maxStep, m.step);
        if (m.key == lossKey && (!lastLoss || m.step >= lastLoss->first))
            lastLoss = std::pair{m.step, m.value};
    }
    for (const auto& [id, acc] : blocks) {
        upsertBlock.bind(1, runId).bind(2, id.key).bind(3, id.rank).bind(4, id.block).bind(5, acc.count);
        upsertBlock.bind(6, acc.sum).bind(7, acc.minValue).bind(8, acc.minStep).bind(9, acc.maxValue);
        upsertBlock.bind(10, acc.maxStep);
        if (auto rc = upsertBlock.run(); !rc)
            return rc;
    }

    for (const auto& e : batch.evals) {
        insertEval.bind(1, runId).bind(2, e.rank).bind(3, e.step).bind(4, e.time).bind(5, e.name).bindMeasured(6, e.value);
        if (auto rc = insertEval.run(); !rc)
            return rc;
    }
    for (const auto& sample : batch.samples) {
        insertSample.bind(1, runId).bind(2, sample.step).bind(3, sample.time).bind(4, sample.prompt).bind(5, sample.text);
        if (auto rc = insertSample.run(); !rc)
            return rc;
    }
    for (const auto& t : batch.traces) {
        insertTrace.bind(1, runId).bind(2, t.rank).bind(3, t.time).bind(4, t.path).bind(5, t.source);
        insertTrace.bind(6, t.compute).bind(7, t.comm).bind(8, t.memory).bind(9, t.idle).bind(10, t.overlap);
        if (auto rc = insertTrace.run(); !rc)
            return rc;
    }
    for (const auto& c : batch.checkpoints) {
        insertCheckpoint.bind(1, runId).bind(2, c.rank).bind(3, c.step).bind(4, c.time).bind(5, c.path);
        insertCheckpoint.bind(6, c.kind).bind(7, c.bytes);
        if (auto rc = insertCheckpoint.run(); !rc)
            return rc;
    }

    if (!rows.empty()) {
        updateSummary.bind(1, runId).bind(2, maxStep);
        updateSummary.bind(3, lastLoss ? lastLoss->first : 0).bindMeasured(4, lastLoss ? lastLoss->second : 0.0);
        updateSummary.bind(5, lastLoss ? 1 : 0);
        if (auto rc = updateSummary.run(); !rc)
            return rc;
    }

    if (end) {
        const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
        finishRun.bind(1, statusName(end->status)).bind(2, now).bind(3, end->exitCode).bind(4, end->rootCauseRank);
        finishRun.bind(5, end->error).bind(6, runId);
        if (auto rc = finishRun.run(); !rc)
            return rc;
        if (db.changes() != 1)
            warning = makeError("run " + std::to_string(runId) + " was no longer pending or running, so its end ("
                                + std::string(statusName(end->status)) + ") was not recorded; its metrics were");
        for (const auto& [rank, code] : end->rankExitCodes) {
            rankExit.bind(1, runId).bind(2, rank).bind(3, code);
            if (auto rc = rankExit.run(); !rc)
                return rc;
        }
    }

    if (auto rc = tx->commit(); !rc)
        return rc;
    dbKeyIds = std::move(keyIds);
    return {};
}

void RunWriter::State::run()
{
    std::unique_lock lock(mutex);
    while (true) {
        auto due = [&] {
            if (requested != attempted)
                return true;
            if (std::chrono::steady_clock::now() < retryAt)
                return false;
            return finishRequest
                   || (!buffer.empty()
                       && (buffer.metrics.size() >= options.maxBufferedRows
                           || std::chrono::steady_clock::now() >= oldest + options.flushInterval));
        };
        while (!stopping && !due()) {
            if (std::chrono::steady_clock::now() < retryAt)
                wake.wait_until(lock, retryAt);
            else if (buffer.empty() && !finishRequest)
                wake.wait(lock);
            else
                wake.wait_until(lock, oldest + options.flushInterval);
        }
        if (stopping && buffer.empty() && !finishRequest) {
            attempted = requested;
            done.notify_all();
            return;
        }

        Buffer batch = std::move(buffer);
        buffer = Buffer();
        const std::uint64_t target = requested;
        const std::optional<RunEnd> end = finishRequest;
        const std::vector<std::string> newKeys(keyNames.begin() + std::ptrdiff_t(dbKeyIds.size()), keyNames.end());
        const auto loss = keyIndex.find(std::string_view(keys::kLoss));
        const std::int32_t lossKey = loss == keyIndex.end() ? -1 : loss->second;
        lock.unlock();

        std::optional<Error> warning;
        auto rc = commit(batch, newKeys, lossKey, end, warning);

        lock.lock();
        attempted = std::max(attempted, target);
        if (!rc) {
            // The rows are not lost: they go back in front of the buffer for the next attempt.
            const Error failed = makeError("committing " + std::to_string(batch.metrics.size()) + " metric rows of run "
                                           + std::to_string(runId) + " failed; they stay buffered and are retried every "
                                           + std::to_string(options.flushInterval.count()) + " ms: " + rc.error().message);
            attemptError = failed;
            lastError = failed;
            buffer.prepend(std::move(batch));
            oldest = std::chrono::steady_clock::now(); // retry after one interval
            retryAt = oldest + options.flushInterval;
        } else {
            attemptError = warning;
            if (warning)
                lastError = warning;
            committedRows += std::int64_t(batch.metrics.size());
            if (end) {
                finished = true;
                finishRequest.reset();
            }
        }
        done.notify_all();
        if (stopping && (!rc || buffer.empty()))
            return;
    }
}

RunWriter::RunWriter(std::unique_ptr<State> state) : m_state(std::move(state)) { }

Result<std::unique_ptr<RunWriter>> RunWriter::open(const std::filesystem::path& databaseFile, std::int64_t runId,
                                                   WriterOptions options)
{
    auto state = std::make_unique<State>();
    state->runId = runId;
    state->options = options;
    auto db = Database::open(databaseFile.string(), OpenMode::ReadWrite, options.busyTimeout);
    if (!db)
        return makeError(db.error().message + " (open it with RunStore first: that creates and upgrades it)");
    state->db = std::move(*db);
    if (auto rc = configureConnection(state->db, false); !rc)
        return rc.error();
    auto version = schemaVersion(state->db);
    if (!version)
        return version.error();
    if (*version != kSchemaVersion)
        return makeError("the run history " + databaseFile.string() + " has schema version " + std::to_string(*version)
                         + ", expected " + std::to_string(kSchemaVersion) + "; open it with RunStore first to upgrade it");
    auto exists = state->db.prepare("SELECT status FROM runs WHERE id = ?");
    if (!exists)
        return exists.error();
    exists->bind(1, runId);
    auto row = exists->step();
    if (!row)
        return row.error();
    if (!*row)
        return makeError("cannot write to run " + std::to_string(runId) + ": it is not in " + databaseFile.string());
    *exists = Statement();
    // The writer checks its references itself: the run exists (above; deleteRun refuses a
    // pending or running run) and key ids come from metric_keys in the same transaction. Letting
    // SQLite re-check two parents for every row costs ~8% of ingestion; tst_storage_multiproc
    // runs foreign_key_check on what the writer left.
    if (auto rc = state->db.exec("PRAGMA foreign_keys=OFF"); !rc)
        return rc.error();
    if (auto rc = state->prepareStatements(); !rc)
        return rc.error();
    State* raw = state.get();
    state->thread = std::thread([raw] { raw->run(); });
    return std::unique_ptr<RunWriter>(new RunWriter(std::move(state)));
}

RunWriter::~RunWriter()
{
    {
        std::lock_guard lock(m_state->mutex);
        m_state->stopping = true;
    }
    m_state->wake.notify_one();
    m_state->thread.join();
}

void RunWriter::addMetrics(int rank, std::int64_t step, double time, std::span<const MetricValue> values)
{
    bool wakeNow = false;
    {
        std::lock_guard lock(m_state->mutex);
        wakeNow = m_state->markBuffered();
        for (const auto& v : values) {
            auto it = m_state->keyIndex.find(v.key);
            if (it == m_state->keyIndex.end()) {
                const auto index = std::int32_t(m_state->keyNames.size());
                m_state->keyNames.emplace_back(v.key);
                it = m_state->keyIndex.emplace(std::string(v.key), index).first;
            }
            m_state->buffer.metrics.push_back({it->second, rank, step, time, v.value});
        }
        wakeNow = wakeNow || m_state->buffer.metrics.size() >= m_state->options.maxBufferedRows;
    }
    if (wakeNow)
        m_state->wake.notify_one();
}

void RunWriter::addRank(const RankInfo& rank) { m_state->append(m_state->buffer.ranks, rank); }

void RunWriter::addEval(const EvalRecord& eval) { m_state->append(m_state->buffer.evals, eval); }

void RunWriter::addEvalSample(const EvalSample& sample) { m_state->append(m_state->buffer.samples, sample); }

void RunWriter::addTrace(const TraceRecord& trace) { m_state->append(m_state->buffer.traces, trace); }

void RunWriter::addCheckpoint(const CheckpointRecord& checkpoint) { m_state->append(m_state->buffer.checkpoints, checkpoint); }

Result<void> RunWriter::flush()
{
    std::unique_lock lock(m_state->mutex);
    return requestCommitAndWait(lock);
}

Result<void> RunWriter::requestCommitAndWait(std::unique_lock<std::mutex>& lock)
{
    const std::uint64_t target = ++m_state->requested;
    m_state->wake.notify_one();
    m_state->done.wait(lock, [&] { return m_state->attempted >= target; });
    if (m_state->attemptError)
        return *m_state->attemptError;
    return {};
}

Result<void> RunWriter::finish(const RunEnd& end)
{
    if (!isTerminal(end.status) || end.status == RunStatus::Interrupted)
        return makeError("a run ends as completed, failed or cancelled, not " + std::string(statusName(end.status)));
    std::unique_lock lock(m_state->mutex);
    if (m_state->finished)
        return makeError("run " + std::to_string(m_state->runId) + " has already been finished by this writer");
    m_state->finishRequest = end;
    return requestCommitAndWait(lock);
}

bool RunWriter::finishedRun() const
{
    std::lock_guard lock(m_state->mutex);
    return m_state->finished;
}

std::optional<Error> RunWriter::lastError() const
{
    std::lock_guard lock(m_state->mutex);
    return m_state->lastError;
}

std::int64_t RunWriter::committedRows() const { return m_state->committedRows.load(); }

std::int64_t RunWriter::runId() const { return m_state->runId; }

} // namespace shardscope::storage
