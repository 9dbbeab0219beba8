// RunStore: opening the history, a run's lifecycle, edits and deletion. Recovery, queries and
// export are in run_recovery.cpp, run_queries.cpp and run_export.cpp.

#include "storage/run_store.h"
#include "storage/run_store_detail.h"

#include "engine/common/run_layout.h"
#include "storage/run_outcome.h"

#include "storage/event_rows.h"
#include "storage/run_writer.h"

#include "storage/config_diff.h"
#include "storage/metric_blocks.h"
#include "storage/metric_keys.h"
#include "storage/schema.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <tuple>
#include <ostream>

namespace shardscope::storage {

using namespace detail;

namespace {

bool isInside(const std::filesystem::path& root, const std::filesystem::path& path)
{
    auto r = root.begin(), p = path.begin();
    for (; r != root.end(); ++r, ++p) {
        if (p == path.end() || *p != *r)
            return false;
    }
    return p != path.end(); // strictly inside, never the root itself
}

} // namespace

Result<RunStore> RunStore::open(const std::filesystem::path& databaseFile, const StoreOptions& options)
{
    auto opened = openAs(databaseFile, options, OpenMode::ReadWriteCreate);
    if (opened || options.readOnly || !options.fallBackToReadOnly)
        return opened;
    // Reading needs no write: a read-only home or a full disk still shows the history, as recorded.
    StoreOptions reading = options;
    reading.readOnly = true;
    auto readOnly = openAs(databaseFile, reading, OpenMode::ReadOnly);
    if (!readOnly) // a WAL file in a folder we cannot write, without its -shm: read the file as it is
        readOnly = openAs(databaseFile, reading, OpenMode::Immutable);
    if (!readOnly)
        return opened.error();
    readOnly->m_warnings.push_back("the run history " + databaseFile.string() + " cannot be written (" + opened.error().message
                                   + "); it is shown read-only, and runs whose launcher stopped are shown as last recorded");
    return readOnly;
}

Result<RunStore> RunStore::openAs(const std::filesystem::path& databaseFile, const StoreOptions& options, OpenMode mode)
{
    std::error_code ec;
    if (!options.readOnly && databaseFile.has_parent_path())
        std::filesystem::create_directories(databaseFile.parent_path(), ec);
    auto db = Database::open(databaseFile.string(),
                             options.readOnly && mode == OpenMode::ReadWriteCreate ? OpenMode::ReadOnly : mode,
                             options.busyTimeout);
    if (!db)
        return db.error();
    if (auto rc = configureConnection(*db, options.readOnly); !rc)
        return makeError("cannot use the run history " + databaseFile.string() + ": " + rc.error().message);
    if (options.readOnly) {
        auto version = schemaVersion(*db);
        if (!version)
            return version.error();
        if (*version != kSchemaVersion)
            return makeError("the run history " + databaseFile.string() + " has schema version " + std::to_string(*version)
                             + " but this Shardscope reads version " + std::to_string(kSchemaVersion)
                             + "; open it once read-write to upgrade it");
    } else if (auto rc = migrate(*db); !rc) {
        return rc.error();
    }

    auto runsRoot = options.runsRoot.empty() ? databaseFile.parent_path() / "runs" : options.runsRoot;
    RunStore store(std::move(*db), std::move(runsRoot));
    if (!options.readOnly && options.markInterrupted) {
        // A failure here (a full disk) costs the recovery of dead runs, not the history: it is
        // tried again at the next open.
        if (auto marked = store.markInterruptedRuns(); !marked)
            store.m_warnings.push_back("runs whose launcher stopped could not be recorded as ended yet: "
                                       + marked.error().message);
    }
    return store;
}

Result<Statement> RunStore::runRow(std::string_view sql, std::int64_t runId) const
{
    auto stmt = m_db.prepare(sql);
    if (!stmt)
        return stmt.error();
    stmt->bind(1, runId);
    auto row = stmt->step();
    if (!row)
        return row.error();
    if (!*row)
        return makeError("no " + runLabel(runId) + " in " + m_db.path() + "; `shardscope runs list` shows the runs");
    return std::move(*stmt);
}

Result<RunStatus> RunStore::statusOf(std::int64_t runId) const
{
    auto stmt = runRow("SELECT status FROM runs WHERE id = ?", runId);
    if (!stmt)
        return stmt.error();
    return parseRunStatus(stmt->text(0)).value_or(RunStatus::Pending);
}

Result<std::int64_t> RunStore::keyId(const std::string& key) const
{
    auto stmt = m_db.prepare("SELECT id FROM metric_keys WHERE name = ?");
    if (!stmt)
        return stmt.error();
    stmt->bind(1, key);
    auto row = stmt->step();
    if (!row)
        return row.error();
    return *row ? stmt->int64(0) : 0;
}

Result<std::int64_t> RunStore::createRun(const NewRun& run)
{
    const LauncherIdentity launcher = run.launcher.value_or(LauncherIdentity::current());
    auto tx = Transaction::begin(m_db);
    if (!tx)
        return tx.error();
    auto insert = m_db.prepare("INSERT INTO runs (name, status, created_at, host, world_size, distributed_type, mixed_precision, "
                               "config_text, recipe_text, run_dir, notes, launcher_pid, launcher_host, launcher_boot_id, "
                               "launcher_start_ticks) VALUES (?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    if (!insert)
        return insert.error();
    insert->bind(1, run.name).bind(2, run.createdAt.value_or(now())).bind(3, launcher.host).bind(4, run.worldSize);
    insert->bind(5, run.distributedType).bind(6, run.mixedPrecision).bind(7, run.configText);
    insert->bind(8, run.recipeText).bind(9, run.runDir).bind(10, run.notes).bind(11, launcher.pid);
    insert->bind(12, launcher.host).bind(13, launcher.bootId).bind(14, launcher.startTicks);
    if (auto rc = insert->run(); !rc)
        return rc.error();
    const std::int64_t id = m_db.lastInsertId();
    auto tag = m_db.prepare("INSERT OR IGNORE INTO run_tags (run_id, tag) VALUES (?, ?)");
    if (!tag)
        return tag.error();
    for (const auto& name : run.tags) {
        tag->bind(1, id).bind(2, name);
        if (auto rc = tag->run(); !rc)
            return rc.error();
    }
    if (auto rc = tx->commit(); !rc)
        return rc.error();
    return id;
}

Result<void> RunStore::markRunning(std::int64_t runId, std::optional<double> at)
{
    auto update = m_db.prepare("UPDATE runs SET status = 'running', started_at = ? WHERE id = ? AND status = 'pending'");
    if (!update)
        return update.error();
    update->bind(1, at.value_or(now())).bind(2, runId);
    if (auto rc = update->run(); !rc)
        return rc;
    if (m_db.changes() == 1)
        return {};
    auto status = statusOf(runId);
    if (!status)
        return status.error();
    return makeError("cannot start " + runLabel(runId) + ": it is " + std::string(statusName(*status))
                     + " (only a pending run can start)");
}

Result<void> RunStore::finishRun(std::int64_t runId, const RunEnd& end, std::optional<double> endedAt)
{
    if (!isTerminal(end.status) || end.status == RunStatus::Interrupted)
        return makeError("a run ends as completed, failed or cancelled, not " + std::string(statusName(end.status)));
    auto tx = Transaction::begin(m_db);
    if (!tx)
        return tx.error();
    auto update = m_db.prepare("UPDATE runs SET status = ?, ended_at = ?, exit_code = ?, root_cause_rank = ?, "
                               "error = ? WHERE id = ? AND status IN ('pending', 'running')");
    if (!update)
        return update.error();
    update->bind(1, statusName(end.status)).bind(2, endedAt.value_or(now())).bind(3, end.exitCode).bind(4, end.rootCauseRank);
    update->bind(5, end.error).bind(6, runId);
    if (auto rc = update->run(); !rc)
        return rc;
    if (m_db.changes() != 1) {
        auto status = statusOf(runId);
        if (!status)
            return status.error();
        return makeError("cannot end " + runLabel(runId) + " as " + std::string(statusName(end.status)) + ": it is already "
                         + std::string(statusName(*status)));
    }
    auto rank = m_db.prepare("INSERT INTO run_ranks (run_id, rank, exit_code) VALUES (?, ?, ?) "
                             "ON CONFLICT (run_id, rank) DO UPDATE SET exit_code = excluded.exit_code");
    if (!rank)
        return rank.error();
    for (const auto& [r, code] : end.rankExitCodes) {
        rank->bind(1, runId).bind(2, r).bind(3, code);
        if (auto rc = rank->run(); !rc)
            return rc;
    }
    return tx->commit();
}

Result<void> RunStore::recordRank(std::int64_t runId, const RankInfo& rank)
{
    auto upsert = m_db.prepare(kUpsertRank);
    if (!upsert)
        return upsert.error();
    bindRank(*upsert, runId, rank);
    return upsert->run();
}

Result<void> RunStore::setJob(std::int64_t runId, const std::string& job)
{
    return updateRunText(runId, "UPDATE runs SET job = ? WHERE id = ?", job);
}

Result<void> RunStore::setStatusDetail(std::int64_t runId, const std::string& detail)
{
    return updateRunText(runId, "UPDATE runs SET status_detail = ? WHERE id = ?", detail);
}

Result<void> RunStore::adoptRun(std::int64_t runId, const LauncherIdentity& launcher)
{
    auto update = m_db.prepare("UPDATE runs SET launcher_pid = ?, launcher_host = ?, launcher_boot_id = ?, "
                               "launcher_start_ticks = ? WHERE id = ? AND status IN ('pending', 'running')");
    if (!update)
        return update.error();
    update->bind(1, launcher.pid).bind(2, launcher.host).bind(3, launcher.bootId).bind(4, launcher.startTicks).bind(5, runId);
    return update->run();
}

Result<void> RunStore::recordAttempt(std::int64_t runId, const RunAttempt& a)
{
    auto upsert = m_db.prepare("INSERT OR REPLACE INTO run_attempts (run_id, attempt, job_id, nodes, started_at, ended_at, "
                               "exit_code, resumed_step, resumed_from, lost_nodes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    if (!upsert)
        return upsert.error();
    upsert->bind(1, runId).bind(2, a.attempt).bind(3, a.jobId).bind(4, a.nodes).bind(5, a.startedAt).bind(6, a.endedAt);
    upsert->bind(7, a.exitCode).bind(8, a.resumedStep).bind(9, a.resumedFrom).bind(10, a.lostNodes);
    return upsert->run();
}

namespace {

// The block summaries of one run from block `from` on, again from the rows left (after rows were
// deleted: Note [Metric blocks]).
Result<void> rebuildBlocksFrom(Database& db, std::int64_t runId, std::int64_t from)
{
    auto clear = db.prepare("DELETE FROM metric_blocks WHERE run_id = ? AND block >= ?");
    auto read = db.prepare("SELECT key_id, rank, step, value FROM metrics WHERE run_id = ? AND step >= ? "
                           "ORDER BY key_id, rank, step");
    auto write = db.prepare("INSERT INTO metric_blocks (run_id, key_id, rank, block, count, sum_value, min_value, min_step, "
                            "max_value, max_step) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    for (auto* stmt : {&clear, &read, &write})
        if (!*stmt)
            return stmt->error();
    clear->bind(1, runId).bind(2, from);
    if (auto rc = clear->run(); !rc)
        return rc;
    std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, BlockAccumulator> blocks;
    read->bind(1, runId).bind(2, from * kBlockSteps);
    if (auto rc = forEachRow(
            *read,
            [&](const Statement& r) {
                blocks[{r.int64(0), r.int64(1), blockOf(r.int64(2))}].add(r.int64(2), r.isNull(3) ? NAN : r.real(3));
            });
        !rc)
        return rc;
    for (const auto& [key, acc] : blocks) {
        write->bind(1, runId).bind(2, std::get<0>(key)).bind(3, std::get<1>(key)).bind(4, std::get<2>(key));
        write->bind(5, acc.count).bind(6, acc.sum).bind(7, acc.minValue).bind(8, acc.minStep);
        write->bind(9, acc.maxValue).bind(10, acc.maxStep);
        if (auto rc = write->run(); !rc)
            return rc;
    }
    return {};
}

} // namespace

Result<void> RunStore::continueRun(std::int64_t runId, const RunAttempt& attempt, const LauncherIdentity& launcher)
{
    auto status = statusOf(runId);
    if (!status)
        return status.error();
    if (!isTerminal(*status))
        return makeError(runLabel(runId) + " is " + std::string(statusName(*status))
                         + ": only a run that has ended can go on from a checkpoint");
    auto tx = Transaction::begin(m_db);
    if (!tx)
        return tx.error();
    // The first launch as attempt 0, from the run's own times, when no attempt is recorded yet.
    auto first = m_db.prepare("INSERT OR IGNORE INTO run_attempts (run_id, attempt, started_at, ended_at, exit_code) "
                              "SELECT id, 0, started_at, ended_at, exit_code FROM runs WHERE id = ?");
    if (!first)
        return first.error();
    first->bind(1, runId);
    if (auto rc = first->run(); !rc)
        return rc;
    for (const char* sql :
         {"DELETE FROM metrics WHERE run_id = ? AND step > ?", "DELETE FROM evals WHERE run_id = ? AND step > ?",
          "DELETE FROM eval_samples WHERE run_id = ? AND step > ?", "DELETE FROM checkpoints WHERE run_id = ? AND step > ?"}) {
        auto redone = m_db.prepare(sql);
        if (!redone)
            return redone.error();
        redone->bind(1, runId).bind(2, attempt.resumedStep);
        if (auto rc = redone->run(); !rc)
            return rc;
    }
    if (auto rc = rebuildBlocksFrom(m_db, runId, blockOf(attempt.resumedStep + 1)); !rc)
        return rc;
    auto reopen = m_db.prepare(
        "UPDATE runs SET status = 'running', ended_at = NULL, exit_code = NULL, root_cause_rank = NULL, error = '', "
        "last_step = (SELECT MAX(step) FROM metrics WHERE run_id = ?1), "
        "last_loss = (SELECT m.value FROM metrics m JOIN metric_keys k ON k.id = m.key_id WHERE m.run_id = ?1 "
        "AND k.name = 'loss' ORDER BY m.step DESC, m.rank LIMIT 1), "
        "launcher_pid = ?2, launcher_host = ?3, launcher_boot_id = ?4, launcher_start_ticks = ?5 WHERE id = ?1");
    if (!reopen)
        return reopen.error();
    reopen->bind(1, runId).bind(2, launcher.pid).bind(3, launcher.host).bind(4, launcher.bootId).bind(5, launcher.startTicks);
    if (auto rc = reopen->run(); !rc)
        return rc;
    if (auto rc = recordAttempt(runId, attempt); !rc)
        return rc;
    return tx->commit();
}

Result<void> RunStore::setTags(std::int64_t runId, const std::vector<std::string>& tags)
{
    if (auto status = statusOf(runId); !status)
        return status.error();
    auto tx = Transaction::begin(m_db);
    if (!tx)
        return tx.error();
    auto clear = m_db.prepare("DELETE FROM run_tags WHERE run_id = ?");
    auto add = m_db.prepare("INSERT OR IGNORE INTO run_tags (run_id, tag) VALUES (?, ?)");
    if (!clear)
        return clear.error();
    if (!add)
        return add.error();
    clear->bind(1, runId);
    if (auto rc = clear->run(); !rc)
        return rc;
    for (const auto& tag : tags) {
        add->bind(1, runId).bind(2, tag);
        if (auto rc = add->run(); !rc)
            return rc;
    }
    return tx->commit();
}

Result<void> RunStore::updateRunText(std::int64_t runId, const char* sql, const std::string& value)
{
    if (auto status = statusOf(runId); !status)
        return status.error(); // no such run
    auto update = m_db.prepare(sql);
    if (!update)
        return update.error();
    update->bind(1, value).bind(2, runId);
    return update->run();
}

Result<void> RunStore::setNotes(std::int64_t runId, const std::string& notes)
{
    return updateRunText(runId, "UPDATE runs SET notes = ? WHERE id = ?", notes);
}

Result<void> RunStore::renameRun(std::int64_t runId, const std::string& name)
{
    const auto first = name.find_first_not_of(" \t\n");
    if (first == std::string::npos)
        return makeError("a run's name cannot be empty; type a name");
    const std::string trimmed = name.substr(first, name.find_last_not_of(" \t\n") - first + 1);
    return updateRunText(runId, "UPDATE runs SET name = ? WHERE id = ?", trimmed);
}

Result<void> RunStore::setRunColor(std::int64_t runId, const std::string& color)
{
    std::string stored = color;
    const bool hex = stored.size() == 7 && stored[0] == '#'
                     && std::all_of(stored.begin() + 1, stored.end(), [](unsigned char c) { return std::isxdigit(c) != 0; });
    if (!stored.empty() && !hex)
        return makeError("a run's colour is written #rrggbb (six hex digits, e.g. #1f77b4), not \"" + color
                         + "\"; leave it empty for the default colour");
    std::transform(stored.begin(), stored.end(), stored.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return updateRunText(runId, "UPDATE runs SET color = ? WHERE id = ?", stored);
}

Result<void> RunStore::deleteRun(std::int64_t runId, bool removeDirectory)
{
    auto details = run(runId);
    if (!details)
        return details.error();
    if (!isTerminal(details->summary.status))
        return makeError("cannot delete " + runLabel(runId) + ": it is " + std::string(statusName(details->summary.status))
                         + "; stop it first (or, if its launcher is gone, open the store again to mark it interrupted)");

    // Validate the directory before touching any row, so a refused delete changes nothing.
    std::filesystem::path directory;
    if (removeDirectory && !details->summary.runDir.empty()) {
        std::error_code ec;
        const auto root = std::filesystem::weakly_canonical(m_runsRoot, ec);
        // weakly_canonical resolves symlinks and "..": a link inside the root that points out
        // of it is outside.
        // A relative run directory is relative to the Shardscope home (the runs folder's parent).
        std::filesystem::path stored = details->summary.runDir;
        if (stored.is_relative())
            stored = m_runsRoot.parent_path() / stored;
        directory = std::filesystem::weakly_canonical(stored, ec);
        if (ec || !isInside(root, directory))
            return makeError("refusing to delete the directory of " + runLabel(runId) + ": " + details->summary.runDir
                             + " is not inside the runs folder " + m_runsRoot.string()
                             + "; delete only its rows with --keep-files, and the folder by hand");
    }

    auto tx = Transaction::begin(m_db);
    if (!tx)
        return tx.error();
    for (const char* sql :
         {"DELETE FROM metrics WHERE run_id = ?", "DELETE FROM metric_blocks WHERE run_id = ?",
          "DELETE FROM evals WHERE run_id = ?", "DELETE FROM eval_samples WHERE run_id = ?",
          "DELETE FROM traces WHERE run_id = ?", "DELETE FROM checkpoints WHERE run_id = ?",
          "DELETE FROM run_ranks WHERE run_id = ?", "DELETE FROM run_tags WHERE run_id = ?", "DELETE FROM runs WHERE id = ?"}) {
        auto stmt = m_db.prepare(sql);
        if (!stmt)
            return stmt.error();
        stmt->bind(1, runId);
        if (auto rc = stmt->run(); !rc)
            return rc;
    }
    if (auto rc = tx->commit(); !rc)
        return rc;

    if (!directory.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(directory, ec);
        if (ec)
            return makeError("deleted the rows of " + runLabel(runId) + " but not its directory " + directory.string() + ": "
                             + ec.message() + "; remove it by hand");
    }
    return {};
}

} // namespace shardscope::storage
