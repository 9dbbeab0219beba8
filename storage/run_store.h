#pragma once

// RunStore: one connection to the run history, for the lifecycle of runs and every query the CLI
// and the GUI make. Metric rows are written by RunWriter (run_writer.h), which batches them.
//
// Note [One connection per thread]: a RunStore (like a RunWriter) owns one SQLite connection
// opened without SQLite's mutexes; use it from one thread at a time, and open another per thread
// (they are cheap: ~0.1 ms). Any number of processes may open the same file: WAL lets readers
// proceed while one writer commits, and writers wait for each other up to the busy timeout.

#include "engine/common/result.h"
#include "storage/run_types.h"
#include "storage/sqlite_db.h"

#include <chrono>
#include <filesystem>
#include <iosfwd>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace shardscope::storage {

struct StoreOptions {
    std::chrono::milliseconds busyTimeout{5000};
    // Never write: no schema upgrade (an old file is refused), no interrupted-run marking.
    bool readOnly = false;
    // On open, mark runs whose launcher is gone as interrupted (see markInterruptedRuns).
    bool markInterrupted = true;
    // When the file cannot be opened for writing (a read-only home, a full disk), open it
    // read-only instead, with a warning (warnings()): for the commands and pages that only read.
    bool fallBackToReadOnly = false;
    // Where run directories live; deleteRun never removes anything outside it.
    // Default: the "runs" folder next to the database file.
    std::filesystem::path runsRoot;
};

class RunStore {
public:
    // Creates the file (and its folder) when missing, upgrades an older schema.
    static Result<RunStore> open(const std::filesystem::path& databaseFile, const StoreOptions& options = {});

    // --- lifecycle (the launcher) ---
    Result<std::int64_t> createRun(const NewRun& run); // status pending
    // pending -> running, at `at` (seconds since the epoch; none: now): a cluster run caught up
    // after it started keeps its start.
    Result<void> markRunning(std::int64_t runId, std::optional<double> at = std::nullopt);
    // pending|running -> completed|failed|cancelled, with exit codes and the root-cause rank.
    // A launcher that uses a RunWriter ends the run with RunWriter::finish instead, so the last
    // metrics and the final status commit together.
    // `endedAt`: when it ended elsewhere (a cluster job's last attempt), seconds since the epoch; none: now.
    Result<void> finishRun(std::int64_t runId, const RunEnd& end, std::optional<double> endedAt = std::nullopt);
    Result<void> recordRank(std::int64_t runId, const RankInfo& rank);
    // A cluster run's job ("slurm:123"), and what the scheduler says of it now.
    Result<void> setJob(std::int64_t runId, const std::string& job);
    Result<void> setStatusDetail(std::int64_t runId, const std::string& detail);
    // A live run's new owner (`shardscope runs follow` taking over a cluster job whose launcher is
    // gone): Stop signals it, and liveness checks look at it.
    Result<void> adoptRun(std::int64_t runId, const LauncherIdentity& launcher);
    // Records (or replaces) an attempt of a cluster job's run.
    Result<void> recordAttempt(std::int64_t runId, const RunAttempt& attempt);
    // A run that ended (failed, cancelled, interrupted) goes on from a checkpoint as its next
    // attempt: running again under `launcher`, its steps after attempt.resumedStep left out of the
    // history (the attempt redoes them; the earlier attempt's events.jsonl keeps them), its end
    // cleared, the attempt recorded (attempt 0, the first launch, too when it was not yet).
    Result<void> continueRun(std::int64_t runId, const RunAttempt& attempt, const LauncherIdentity& launcher);
    Result<void> setTags(std::int64_t runId, const std::vector<std::string>& tags);
    Result<void> setNotes(std::int64_t runId, const std::string& notes);
    // The name shown in the history (blanks around it trimmed; empty is an error). The run
    // directory keeps its id.
    Result<void> renameRun(std::int64_t runId, const std::string& name);
    // "#rrggbb" (any case, stored lower-case), or "" for the palette's colour again.
    Result<void> setRunColor(std::int64_t runId, const std::string& color);
    // Pending or running runs whose launcher process is gone (same host: no such pid, or a pid
    // that started at another time, or another boot) become interrupted. Returns how many.
    Result<int> markInterruptedRuns();
    // Step events in the run directory's events.jsonl that are not in the store yet (a launcher
    // that died before its last commit) are written in. Returns how many events were recovered.
    Result<std::int64_t> recoverFromEventLog(std::int64_t runId);

    // --- queries ---
    Result<std::vector<RunSummary>> listRuns(const RunFilter& filter = {}) const;
    // Each run's settings as flat key paths of its config ("config.fsdp_config.fsdp_sharding_strategy")
    // and recipe ("recipe.optimizer.lr"), with their values as written: the Runs page's columns.
    Result<std::map<std::int64_t, std::vector<std::pair<std::string, std::string>>>> runSettings(
        const std::vector<std::int64_t>& runIds) const;
    Result<RunDetails> run(std::int64_t runId) const;
    // A run by id ("12") or by name (must be unique; the newest wins only when told so).
    Result<std::int64_t> resolveRun(const std::string& reference) const;
    Result<std::vector<std::string>> metricKeys(std::int64_t runId) const;
    Result<std::vector<int>> metricRanks(std::int64_t runId, const std::string& key) const;
    Result<std::vector<SeriesPoint>> series(std::int64_t runId, int rank, const std::string& key) const;
    // At most maxBuckets buckets covering the whole series, each with its min and max (and the
    // steps they occurred at); a series of at most maxBuckets points comes back one point per
    // bucket. See Note [Metric blocks].
    Result<std::vector<SeriesBucket>> downsampledSeries(std::int64_t runId, int rank, const std::string& key,
                                                        int maxBuckets) const;
    // Rows of one run inserted after row id afterId, in insertion order: a live view keeps the
    // last id it saw and asks again.
    Result<std::vector<MetricRow>> metricsSince(std::int64_t runId, std::int64_t afterId, int limit = 100000) const;
    Result<std::vector<EvalRecord>> evals(std::int64_t runId) const;
    // Evals of one run recorded after row id afterId, in insertion order (as metricsSince): a live
    // view's new evals, whatever their step, rank and name sort before.
    Result<std::vector<EvalRecord>> evalsSince(std::int64_t runId, std::int64_t afterId) const;
    // The text a run's model wrote at its evals, recorded after row id afterId, in insertion order.
    Result<std::vector<EvalSample>> evalSamplesSince(std::int64_t runId, std::int64_t afterId = 0) const;
    Result<RunStats> runStats(std::int64_t runId) const;
    Result<RunComparison> compareRuns(const std::vector<std::int64_t>& runIds) const;

    // Deletes the run's rows and, when removeDirectory, its run directory, but only if that
    // directory lies inside runsRoot (a run dir pointing elsewhere is an error, nothing deleted).
    // A pending or running run is refused: stop it first.
    Result<void> deleteRun(std::int64_t runId, bool removeDirectory = true);

    // CSV: one metric row a line (run_id,rank,step,time,key,value), ordered by key, rank, step.
    Result<void> exportCsv(std::int64_t runId, std::ostream& out) const;
    // JSON: the run, its ranks, tags, series (column arrays per key and rank), evals,
    // checkpoints and traces. NaN is written as null.
    Result<void> exportJson(std::int64_t runId, std::ostream& out) const;

    Database& database() { return m_db; }
    const Database& database() const { return m_db; }
    const std::filesystem::path& runsRoot() const { return m_runsRoot; }

    // What the open could not do (write access, recovery of dead runs), for the caller to show.
    const std::vector<std::string>& warnings() const { return m_warnings; }

private:
    // `sql`: one of our own UPDATE runs statements, binding (value, runId).
    Result<void> updateRunText(std::int64_t runId, const char* sql, const std::string& value);
    RunStore(Database db, std::filesystem::path runsRoot) : m_db(std::move(db)), m_runsRoot(std::move(runsRoot)) { }
    static Result<RunStore> openAs(const std::filesystem::path& databaseFile, const StoreOptions& options, OpenMode mode);
    Result<RunStatus> statusOf(std::int64_t runId) const;
    // The one row `sql` selects for a run (the run's id is its one parameter), or the error that
    // there is no such run.
    Result<Statement> runRow(std::string_view sql, std::int64_t runId) const;
    Result<std::int64_t> keyId(const std::string& key) const; // 0 when unknown

    Database m_db;
    std::filesystem::path m_runsRoot;
    std::vector<std::string> m_warnings;
};

} // namespace shardscope::storage
