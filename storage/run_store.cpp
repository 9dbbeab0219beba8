#include "storage/run_store.h"

#include "engine/common/run_layout.h"
#include "storage/run_outcome.h"

#include "storage/event_rows.h"
#include "storage/run_writer.h"

#include "storage/config_diff.h"
#include "storage/metric_blocks.h"
#include "storage/metric_keys.h"
#include "storage/schema.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <ostream>

namespace shardscope::storage {

namespace {

double now()
{
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string runLabel(std::int64_t runId)
{
    return "run " + std::to_string(runId);
}

std::optional<double> optionalReal(const Statement& stmt, int column)
{
    if (stmt.isNull(column))
        return std::nullopt;
    return stmt.real(column);
}

std::optional<int> optionalInt(const Statement& stmt, int column)
{
    if (stmt.isNull(column))
        return std::nullopt;
    return int(stmt.int64(column));
}

// Runs a query to its end, calling onRow for each row.
template <typename OnRow>
Result<void> forEachRow(Statement& stmt, OnRow&& onRow)
{
    while (true) {
        auto row = stmt.step();
        if (!row)
            return row.error();
        if (!*row)
            return {};
        onRow(stmt);
    }
}

std::vector<std::string> splitTags(const std::string& joined)
{
    std::vector<std::string> tags;
    if (joined.empty())
        return tags;
    std::size_t start = 0;
    while (true) {
        const auto end = joined.find('\x1f', start);
        tags.push_back(joined.substr(start, end == std::string::npos ? std::string::npos : end - start));
        if (end == std::string::npos)
            return tags;
        start = end + 1;
    }
}

std::string likePattern(const std::string& text)
{
    std::string pattern = "%";
    for (char c : text) {
        if (c == '%' || c == '_' || c == '\\')
            pattern += '\\';
        pattern += c;
    }
    return pattern + "%";
}

bool isInside(const std::filesystem::path& root, const std::filesystem::path& path)
{
    auto r = root.begin(), p = path.begin();
    for (; r != root.end(); ++r, ++p) {
        if (p == path.end() || *p != *r)
            return false;
    }
    return p != path.end(); // strictly inside, never the root itself
}

// Shortest text that reads back as the same double.
std::string formatNumber(double value)
{
    char buffer[32];
    auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
    return std::string(buffer, end);
}

std::string jsonString(std::string_view text)
{
    std::string out = "\"";
    for (unsigned char c : text) {
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
            if (c < 0x20) {
                char buffer[8];
                std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
                out += buffer;
            } else {
                out += char(c);
            }
        }
    }
    return out + "\"";
}

std::string jsonNumber(double value)
{
    return std::isfinite(value) ? formatNumber(value) : "null";
}

template <typename T>
std::string jsonOptional(const std::optional<T>& value)
{
    if (!value)
        return "null";
    if constexpr (std::is_floating_point_v<T>)
        return jsonNumber(*value);
    else
        return std::to_string(*value);
}

std::string csvField(std::string_view text)
{
    if (text.find_first_of(",\"\n") == std::string_view::npos)
        return std::string(text);
    std::string out = "\"";
    for (char c : text) {
        if (c == '"')
            out += '"';
        out += c;
    }
    return out + "\"";
}

constexpr const char* kSummaryColumns =
    "r.id, r.name, r.status, r.created_at, r.started_at, r.ended_at, r.host, r.world_size, r.distributed_type, "
    "r.mixed_precision, r.last_step, r.last_loss, r.run_dir, "
    "(SELECT group_concat(t.tag, char(31)) FROM run_tags t WHERE t.run_id = r.id)";

RunSummary readSummary(const Statement& s)
{
    RunSummary run;
    run.id = s.int64(0);
    run.name = s.text(1);
    run.status = parseRunStatus(s.text(2)).value_or(RunStatus::Pending);
    run.createdAt = s.real(3);
    run.startedAt = optionalReal(s, 4);
    run.endedAt = optionalReal(s, 5);
    run.host = s.text(6);
    run.worldSize = int(s.int64(7));
    run.distributedType = s.text(8);
    run.mixedPrecision = s.text(9);
    run.lastStep = s.optionalInt64(10);
    run.lastLoss = optionalReal(s, 11);
    run.runDir = s.text(12);
    run.tags = splitTags(s.text(13));
    return run;
}

} // namespace

Result<RunStore> RunStore::open(const std::filesystem::path& databaseFile, StoreOptions options)
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
    auto db = Database::open(databaseFile.string(), options.readOnly && mode == OpenMode::ReadWriteCreate ? OpenMode::ReadOnly : mode,
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
            return makeError("the run history " + databaseFile.string() + " has schema version " +
                             std::to_string(*version) + " but this Shardscope reads version " +
                             std::to_string(kSchemaVersion) + "; open it once read-write to upgrade it");
    } else if (auto rc = migrate(*db); !rc) {
        return rc.error();
    }

    auto runsRoot = options.runsRoot.empty() ? databaseFile.parent_path() / "runs" : options.runsRoot;
    RunStore store(std::move(*db), std::move(runsRoot));
    if (!options.readOnly && options.markInterrupted) {
        // A failure here (a full disk) costs the recovery of dead runs, not the history: it is
        // tried again at the next open.
        if (auto marked = store.markInterruptedRuns(); !marked)
            store.m_warnings.push_back("runs whose launcher stopped could not be recorded as ended yet: " + marked.error().message);
    }
    return store;
}

Result<RunStatus> RunStore::statusOf(std::int64_t runId) const
{
    auto stmt = m_db.prepare("SELECT status FROM runs WHERE id = ?");
    if (!stmt)
        return stmt.error();
    stmt->bind(1, runId);
    auto row = stmt->step();
    if (!row)
        return row.error();
    if (!*row)
        return makeError("no " + runLabel(runId) + " in " + m_db.path() + "; `shardscope runs list` shows the runs");
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
    auto insert = m_db.prepare(
        "INSERT INTO runs (name, status, created_at, host, world_size, distributed_type, mixed_precision, "
        "config_text, recipe_text, run_dir, notes, launcher_pid, launcher_host, launcher_boot_id, "
        "launcher_start_ticks) VALUES (?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    if (!insert)
        return insert.error();
    insert->bind(1, run.name).bind(2, now()).bind(3, launcher.host).bind(4, run.worldSize);
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

Result<void> RunStore::markRunning(std::int64_t runId)
{
    auto update = m_db.prepare("UPDATE runs SET status = 'running', started_at = ? WHERE id = ? AND status = 'pending'");
    if (!update)
        return update.error();
    update->bind(1, now()).bind(2, runId);
    if (auto rc = update->run(); !rc)
        return rc;
    if (m_db.changes() == 1)
        return {};
    auto status = statusOf(runId);
    if (!status)
        return status.error();
    return makeError("cannot start " + runLabel(runId) + ": it is " + std::string(statusName(*status)) +
                     " (only a pending run can start)");
}

Result<void> RunStore::finishRun(std::int64_t runId, const RunEnd& end)
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
    update->bind(1, statusName(end.status)).bind(2, now()).bind(3, end.exitCode).bind(4, end.rootCauseRank);
    update->bind(5, end.error).bind(6, runId);
    if (auto rc = update->run(); !rc)
        return rc;
    if (m_db.changes() != 1) {
        auto status = statusOf(runId);
        if (!status)
            return status.error();
        return makeError("cannot end " + runLabel(runId) + " as " + std::string(statusName(end.status)) + ": it is already " +
                         std::string(statusName(*status)));
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
    auto upsert = m_db.prepare(
        "INSERT INTO run_ranks (run_id, rank, pid, host, device, torch_version, local_rank, machine_rank) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, rank) DO UPDATE SET pid = excluded.pid, "
        "host = excluded.host, device = excluded.device, torch_version = excluded.torch_version, "
        "local_rank = excluded.local_rank, machine_rank = excluded.machine_rank");
    if (!upsert)
        return upsert.error();
    upsert->bind(1, runId).bind(2, rank.rank).bind(3, rank.pid).bind(4, rank.host).bind(5, rank.device);
    upsert->bind(6, rank.torchVersion).bind(7, rank.localRank).bind(8, rank.machineRank);
    return upsert->run();
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

Result<void> RunStore::setNotes(std::int64_t runId, const std::string& notes)
{
    if (auto status = statusOf(runId); !status)
        return status.error();
    auto update = m_db.prepare("UPDATE runs SET notes = ? WHERE id = ?");
    if (!update)
        return update.error();
    update->bind(1, notes).bind(2, runId);
    return update->run();
}

Result<void> RunStore::renameRun(std::int64_t runId, const std::string& name)
{
    const auto first = name.find_first_not_of(" \t\n");
    if (first == std::string::npos)
        return makeError("a run's name cannot be empty; type a name");
    const std::string trimmed = name.substr(first, name.find_last_not_of(" \t\n") - first + 1);
    if (auto status = statusOf(runId); !status)
        return status.error();
    auto update = m_db.prepare("UPDATE runs SET name = ? WHERE id = ?");
    if (!update)
        return update.error();
    update->bind(1, trimmed).bind(2, runId);
    return update->run();
}

Result<int> RunStore::markInterruptedRuns()
{
    // Decide outside any transaction, and take the write lock only when there is something to
    // mark: a reader that opens the store while a launcher writes must not wait for it.
    auto select = m_db.prepare("SELECT id, launcher_pid, launcher_host, launcher_boot_id, launcher_start_ticks, run_dir "
                               "FROM runs WHERE status IN ('pending', 'running')");
    if (!select)
        return select.error();
    std::vector<std::pair<std::int64_t, LauncherIdentity>> gone;
    std::vector<std::pair<std::int64_t, RunEnd>> decided; // the launcher kept its outcome in the run directory
    auto rc = forEachRow(*select, [&](const Statement& s) {
        LauncherIdentity launcher{s.int64(1), s.text(2), s.text(3), s.int64(4)};
        if (checkLiveness(launcher) != Liveness::Gone)
            return;
        std::filesystem::path runDir = s.text(5);
        if (runDir.is_relative())
            runDir = m_runsRoot.parent_path() / runDir;
        if (auto end = readOutcomeFile(runDir))
            decided.emplace_back(s.int64(0), std::move(*end));
        else
            gone.emplace_back(s.int64(0), std::move(launcher));
    });
    if (!rc)
        return rc.error();
    // A launcher that could not write the history as its run ended (a full disk) left the outcome
    // in outcome.json: record it as it was, with the rows events.jsonl still has.
    for (auto& [id, end] : decided) {
        end.error += (end.error.empty() ? "" : "\n") + std::string("(recorded from the run directory's outcome.json: the "
                                                                    "history could not be written when the run ended)");
        if (auto recovered = recoverFromEventLog(id); !recovered)
            return recovered.error();
        if (auto finished = finishRun(id, end); !finished)
            return finished.error();
    }
    if (gone.empty())
        return static_cast<int>(decided.size());

    auto tx = Transaction::begin(m_db);
    if (!tx)
        return tx.error();
    auto update = m_db.prepare("UPDATE runs SET status = 'interrupted', ended_at = ?, error = ? "
                               "WHERE id = ? AND status IN ('pending', 'running')");
    if (!update)
        return update.error();
    int marked = 0;
    for (const auto& [id, launcher] : gone) {
        update->bind(1, now())
            .bind(2, "the launcher (pid " + std::to_string(launcher.pid) + " on " + launcher.host +
                         ") stopped without ending the run")
            .bind(3, id);
        if (auto r = update->run(); !r)
            return r.error();
        marked += m_db.changes();
    }
    if (auto r = tx->commit(); !r)
        return r.error();
    // Nothing lost: the rows the dead launcher had not committed yet are in the run directory's
    // events.jsonl; bring them in.
    for (const auto& [id, launcher] : gone)
        if (auto recovered = recoverFromEventLog(id); !recovered)
            return recovered.error();
    return marked + static_cast<int>(decided.size());
}

Result<std::int64_t> RunStore::recoverFromEventLog(std::int64_t runId)
{
    auto dirStmt = m_db.prepare("SELECT run_dir FROM runs WHERE id = ?");
    if (!dirStmt)
        return dirStmt.error();
    dirStmt->bind(1, runId);
    auto row = dirStmt->step();
    if (!row)
        return row.error();
    if (!*row)
        return std::int64_t{0};
    std::filesystem::path runDir = dirStmt->text(0);
    if (runDir.is_relative())
        runDir = m_runsRoot.parent_path() / runDir;
    std::ifstream log(RunLayout(runDir).eventsFile());
    if (!log)
        return std::int64_t{0};

    // The last step already stored, per rank: later step events are the missing ones.
    std::map<int, std::int64_t> lastStored;
    auto last = m_db.prepare("SELECT rank, MAX(step) FROM metrics WHERE run_id = ? GROUP BY rank");
    if (!last)
        return last.error();
    last->bind(1, runId);
    if (auto rc = forEachRow(*last, [&](const Statement& st) { lastStored[static_cast<int>(st.int64(0))] = st.int64(1); }); !rc)
        return rc.error();

    auto writer = RunWriter::open(m_db.path(), runId);
    if (!writer)
        return writer.error();
    std::int64_t recovered = 0;
    std::string line;
    while (std::getline(log, line)) {
        auto event = protocol::decodeEvent(line);
        if (!event)
            continue; // a torn last line: what the rank never finished writing
        const auto* step = std::get_if<protocol::StepEvent>(&event->body);
        if (!step)
            continue;
        auto it = lastStored.find(event->rank);
        if (it != lastStored.end() && step->step <= it->second)
            continue;
        writeEventRows(**writer, *event);
        ++recovered;
    }
    if (auto flushed = (*writer)->flush(); !flushed)
        return flushed.error();
    return recovered;
}

Result<std::vector<RunSummary>> RunStore::listRuns(const RunFilter& filter) const
{
    // The statement is assembled from constant fragments only; every value is a parameter.
    std::string sql = std::string("SELECT ") + kSummaryColumns + " FROM runs r WHERE 1";
    if (!filter.statuses.empty()) {
        sql += " AND r.status IN (?";
        for (std::size_t i = 1; i < filter.statuses.size(); ++i)
            sql += ", ?";
        sql += ")";
    }
    if (!filter.distributedType.empty())
        sql += " AND r.distributed_type = ? COLLATE NOCASE";
    if (!filter.mixedPrecision.empty())
        sql += " AND r.mixed_precision = ? COLLATE NOCASE";
    if (!filter.tag.empty())
        sql += " AND EXISTS (SELECT 1 FROM run_tags t WHERE t.run_id = r.id AND t.tag = ?)";
    if (!filter.text.empty())
        sql += " AND (r.name LIKE ?1000 ESCAPE '\\' OR r.notes LIKE ?1000 ESCAPE '\\' OR r.run_dir LIKE ?1000 "
               "ESCAPE '\\' OR EXISTS (SELECT 1 FROM run_tags t WHERE t.run_id = r.id AND t.tag LIKE ?1000 ESCAPE '\\'))";
    switch (filter.sort) {
    case RunSort::Created: sql += " ORDER BY r.created_at"; break;
    case RunSort::Name: sql += " ORDER BY r.name COLLATE NOCASE"; break;
    case RunSort::Status: sql += " ORDER BY r.status"; break;
    case RunSort::Duration: sql += " ORDER BY coalesce(r.ended_at - r.started_at, -1)"; break;
    case RunSort::Steps: sql += " ORDER BY coalesce(r.last_step, -1)"; break;
    case RunSort::Loss: sql += " ORDER BY r.last_loss IS NULL, r.last_loss"; break;
    }
    sql += filter.descending ? " DESC, r.id DESC" : ", r.id";
    sql += " LIMIT ?1001 OFFSET ?1002";

    auto stmt = m_db.prepare(sql);
    if (!stmt)
        return stmt.error();
    int index = 1;
    for (auto status : filter.statuses)
        stmt->bind(index++, statusName(status));
    if (!filter.distributedType.empty())
        stmt->bind(index++, filter.distributedType);
    if (!filter.mixedPrecision.empty())
        stmt->bind(index++, filter.mixedPrecision);
    if (!filter.tag.empty())
        stmt->bind(index++, filter.tag);
    if (!filter.text.empty())
        stmt->bind(1000, likePattern(filter.text));
    stmt->bind(1001, filter.limit).bind(1002, filter.offset);

    std::vector<RunSummary> runs;
    auto rc = forEachRow(*stmt, [&](const Statement& s) { runs.push_back(readSummary(s)); });
    if (!rc)
        return rc.error();
    return runs;
}

Result<RunDetails> RunStore::run(std::int64_t runId) const
{
    auto stmt = m_db.prepare(std::string("SELECT ") + kSummaryColumns +
                             ", r.config_text, r.recipe_text, r.notes, r.exit_code, r.root_cause_rank, r.error, "
                             "r.launcher_pid, r.launcher_host, r.launcher_boot_id, r.launcher_start_ticks "
                             "FROM runs r WHERE r.id = ?");
    if (!stmt)
        return stmt.error();
    stmt->bind(1, runId);
    auto row = stmt->step();
    if (!row)
        return row.error();
    if (!*row)
        return makeError("no " + runLabel(runId) + " in " + m_db.path() + "; `shardscope runs list` shows the runs");
    RunDetails details;
    details.summary = readSummary(*stmt);
    details.configText = stmt->text(14);
    details.recipeText = stmt->text(15);
    details.notes = stmt->text(16);
    details.exitCode = optionalInt(*stmt, 17);
    details.rootCauseRank = optionalInt(*stmt, 18);
    details.error = stmt->text(19);
    details.launcher = {stmt->int64(20), stmt->text(21), stmt->text(22), stmt->int64(23)};

    auto ranks = m_db.prepare("SELECT rank, pid, host, device, torch_version, local_rank, machine_rank, exit_code "
                              "FROM run_ranks WHERE run_id = ? ORDER BY rank");
    if (!ranks)
        return ranks.error();
    ranks->bind(1, runId);
    auto rc = forEachRow(*ranks, [&](const Statement& s) {
        RunDetails::Rank rank;
        rank.info = {int(s.int64(0)), s.int64(1), s.text(2), s.text(3), s.text(4), int(s.int64(5)), int(s.int64(6))};
        rank.exitCode = optionalInt(s, 7);
        details.ranks.push_back(std::move(rank));
    });
    if (!rc)
        return rc.error();

    auto checkpoints = m_db.prepare("SELECT rank, step, time, path, kind, bytes FROM checkpoints WHERE run_id = ? "
                                    "ORDER BY step, rank");
    if (!checkpoints)
        return checkpoints.error();
    checkpoints->bind(1, runId);
    rc = forEachRow(*checkpoints, [&](const Statement& s) {
        details.checkpoints.push_back({int(s.int64(0)), s.int64(1), s.real(2), s.text(3), s.text(4), s.int64(5)});
    });
    if (!rc)
        return rc.error();

    auto traces = m_db.prepare("SELECT rank, time, path, source, compute, comm, memory, idle, overlap FROM traces "
                               "WHERE run_id = ? ORDER BY rank, id");
    if (!traces)
        return traces.error();
    traces->bind(1, runId);
    rc = forEachRow(*traces, [&](const Statement& s) {
        details.traces.push_back({int(s.int64(0)), s.real(1), s.text(2), s.text(3), s.real(4), s.real(5), s.real(6),
                                  s.real(7), s.real(8)});
    });
    if (!rc)
        return rc.error();

    auto keys = metricKeys(runId);
    if (!keys)
        return keys.error();
    details.metricKeys = std::move(*keys);
    auto count = m_db.prepare("SELECT coalesce(sum(count), 0) FROM metric_blocks WHERE run_id = ?");
    if (!count)
        return count.error();
    count->bind(1, runId);
    if (auto r = count->step(); !r)
        return r.error();
    details.metricRows = count->int64(0);
    return details;
}

Result<std::int64_t> RunStore::resolveRun(const std::string& reference) const
{
    const bool numeric = !reference.empty() && std::all_of(reference.begin(), reference.end(), [](char c) {
        return c >= '0' && c <= '9';
    });
    if (numeric) {
        std::int64_t id = 0;
        std::from_chars(reference.data(), reference.data() + reference.size(), id);
        if (auto status = statusOf(id); !status)
            return status.error();
        return id;
    }
    auto stmt = m_db.prepare("SELECT id FROM runs WHERE name = ? ORDER BY id");
    if (!stmt)
        return stmt.error();
    stmt->bind(1, reference);
    std::vector<std::int64_t> ids;
    auto rc = forEachRow(*stmt, [&](const Statement& s) { ids.push_back(s.int64(0)); });
    if (!rc)
        return rc.error();
    if (ids.empty())
        return makeError("no run with id or name '" + reference + "'; `shardscope runs list` shows the runs");
    if (ids.size() > 1) {
        std::string list;
        for (auto id : ids)
            list += (list.empty() ? "" : ", ") + std::to_string(id);
        return makeError(std::to_string(ids.size()) + " runs are named '" + reference + "' (ids " + list +
                         "); name one by its id");
    }
    return ids.front();
}

Result<std::vector<std::string>> RunStore::metricKeys(std::int64_t runId) const
{
    auto stmt = m_db.prepare("SELECT k.name FROM metric_keys k WHERE EXISTS (SELECT 1 FROM metric_blocks b "
                             "WHERE b.run_id = ? AND b.key_id = k.id) ORDER BY k.name");
    if (!stmt)
        return stmt.error();
    stmt->bind(1, runId);
    std::vector<std::string> keys;
    auto rc = forEachRow(*stmt, [&](const Statement& s) { keys.push_back(s.text(0)); });
    if (!rc)
        return rc.error();
    return keys;
}

Result<std::vector<int>> RunStore::metricRanks(std::int64_t runId, const std::string& key) const
{
    auto id = keyId(key);
    if (!id)
        return id.error();
    auto stmt = m_db.prepare("SELECT DISTINCT rank FROM metric_blocks WHERE run_id = ? AND key_id = ? ORDER BY rank");
    if (!stmt)
        return stmt.error();
    stmt->bind(1, runId).bind(2, *id);
    std::vector<int> ranks;
    auto rc = forEachRow(*stmt, [&](const Statement& s) { ranks.push_back(int(s.int64(0))); });
    if (!rc)
        return rc.error();
    return ranks;
}

Result<std::vector<SeriesPoint>> RunStore::series(std::int64_t runId, int rank, const std::string& key) const
{
    auto id = keyId(key);
    if (!id)
        return id.error();
    auto stmt = m_db.prepare("SELECT step, time, value FROM metrics WHERE run_id = ? AND key_id = ? AND rank = ? "
                             "ORDER BY step, id");
    if (!stmt)
        return stmt.error();
    stmt->bind(1, runId).bind(2, *id).bind(3, rank);
    std::vector<SeriesPoint> points;
    auto rc = forEachRow(*stmt, [&](const Statement& s) { points.push_back({s.int64(0), s.real(1), s.real(2)}); });
    if (!rc)
        return rc.error();
    return points;
}

Result<std::vector<SeriesBucket>> RunStore::downsampledSeries(std::int64_t runId, int rank, const std::string& key,
                                                              int maxBuckets) const
{
    if (maxBuckets < 1)
        return makeError("downsampling needs at least one bucket, got " + std::to_string(maxBuckets));
    auto id = keyId(key);
    if (!id)
        return id.error();
    std::vector<SeriesBucket> buckets;
    if (*id == 0)
        return buckets;

    // The extent of the series: two index seeks (min and max in one query would scan).
    auto count = m_db.prepare("SELECT coalesce(sum(count), 0) FROM metric_blocks WHERE run_id = ?1 AND key_id = ?2 AND rank = ?3");
    auto first = m_db.prepare("SELECT min(step) FROM metrics WHERE run_id = ?1 AND key_id = ?2 AND rank = ?3");
    auto last = m_db.prepare("SELECT max(step) FROM metrics WHERE run_id = ?1 AND key_id = ?2 AND rank = ?3");
    for (auto* stmt : {&count, &first, &last}) {
        if (!*stmt)
            return stmt->error();
        (*stmt)->bind(1, runId).bind(2, *id).bind(3, rank);
        if (auto row = (*stmt)->step(); !row)
            return row.error();
    }
    const std::int64_t total = count->int64(0);
    if (total == 0)
        return buckets;
    const std::int64_t minStep = first->int64(0), maxStep = last->int64(0);

    if (total <= maxBuckets) {
        auto points = series(runId, rank, key);
        if (!points)
            return points.error();
        for (const auto& p : *points) {
            SeriesBucket b{p.step, p.step, 1};
            if (!std::isnan(p.value))
                b.minValue = b.maxValue = p.value;
            b.minStep = b.maxStep = p.step;
            buckets.push_back(b);
        }
        return buckets;
    }

    const std::int64_t span = maxStep - minStep + 1;
    std::int64_t width = (span + maxBuckets - 1) / maxBuckets;
    auto bucketFor = [&](std::int64_t origin, std::int64_t w, std::int64_t index) -> SeriesBucket& {
        if (buckets.empty() || buckets.back().firstStep != std::max(origin + index * w, minStep)) {
            SeriesBucket b;
            b.firstStep = std::max(origin + index * w, minStep);
            b.lastStep = std::min(origin + (index + 1) * w - 1, maxStep);
            buckets.push_back(b);
        }
        return buckets.back();
    };
    auto fold = [](SeriesBucket& b, const BlockAccumulator& acc) {
        BlockAccumulator current{b.count, 0, b.minValue, b.minStep, b.maxValue, b.maxStep};
        current.merge(acc);
        b.count = current.count;
        b.minValue = current.minValue;
        b.minStep = current.minStep;
        b.maxValue = current.maxValue;
        b.maxStep = current.maxStep;
    };

    if (width >= kBlockSteps) {
        // Buckets made of whole blocks: exact, and 1/kBlockSteps of the rows to read.
        width = (width + kBlockSteps - 1) / kBlockSteps * kBlockSteps;
        const std::int64_t origin = blockOf(minStep) * kBlockSteps;
        while ((maxStep - origin) / width + 1 > maxBuckets)
            width += kBlockSteps;
        auto blocks = m_db.prepare("SELECT block, count, min_value, min_step, max_value, max_step FROM metric_blocks "
                                   "WHERE run_id = ? AND key_id = ? AND rank = ? ORDER BY block");
        if (!blocks)
            return blocks.error();
        blocks->bind(1, runId).bind(2, *id).bind(3, rank);
        auto rc = forEachRow(*blocks, [&](const Statement& s) {
            const std::int64_t blockStart = s.int64(0) * kBlockSteps;
            BlockAccumulator acc{s.int64(1), 0, s.real(2), s.int64(3), s.real(4), s.int64(5)};
            fold(bucketFor(origin, width, (blockStart - origin) / width), acc);
        });
        if (!rc)
            return rc.error();
        return buckets;
    }

    // Buckets narrower than a block: few enough rows to read them all.
    auto rows = m_db.prepare("SELECT step, value FROM metrics WHERE run_id = ? AND key_id = ? AND rank = ? ORDER BY step");
    if (!rows)
        return rows.error();
    rows->bind(1, runId).bind(2, *id).bind(3, rank);
    auto rc = forEachRow(*rows, [&](const Statement& s) {
        const std::int64_t step = s.int64(0);
        BlockAccumulator acc;
        acc.add(step, s.real(1));
        fold(bucketFor(minStep, width, (step - minStep) / width), acc);
    });
    if (!rc)
        return rc.error();
    return buckets;
}

Result<std::vector<MetricRow>> RunStore::metricsSince(std::int64_t runId, std::int64_t afterId, int limit) const
{
    auto stmt = m_db.prepare("SELECT m.id, m.rank, m.step, m.time, k.name, m.value FROM metrics m "
                             "JOIN metric_keys k ON k.id = m.key_id WHERE m.id > ? AND m.run_id = ? "
                             "ORDER BY m.id LIMIT ?");
    if (!stmt)
        return stmt.error();
    stmt->bind(1, afterId).bind(2, runId).bind(3, limit);
    std::vector<MetricRow> rows;
    auto rc = forEachRow(*stmt, [&](const Statement& s) {
        rows.push_back({s.int64(0), int(s.int64(1)), s.int64(2), s.real(3), s.text(4), s.real(5)});
    });
    if (!rc)
        return rc.error();
    return rows;
}

Result<std::vector<EvalRecord>> RunStore::evals(std::int64_t runId) const
{
    auto stmt = m_db.prepare("SELECT rank, step, time, name, value FROM evals WHERE run_id = ? ORDER BY name, rank, step");
    if (!stmt)
        return stmt.error();
    stmt->bind(1, runId);
    std::vector<EvalRecord> records;
    auto rc = forEachRow(*stmt, [&](const Statement& s) {
        records.push_back({int(s.int64(0)), s.int64(1), s.real(2), s.text(3), s.real(4)});
    });
    if (!rc)
        return rc.error();
    return records;
}

Result<RunStats> RunStore::runStats(std::int64_t runId) const
{
    auto details = run(runId);
    if (!details)
        return details.error();
    RunStats stats;
    stats.runId = runId;
    stats.name = details->summary.name;
    stats.status = details->summary.status;
    stats.steps = details->summary.lastStep;
    if (details->summary.startedAt && details->summary.endedAt)
        stats.wallSeconds = *details->summary.endedAt - *details->summary.startedAt;

    // Per-series aggregates come from the blocks (Note [Metric blocks]); values every rank
    // reports alike (loss, tokens/s, skipped) are read from the lowest rank that has them.
    struct Aggregate {
        std::int64_t count = 0;
        double sum = 0;
        std::optional<double> min, max;
    };
    auto aggregate = [&](const char* key, int rank) -> Result<Aggregate> {
        auto id = keyId(key);
        if (!id)
            return id.error();
        auto stmt = m_db.prepare("SELECT sum(count), sum(sum_value), min(min_value), max(max_value) FROM metric_blocks "
                                 "WHERE run_id = ? AND key_id = ? AND rank = ?");
        if (!stmt)
            return stmt.error();
        stmt->bind(1, runId).bind(2, *id).bind(3, rank);
        if (auto row = stmt->step(); !row)
            return row.error();
        return Aggregate{stmt->int64(0), stmt->isNull(1) ? 0 : stmt->real(1), optionalReal(*stmt, 2),
                         optionalReal(*stmt, 3)};
    };
    auto lowestRank = [&](const char* key) -> Result<std::optional<int>> {
        auto ranks = metricRanks(runId, key);
        if (!ranks)
            return ranks.error();
        if (ranks->empty())
            return std::optional<int>();
        return std::optional<int>(ranks->front());
    };

    auto lossRank = lowestRank(keys::kLoss);
    if (!lossRank)
        return lossRank.error();
    if (*lossRank) {
        auto loss = aggregate(keys::kLoss, **lossRank);
        if (!loss)
            return loss.error();
        stats.bestLoss = loss->min;
        auto id = keyId(keys::kLoss);
        auto last = m_db.prepare("SELECT value FROM metrics WHERE run_id = ? AND key_id = ? AND rank = ? "
                                 "ORDER BY step DESC, id DESC LIMIT 1");
        if (!last)
            return last.error();
        last->bind(1, runId).bind(2, *id).bind(3, **lossRank);
        if (auto row = last->step(); !row)
            return row.error();
        else if (*row)
            stats.finalLoss = optionalReal(*last, 0);
    }
    auto tpsRank = lowestRank(keys::kTokensPerS);
    if (!tpsRank)
        return tpsRank.error();
    if (*tpsRank) {
        auto tps = aggregate(keys::kTokensPerS, **tpsRank);
        if (!tps)
            return tps.error();
        if (tps->count > 0)
            stats.meanTokensPerS = tps->sum / double(tps->count);
    }
    auto skippedRank = lowestRank(keys::kSkipped);
    if (!skippedRank)
        return skippedRank.error();
    if (*skippedRank) {
        auto skipped = aggregate(keys::kSkipped, **skippedRank);
        if (!skipped)
            return skipped.error();
        stats.skippedSteps = std::int64_t(std::llround(skipped->sum));
    }
    // Peak memory per rank: the allocator's peak on CUDA, else the process RSS (CPU ranks).
    std::map<int, double> peaks;
    for (const char* key : {keys::kMemRss, keys::kMemPeakAllocated}) {
        auto ranks = metricRanks(runId, key);
        if (!ranks)
            return ranks.error();
        for (int rank : *ranks) {
            auto memory = aggregate(key, rank);
            if (!memory)
                return memory.error();
            if (memory->max && *memory->max > 0)
                peaks[rank] = *memory->max;
        }
    }
    stats.peakMemory.assign(peaks.begin(), peaks.end());
    return stats;
}

Result<RunComparison> RunStore::compareRuns(const std::vector<std::int64_t>& runIds) const
{
    if (runIds.size() < 2)
        return makeError("comparing needs at least two runs, got " + std::to_string(runIds.size()));
    RunComparison comparison;
    std::vector<std::string> configs, recipes;
    for (auto id : runIds) {
        auto stats = runStats(id);
        if (!stats)
            return stats.error();
        comparison.runs.push_back(std::move(*stats));
        auto details = run(id);
        if (!details)
            return details.error();
        configs.push_back(details->configText);
        recipes.push_back(details->recipeText);
    }
    std::vector<std::string_view> configViews(configs.begin(), configs.end());
    std::vector<std::string_view> recipeViews(recipes.begin(), recipes.end());
    comparison.differences = diffYaml(configViews, "config");
    auto recipeDiff = diffYaml(recipeViews, "recipe");
    comparison.differences.insert(comparison.differences.end(), recipeDiff.begin(), recipeDiff.end());
    return comparison;
}

Result<void> RunStore::deleteRun(std::int64_t runId, bool removeDirectory)
{
    auto details = run(runId);
    if (!details)
        return details.error();
    if (!isTerminal(details->summary.status))
        return makeError("cannot delete " + runLabel(runId) + ": it is " + std::string(statusName(details->summary.status)) +
                         "; stop it first (or, if its launcher is gone, open the store again to mark it interrupted)");

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
            return makeError("refusing to delete the directory of " + runLabel(runId) + ": " + details->summary.runDir +
                             " is not inside the runs folder " + m_runsRoot.string() +
                             "; delete only its rows with --keep-files, and the folder by hand");
    }

    auto tx = Transaction::begin(m_db);
    if (!tx)
        return tx.error();
    for (const char* sql : {"DELETE FROM metrics WHERE run_id = ?", "DELETE FROM metric_blocks WHERE run_id = ?",
                            "DELETE FROM evals WHERE run_id = ?", "DELETE FROM traces WHERE run_id = ?",
                            "DELETE FROM checkpoints WHERE run_id = ?", "DELETE FROM run_ranks WHERE run_id = ?",
                            "DELETE FROM run_tags WHERE run_id = ?", "DELETE FROM runs WHERE id = ?"}) {
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
            return makeError("deleted the rows of " + runLabel(runId) + " but not its directory " + directory.string() +
                             ": " + ec.message() + "; remove it by hand");
    }
    return {};
}

Result<void> RunStore::exportCsv(std::int64_t runId, std::ostream& out) const
{
    if (auto status = statusOf(runId); !status)
        return status.error();
    auto stmt = m_db.prepare("SELECT m.rank, m.step, m.time, k.name, m.value FROM metrics m JOIN metric_keys k "
                             "ON k.id = m.key_id WHERE m.run_id = ? ORDER BY k.name, m.rank, m.step, m.id");
    if (!stmt)
        return stmt.error();
    stmt->bind(1, runId);
    out << "run_id,rank,step,time,key,value\n";
    const std::string run = std::to_string(runId) + ",";
    auto rc = forEachRow(*stmt, [&](const Statement& s) {
        const double value = s.real(4);
        out << run << s.int64(0) << ',' << s.int64(1) << ',' << formatNumber(s.real(2)) << ',' << csvField(s.text(3))
            << ',' << (std::isnan(value) ? std::string() : formatNumber(value)) << '\n';
    });
    if (!rc)
        return rc;
    if (!out)
        return makeError("writing the CSV export of " + runLabel(runId) + " failed (disk full?)");
    return {};
}

Result<void> RunStore::exportJson(std::int64_t runId, std::ostream& out) const
{
    auto details = run(runId);
    if (!details)
        return details.error();
    const auto& s = details->summary;
    out << "{\n  \"format\": \"shardscope-run\",\n  \"version\": 1,\n  \"run\": {";
    out << "\"id\": " << s.id << ", \"name\": " << jsonString(s.name) << ", \"status\": " << jsonString(statusName(s.status))
        << ", \"created_at\": " << jsonNumber(s.createdAt) << ", \"started_at\": " << jsonOptional(s.startedAt)
        << ", \"ended_at\": " << jsonOptional(s.endedAt) << ", \"host\": " << jsonString(s.host)
        << ", \"world_size\": " << s.worldSize << ", \"distributed_type\": " << jsonString(s.distributedType)
        << ", \"mixed_precision\": " << jsonString(s.mixedPrecision) << ", \"run_dir\": " << jsonString(s.runDir)
        << ", \"last_step\": " << jsonOptional(s.lastStep) << ", \"exit_code\": " << jsonOptional(details->exitCode)
        << ", \"root_cause_rank\": " << jsonOptional(details->rootCauseRank)
        << ", \"error\": " << jsonString(details->error) << ", \"notes\": " << jsonString(details->notes)
        << ", \"config\": " << jsonString(details->configText) << ", \"recipe\": " << jsonString(details->recipeText)
        << "},\n  \"tags\": [";
    for (std::size_t i = 0; i < s.tags.size(); ++i)
        out << (i ? ", " : "") << jsonString(s.tags[i]);
    out << "],\n  \"ranks\": [";
    for (std::size_t i = 0; i < details->ranks.size(); ++i) {
        const auto& r = details->ranks[i];
        out << (i ? ",\n    " : "\n    ") << "{\"rank\": " << r.info.rank << ", \"pid\": " << r.info.pid
            << ", \"host\": " << jsonString(r.info.host) << ", \"device\": " << jsonString(r.info.device)
            << ", \"torch\": " << jsonString(r.info.torchVersion) << ", \"local_rank\": " << r.info.localRank
            << ", \"machine_rank\": " << r.info.machineRank << ", \"exit_code\": " << jsonOptional(r.exitCode) << "}";
    }
    out << "],\n  \"metrics\": [";

    // One object per (key, rank) with column arrays: compact, and what a plotting script wants.
    auto stmt = m_db.prepare("SELECT k.name, m.rank, m.step, m.time, m.value FROM metrics m JOIN metric_keys k "
                             "ON k.id = m.key_id WHERE m.run_id = ? ORDER BY k.name, m.rank, m.step, m.id");
    if (!stmt)
        return stmt.error();
    stmt->bind(1, runId);
    std::string currentKey;
    int currentRank = -1;
    std::string steps, times, values;
    bool firstSeries = true;
    auto endSeries = [&] {
        if (currentRank < 0)
            return;
        out << (firstSeries ? "\n    " : ",\n    ") << "{\"key\": " << jsonString(currentKey) << ", \"rank\": "
            << currentRank << ", \"step\": [" << steps << "], \"time\": [" << times << "], \"value\": [" << values
            << "]}";
        firstSeries = false;
        steps.clear();
        times.clear();
        values.clear();
    };
    auto rc = forEachRow(*stmt, [&](const Statement& row) {
        std::string key = row.text(0);
        const int rank = int(row.int64(1));
        if (key != currentKey || rank != currentRank) {
            endSeries();
            currentKey = std::move(key);
            currentRank = rank;
        }
        // Appended piecewise: g++ 12 warns falsely (-Wrestrict) on `literal + std::string&&`.
        if (!steps.empty()) {
            steps += ", ";
            times += ", ";
            values += ", ";
        }
        steps += std::to_string(row.int64(2));
        times += jsonNumber(row.real(3));
        values += jsonNumber(row.real(4));
    });
    if (!rc)
        return rc;
    endSeries();

    out << "],\n  \"evals\": [";
    auto evalRows = evals(runId);
    if (!evalRows)
        return evalRows.error();
    for (std::size_t i = 0; i < evalRows->size(); ++i) {
        const auto& e = (*evalRows)[i];
        out << (i ? ",\n    " : "\n    ") << "{\"rank\": " << e.rank << ", \"step\": " << e.step
            << ", \"time\": " << jsonNumber(e.time) << ", \"name\": " << jsonString(e.name)
            << ", \"value\": " << jsonNumber(e.value) << "}";
    }
    out << "],\n  \"checkpoints\": [";
    for (std::size_t i = 0; i < details->checkpoints.size(); ++i) {
        const auto& c = details->checkpoints[i];
        out << (i ? ",\n    " : "\n    ") << "{\"rank\": " << c.rank << ", \"step\": " << c.step
            << ", \"time\": " << jsonNumber(c.time) << ", \"path\": " << jsonString(c.path)
            << ", \"kind\": " << jsonString(c.kind) << ", \"bytes\": " << c.bytes << "}";
    }
    out << "],\n  \"traces\": [";
    for (std::size_t i = 0; i < details->traces.size(); ++i) {
        const auto& t = details->traces[i];
        out << (i ? ",\n    " : "\n    ") << "{\"rank\": " << t.rank << ", \"time\": " << jsonNumber(t.time)
            << ", \"path\": " << jsonString(t.path) << ", \"source\": " << jsonString(t.source)
            << ", \"summary\": {\"compute\": " << jsonNumber(t.compute) << ", \"comm\": " << jsonNumber(t.comm)
            << ", \"memory\": " << jsonNumber(t.memory) << ", \"idle\": " << jsonNumber(t.idle)
            << ", \"overlap\": " << jsonNumber(t.overlap) << "}}";
    }
    out << "]\n}\n";
    if (!out)
        return makeError("writing the JSON export of " + runLabel(runId) + " failed (disk full?)");
    return {};
}

} // namespace shardscope::storage
