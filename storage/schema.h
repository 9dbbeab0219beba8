#pragma once

// The schema of the run history and its forward-only migrations. The version lives in
// `PRAGMA user_version`; version N is what migrations 1..N produce, and a file written by a newer
// Shardscope is refused rather than guessed at. Every older version's file is kept in
// tests/storage/fixtures/ with the SQL that made it, and migrated in tst_storage_schema.

#include "engine/common/result.h"
#include "storage/run_types.h"
#include "storage/sqlite_db.h"

namespace shardscope::storage {

// v1: runs, tags, ranks, metric keys, metrics, evals, traces, checkpoints.
// v2: metric_blocks, the per-block summaries of every series (Note [Metric blocks]).
// v3: runs.color, the colour the user chose for a run ('' = the palette's, from its id).
// v4: runs.job, runs.status_detail and run_attempts (a cluster job's requeues).
// v5: run_ranks' peak (what each rank's MFU is against) and whether its precision is emulated.
// v6: eval_samples, the text a run's model wrote at its evals.
inline constexpr int kSchemaVersion = 7;

// Inserts or updates a rank's hello (bindRank binds it).
inline constexpr const char* kUpsertRank =
    "INSERT INTO run_ranks (run_id, rank, pid, host, device, torch_version, local_rank, machine_rank, peak_flops, "
    "peak_dtype, peak_source, precision_emulated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (run_id, rank) DO UPDATE SET pid = excluded.pid, host = excluded.host, device = excluded.device, "
    "torch_version = excluded.torch_version, local_rank = excluded.local_rank, machine_rank = excluded.machine_rank, "
    "peak_flops = excluded.peak_flops, peak_dtype = excluded.peak_dtype, peak_source = excluded.peak_source, "
    "precision_emulated = excluded.precision_emulated";
void bindRank(Statement& upsert, std::int64_t runId, const RankInfo& rank);

Result<int> schemaVersion(const Database& db);

// Brings the database to targetVersion (tests stop early to make old files). Before changing a
// file that already holds data, copies it to <file>.v<old>.bak, so a failed or unwanted upgrade
// can be undone by hand.
Result<void> migrate(Database& db, int targetVersion = kSchemaVersion);

// WAL, foreign keys, and the per-connection settings every connection of ours uses.
Result<void> configureConnection(Database& db, bool readOnly);

} // namespace shardscope::storage
