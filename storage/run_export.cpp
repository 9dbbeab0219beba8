// RunStore: a run as CSV metrics or one JSON document.

#include "storage/run_store.h"

#include "engine/common/text_format.h"
#include "engine/common/json_string.h"
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
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <ostream>

namespace shardscope::storage {

using namespace detail;

namespace {

std::string formatNumber(double value) { return shortestNumber(value); }

std::string jsonString(std::string_view text) { return jsonStringLiteral(text); }

// JSON has no NaN or infinity: the strings the event protocol uses (Note [non-finite numbers]).
std::string jsonNumber(double value)
{
    if (std::isfinite(value))
        return formatNumber(value);
    return std::isnan(value) ? "\"NaN\"" : value > 0 ? "\"Infinity\"" : "\"-Infinity\"";
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

} // namespace

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
        out << run << s.int64(0) << ',' << s.int64(1) << ',' << formatNumber(s.real(2)) << ',' << csvField(s.text(3)) << ','
            << (s.isNull(4) ? std::string() : formatNumber(value)) << '\n'; // a NaN value is written nan (pandas reads it)
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
        << ", \"root_cause_rank\": " << jsonOptional(details->rootCauseRank) << ", \"error\": " << jsonString(details->error)
        << ", \"notes\": " << jsonString(details->notes) << ", \"config\": " << jsonString(details->configText)
        << ", \"recipe\": " << jsonString(details->recipeText) << "},\n  \"tags\": [";
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
        out << (firstSeries ? "\n    " : ",\n    ") << "{\"key\": " << jsonString(currentKey) << ", \"rank\": " << currentRank
            << ", \"step\": [" << steps << "], \"time\": [" << times << "], \"value\": [" << values << "]}";
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
