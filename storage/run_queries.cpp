// RunStore: what the history answers (run lists, details, series, statistics, comparisons).

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
#include <charconv>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <ostream>

namespace shardscope::storage {

using namespace detail;

namespace {

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

constexpr const char* kSummaryColumns =
    "r.id, r.name, r.status, r.created_at, r.started_at, r.ended_at, r.host, r.world_size, r.distributed_type, "
    "r.mixed_precision, r.last_step, r.last_loss, r.run_dir, "
    "(SELECT group_concat(t.tag, char(31)) FROM run_tags t WHERE t.run_id = r.id), "
    "(SELECT count(*) FROM traces t WHERE t.run_id = r.id), r.color, r.job, r.status_detail";
constexpr int kSummaryColumnCount = 18;

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
    run.traceCount = int(s.int64(14));
    run.color = s.text(15);
    run.job = s.text(16);
    run.statusDetail = s.text(17);
    return run;
}

} // namespace

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
    case RunSort::Created:
        sql += " ORDER BY r.created_at";
        break;
    case RunSort::Name:
        sql += " ORDER BY r.name COLLATE NOCASE";
        break;
    case RunSort::Status:
        sql += " ORDER BY r.status";
        break;
    case RunSort::Duration:
        sql += " ORDER BY coalesce(r.ended_at - r.started_at, -1)";
        break;
    case RunSort::Steps:
        sql += " ORDER BY coalesce(r.last_step, -1)";
        break;
    case RunSort::Loss:
        sql += " ORDER BY r.last_loss IS NULL, r.last_loss";
        break;
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
    auto stmt = runRow(std::string("SELECT ") + kSummaryColumns
                           + ", r.config_text, r.recipe_text, r.notes, r.exit_code, r.root_cause_rank, r.error, "
                             "r.launcher_pid, r.launcher_host, r.launcher_boot_id, r.launcher_start_ticks "
                             "FROM runs r WHERE r.id = ?",
                       runId);
    if (!stmt)
        return stmt.error();
    RunDetails details;
    details.summary = readSummary(*stmt);
    constexpr int c = kSummaryColumnCount; // the details' columns follow the summary's
    details.configText = stmt->text(c);
    details.recipeText = stmt->text(c + 1);
    details.notes = stmt->text(c + 2);
    details.exitCode = optionalInt(*stmt, c + 3);
    details.rootCauseRank = optionalInt(*stmt, c + 4);
    details.error = stmt->text(c + 5);
    details.launcher = {stmt->int64(c + 6), stmt->text(c + 7), stmt->text(c + 8), stmt->int64(c + 9)};

    auto ranks = m_db.prepare("SELECT rank, pid, host, device, torch_version, local_rank, machine_rank, exit_code, "
                              "peak_flops, peak_dtype, peak_source, precision_emulated "
                              "FROM run_ranks WHERE run_id = ? ORDER BY rank");
    if (!ranks)
        return ranks.error();
    ranks->bind(1, runId);
    auto rc = forEachRow(*ranks, [&](const Statement& s) {
        RunDetails::Rank rank;
        rank.info = {int(s.int64(0)), s.int64(1), s.text(2), s.text(3), s.text(4), int(s.int64(5)), int(s.int64(6))};
        rank.exitCode = optionalInt(s, 7);
        if (!s.isNull(8))
            rank.info.peakFlops = s.real(8);
        rank.info.peakDtype = s.text(9);
        rank.info.peakSource = s.text(10);
        rank.info.precisionEmulated = s.int64(11) != 0;
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

    auto attempts = m_db.prepare(
        "SELECT attempt, job_id, nodes, started_at, ended_at, exit_code, resumed_step, resumed_from, lost_nodes "
        "FROM run_attempts WHERE run_id = ? ORDER BY attempt");
    if (!attempts)
        return attempts.error();
    attempts->bind(1, runId);
    rc = forEachRow(*attempts, [&](const Statement& s) {
        RunAttempt a;
        a.attempt = int(s.int64(0));
        a.jobId = s.text(1);
        a.nodes = s.text(2);
        a.startedAt = optionalReal(s, 3);
        a.endedAt = optionalReal(s, 4);
        a.exitCode = optionalInt(s, 5);
        a.resumedStep = s.int64(6);
        a.resumedFrom = s.text(7);
        a.lostNodes = s.text(8);
        details.attempts.push_back(std::move(a));
    });
    if (!rc)
        return rc.error();

    auto traces = m_db.prepare("SELECT rank, time, path, source, compute, comm, memory, idle, overlap FROM traces "
                               "WHERE run_id = ? ORDER BY rank, id");
    if (!traces)
        return traces.error();
    traces->bind(1, runId);
    rc = forEachRow(*traces, [&](const Statement& s) {
        details.traces.push_back(
            {int(s.int64(0)), s.real(1), s.text(2), s.text(3), s.real(4), s.real(5), s.real(6), s.real(7), s.real(8)});
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
    const bool numeric = !reference.empty()
                         && std::all_of(reference.begin(), reference.end(), [](char c) { return c >= '0' && c <= '9'; });
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
        return makeError(std::to_string(ids.size()) + " runs are named '" + reference + "' (ids " + list
                         + "); name one by its id");
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
    auto count = m_db.prepare(
        "SELECT coalesce(sum(count), 0) FROM metric_blocks WHERE run_id = ?1 AND key_id = ?2 AND rank = ?3");
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
    auto stmt = m_db.prepare("SELECT rank, step, time, name, value, id FROM evals WHERE run_id = ? ORDER BY name, rank, step");
    if (!stmt)
        return stmt.error();
    stmt->bind(1, runId);
    std::vector<EvalRecord> records;
    auto rc = forEachRow(*stmt, [&](const Statement& s) {
        records.push_back({int(s.int64(0)), s.int64(1), s.real(2), s.text(3), s.real(4), s.int64(5)});
    });
    if (!rc)
        return rc.error();
    return records;
}

Result<std::vector<EvalRecord>> RunStore::evalsSince(std::int64_t runId, std::int64_t afterId) const
{
    auto stmt = m_db.prepare("SELECT rank, step, time, name, value, id FROM evals WHERE run_id = ? AND id > ? ORDER BY id");
    if (!stmt)
        return stmt.error();
    stmt->bind(1, runId).bind(2, afterId);
    std::vector<EvalRecord> records;
    auto rc = forEachRow(*stmt, [&](const Statement& s) {
        records.push_back({int(s.int64(0)), s.int64(1), s.real(2), s.text(3), s.real(4), s.int64(5)});
    });
    if (!rc)
        return rc.error();
    return records;
}

Result<std::map<std::int64_t, std::vector<std::pair<std::string, std::string>>>> RunStore::runSettings(
    const std::vector<std::int64_t>& runIds) const
{
    auto stmt = m_db.prepare("SELECT config_text, recipe_text FROM runs WHERE id = ?");
    if (!stmt)
        return stmt.error();
    std::map<std::int64_t, std::vector<std::pair<std::string, std::string>>> settings;
    for (const std::int64_t id : runIds) {
        stmt->bind(1, id);
        auto& mine = settings[id];
        auto rc = forEachRow(*stmt, [&](const Statement& s) {
            for (const auto& [file, column] : {std::pair<const char*, int>{"config.", 0}, {"recipe.", 1}})
                for (auto& [key, value] : flattenYaml(s.text(column)))
                    mine.emplace_back(file + key, std::move(value));
        });
        if (!rc)
            return rc.error();
        stmt->reset();
    }
    return settings;
}

Result<std::vector<EvalSample>> RunStore::evalSamplesSince(std::int64_t runId, std::int64_t afterId) const
{
    auto stmt = m_db.prepare("SELECT step, time, prompt, text, id FROM eval_samples WHERE run_id = ? AND id > ? ORDER BY id");
    if (!stmt)
        return stmt.error();
    stmt->bind(1, runId).bind(2, afterId);
    std::vector<EvalSample> samples;
    auto rc = forEachRow(*stmt, [&](const Statement& s) {
        samples.push_back({s.int64(0), s.real(1), s.text(2), s.text(3), s.int64(4)});
    });
    if (!rc)
        return rc.error();
    return samples;
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
        return Aggregate{stmt->int64(0), stmt->isNull(1) ? 0 : stmt->real(1), optionalReal(*stmt, 2), optionalReal(*stmt, 3)};
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
    // Aggregates of the lowest rank's series of `key`; none when no rank has one.
    auto lowestRankAggregate = [&](const char* key) -> Result<std::optional<Aggregate>> {
        auto rank = lowestRank(key);
        if (!rank)
            return rank.error();
        if (!*rank)
            return std::optional<Aggregate>();
        auto aggregated = aggregate(key, **rank);
        if (!aggregated)
            return aggregated.error();
        return std::optional<Aggregate>(*aggregated);
    };
    auto meanOf = [](const std::optional<Aggregate>& a) {
        return a && a->count > 0 ? std::optional<double>(a->sum / double(a->count)) : std::nullopt;
    };
    auto tps = lowestRankAggregate(keys::kTokensPerS);
    if (!tps)
        return tps.error();
    stats.meanTokensPerS = meanOf(*tps);
    auto mfu = lowestRankAggregate(keys::kMfu);
    if (!mfu)
        return mfu.error();
    stats.meanMfu = meanOf(*mfu);
    const MfuPeak peak = mfuPeakOf(details->ranks);
    stats.mfuPeak = peak.source;
    stats.precisionEmulated = peak.emulated;
    auto skipped = lowestRankAggregate(keys::kSkipped);
    if (!skipped)
        return skipped.error();
    if (*skipped)
        stats.skippedSteps = std::int64_t(std::llround((*skipped)->sum));
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
    std::vector<std::string> configs, recipes, ran;
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
        ran.push_back(ranAsYaml(details->summary));
    }
    std::vector<std::string_view> configViews(configs.begin(), configs.end());
    std::vector<std::string_view> recipeViews(recipes.begin(), recipes.end());
    std::vector<std::string_view> ranViews(ran.begin(), ran.end());
    comparison.differences = diffYaml(configViews, "config");
    auto recipeDiff = diffYaml(recipeViews, "recipe");
    comparison.differences.insert(comparison.differences.end(), recipeDiff.begin(), recipeDiff.end());
    auto ranDiff = diffYaml(ranViews, "run");
    comparison.differences.insert(comparison.differences.end(), ranDiff.begin(), ranDiff.end());
    return comparison;
}

} // namespace shardscope::storage
