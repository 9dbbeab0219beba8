#include "storage/schema.h"

#include "storage/metric_blocks.h"

#include <chrono>
#include <filesystem>
#include <map>
#include <thread>
#include <tuple>

namespace shardscope::storage {

namespace {

// Version 1. Kept byte for byte as it shipped: tests/storage/fixtures/history_v1.sql repeats it
// and tst_storage_schema checks that both produce the same schema.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled', 'interrupted')),
    created_at REAL NOT NULL,
    started_at REAL,
    ended_at REAL,
    host TEXT NOT NULL DEFAULT '',
    world_size INTEGER NOT NULL DEFAULT 1,
    distributed_type TEXT NOT NULL DEFAULT '',
    mixed_precision TEXT NOT NULL DEFAULT '',
    config_text TEXT NOT NULL DEFAULT '',
    recipe_text TEXT NOT NULL DEFAULT '',
    run_dir TEXT NOT NULL DEFAULT '',
    exit_code INTEGER,
    root_cause_rank INTEGER,
    error TEXT NOT NULL DEFAULT '',
    notes TEXT NOT NULL DEFAULT '',
    launcher_pid INTEGER,
    launcher_host TEXT NOT NULL DEFAULT '',
    launcher_boot_id TEXT NOT NULL DEFAULT '',
    launcher_start_ticks INTEGER,
    last_step INTEGER,
    last_loss REAL
);
CREATE INDEX runs_by_created ON runs(created_at);
CREATE INDEX runs_by_status ON runs(status, created_at);

CREATE TABLE run_tags (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    tag TEXT NOT NULL,
    PRIMARY KEY (run_id, tag)
) WITHOUT ROWID;
CREATE INDEX run_tags_by_tag ON run_tags(tag, run_id);

CREATE TABLE run_ranks (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    rank INTEGER NOT NULL,
    pid INTEGER,
    host TEXT NOT NULL DEFAULT '',
    device TEXT NOT NULL DEFAULT '',
    torch_version TEXT NOT NULL DEFAULT '',
    local_rank INTEGER NOT NULL DEFAULT 0,
    machine_rank INTEGER NOT NULL DEFAULT 0,
    exit_code INTEGER,
    PRIMARY KEY (run_id, rank)
) WITHOUT ROWID;

CREATE TABLE metric_keys (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);

CREATE TABLE metrics (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    rank INTEGER NOT NULL,
    step INTEGER NOT NULL,
    time REAL NOT NULL,
    key_id INTEGER NOT NULL REFERENCES metric_keys(id),
    value REAL
);
CREATE INDEX metrics_by_series ON metrics(run_id, key_id, rank, step);

CREATE TABLE evals (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    rank INTEGER NOT NULL,
    step INTEGER NOT NULL,
    time REAL NOT NULL,
    name TEXT NOT NULL,
    value REAL
);
CREATE INDEX evals_by_run ON evals(run_id, name, rank, step);

CREATE TABLE traces (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    rank INTEGER NOT NULL,
    time REAL NOT NULL,
    path TEXT NOT NULL,
    source TEXT NOT NULL,
    compute REAL, comm REAL, memory REAL, idle REAL, overlap REAL
);
CREATE INDEX traces_by_run ON traces(run_id, rank);

CREATE TABLE checkpoints (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    rank INTEGER NOT NULL,
    step INTEGER NOT NULL,
    time REAL NOT NULL,
    path TEXT NOT NULL,
    kind TEXT NOT NULL,
    bytes INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX checkpoints_by_run ON checkpoints(run_id, step);
)sql";

constexpr const char* kSchemaV2 = R"sql(
CREATE TABLE metric_blocks (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    key_id INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    block INTEGER NOT NULL,
    count INTEGER NOT NULL,
    sum_value REAL NOT NULL,
    min_value REAL,
    min_step INTEGER NOT NULL,
    max_value REAL,
    max_step INTEGER NOT NULL,
    PRIMARY KEY (run_id, key_id, rank, block)
) WITHOUT ROWID;
)sql";

constexpr const char* kSchemaV3 = "ALTER TABLE runs ADD COLUMN color TEXT NOT NULL DEFAULT '';";

// v4: a run on a cluster: its job ("slurm:123") and what the scheduler says of it while it waits
// ("Resources: the nodes it asks for are busy; ..."), and its attempts when the job was requeued
// (one row each; none for a local run).
constexpr const char* kSchemaV4 = R"sql(
ALTER TABLE runs ADD COLUMN job TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN status_detail TEXT NOT NULL DEFAULT '';
CREATE TABLE run_attempts (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    attempt INTEGER NOT NULL,
    job_id TEXT NOT NULL DEFAULT '',
    nodes TEXT NOT NULL DEFAULT '',
    started_at REAL,
    ended_at REAL,
    exit_code INTEGER,
    resumed_step INTEGER NOT NULL DEFAULT 0,
    resumed_from TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, attempt)
) WITHOUT ROWID;
)sql";

constexpr const char* kSchemaV5 = R"sql(
ALTER TABLE run_ranks ADD COLUMN peak_flops REAL;
ALTER TABLE run_ranks ADD COLUMN peak_dtype TEXT NOT NULL DEFAULT '';
ALTER TABLE run_ranks ADD COLUMN peak_source TEXT NOT NULL DEFAULT '';
ALTER TABLE run_ranks ADD COLUMN precision_emulated INTEGER NOT NULL DEFAULT 0;
)sql";

constexpr const char* kSchemaV6 = R"sql(
CREATE TABLE eval_samples (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    step INTEGER NOT NULL,
    time REAL NOT NULL,
    prompt TEXT NOT NULL,
    text TEXT NOT NULL
);
CREATE INDEX eval_samples_by_run ON eval_samples(run_id, id);
)sql";

// v7: the nodes SLURM lost while an attempt ran (a requeue after a node failure names them).
constexpr const char* kSchemaV7 = R"sql(
ALTER TABLE run_attempts ADD COLUMN lost_nodes TEXT NOT NULL DEFAULT '';
)sql";

// v2 backfills the blocks of the series v1 stored, with the accumulator the writer uses.
Result<void> backfillBlocks(Database& db)
{
    auto read = db.prepare("SELECT run_id, key_id, rank, step, value FROM metrics "
                           "ORDER BY run_id, key_id, rank, step");
    auto write = db.prepare("INSERT INTO metric_blocks (run_id, key_id, rank, block, count, sum_value, "
                            "min_value, min_step, max_value, max_step) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    if (!read)
        return read.error();
    if (!write)
        return write.error();
    using BlockKey = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>;
    std::map<BlockKey, BlockAccumulator> blocks;
    auto flushBlocks = [&]() -> Result<void> {
        for (const auto& [key, acc] : blocks) {
            write->bind(1, std::get<0>(key)).bind(2, std::get<1>(key)).bind(3, std::get<2>(key));
            write->bind(4, std::get<3>(key)).bind(5, acc.count).bind(6, acc.sum);
            write->bind(7, acc.minValue).bind(8, acc.minStep).bind(9, acc.maxValue).bind(10, acc.maxStep);
            if (auto rc = write->run(); !rc)
                return rc;
        }
        blocks.clear();
        return {};
    };
    while (true) {
        auto row = read->step();
        if (!row)
            return row.error();
        if (!*row)
            break;
        const std::int64_t step = read->int64(3);
        blocks[{read->int64(0), read->int64(1), read->int64(2), blockOf(step)}].add(step, read->real(4));
        if (blocks.size() >= 4096) {
            if (auto rc = flushBlocks(); !rc)
                return rc;
        }
    }
    return flushBlocks();
}

Result<void> applyStep(Database& db, int version)
{
    switch (version) {
    case 1:
        return db.exec(kSchemaV1);
    case 2:
        if (auto rc = db.exec(kSchemaV2); !rc)
            return rc;
        return backfillBlocks(db);
    case 3:
        return db.exec(kSchemaV3);
    case 4:
        return db.exec(kSchemaV4);
    case 5:
        return db.exec(kSchemaV5);
    case 6:
        return db.exec(kSchemaV6);
    case 7:
        return db.exec(kSchemaV7);
    default:
        return makeError("internal error: no migration to schema version " + std::to_string(version));
    }
}

} // namespace

Result<int> schemaVersion(const Database& db)
{
    auto version = db.queryInt("PRAGMA user_version");
    if (!version)
        return version.error();
    return int(*version);
}

namespace {

// Read the journal mode before setting it: switching needs an exclusive lock, and a reader must
// not take one while a writer is busy (it would wait, and could make the writer wait).
Result<void> switchToWal(Database& db, bool readOnly)
{
    auto mode = db.prepare("PRAGMA journal_mode");
    if (!mode)
        return mode.error();
    auto row = mode->step();
    if (!row)
        return makeError(row.error().message + " (is this file a SQLite database?)");
    const std::string current = *row ? mode->text(0) : std::string();
    mode = Statement();
    if (current != "wal" && !readOnly)
        return db.exec("PRAGMA journal_mode=WAL");
    return {};
}

} // namespace

Result<void> configureConnection(Database& db, bool readOnly)
{
    // Two processes that create the history at once (two launches into a new home) race for the
    // switch to WAL, for which SQLite does not call the busy handler: "database is locked" at
    // once, and one run went unrecorded (#43 point 7). The switch is tried again for a while.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (true) {
        auto switched = switchToWal(db, readOnly);
        if (switched)
            break;
        if (switched.error().message.find("another process holds the database lock") == std::string::npos
            || std::chrono::steady_clock::now() > deadline)
            return switched;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    // synchronous=NORMAL in WAL mode: a committed transaction survives the death of any process
    // (tested with SIGKILL); only a power cut can lose the last commits, never corrupt the file.
    return db.exec("PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL; PRAGMA temp_store=MEMORY; "
                   "PRAGMA cache_size=-32768;");
}

void bindRank(Statement& upsert, std::int64_t runId, const RankInfo& r)
{
    upsert.bind(1, runId).bind(2, r.rank).bind(3, r.pid).bind(4, r.host).bind(5, r.device);
    upsert.bind(6, r.torchVersion).bind(7, r.localRank).bind(8, r.machineRank);
    if (r.peakFlops)
        upsert.bind(9, *r.peakFlops);
    else
        upsert.bindNull(9);
    upsert.bind(10, r.peakDtype).bind(11, r.peakSource).bind(12, std::int64_t(r.precisionEmulated ? 1 : 0));
}

Result<void> migrate(Database& db, int targetVersion)
{
    auto before = schemaVersion(db);
    if (!before)
        return before.error();
    if (*before > kSchemaVersion)
        return makeError("the run history " + db.path() + " has schema version " + std::to_string(*before)
                         + ", newer than this Shardscope knows (" + std::to_string(kSchemaVersion)
                         + "); use a newer shardscope, or point SHARDSCOPE_HOME at another folder");
    if (*before >= targetVersion)
        return {};

    if (*before >= 1) {
        // See the header: keep the old file before changing it.
        const std::string backup = db.path() + ".v" + std::to_string(*before) + ".bak";
        std::error_code ec;
        std::filesystem::remove(backup, ec);
        auto vacuum = db.prepare("VACUUM INTO ?");
        if (!vacuum)
            return vacuum.error();
        vacuum->bind(1, backup);
        if (auto rc = vacuum->run(); !rc)
            return makeError(rc.error().message + " (could not back up the run history before upgrading it)");
    }

    auto tx = Transaction::begin(db);
    if (!tx)
        return tx.error();
    // Another process may have migrated while this one waited for the lock.
    auto version = schemaVersion(db);
    if (!version)
        return version.error();
    for (int next = *version + 1; next <= targetVersion; ++next) {
        if (auto rc = applyStep(db, next); !rc)
            return makeError("upgrading the run history " + db.path() + " to schema version " + std::to_string(next)
                             + " failed: " + rc.error().message);
    }
    // PRAGMA takes no parameters; the value is our own integer, not user input.
    if (*version < targetVersion) {
        if (auto rc = db.exec("PRAGMA user_version=" + std::to_string(targetVersion)); !rc)
            return rc;
    }
    return tx->commit();
}

} // namespace shardscope::storage
