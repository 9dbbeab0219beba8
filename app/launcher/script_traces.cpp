#include "app/launcher/script_traces.h"
#include "engine/common/wall_clock.h"

#include "profiler/analysis.h"
#include "profiler/chrome_trace.h"
#include "profiler/kineto_trace.h"

#include <algorithm>
#include <chrono>
#include <map>

namespace shardscope {

namespace fs = std::filesystem;

namespace {

// The launcher's own merged.json (of an earlier pick-up) is not a rank's.
bool isTraceName(const std::string& name) { return name != "merged.json" && profiler::isTraceFileName(name); }

} // namespace

ScriptTraces collectScriptTraces(const fs::path& tracesDir, int ranks)
{
    ScriptTraces out;
    std::vector<fs::path> files;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(tracesDir, ec), end; !ec && it != end; it.increment(ec))
        if (it->is_regular_file(ec) && isTraceName(it->path().filename().string()))
            files.push_back(it->path());
    std::sort(files.begin(), files.end());
    std::map<int, std::pair<profiler::RankTrace, fs::path>> byRank;
    for (const fs::path& file : files) {
        auto read = profiler::readTraceFile(file);
        if (!read) {
            out.warnings.push_back(read.error().message);
            continue;
        }
        for (auto& trace : *read) {
            if (auto fits = profiler::checkRankCount({trace}, ranks); !fits) {
                out.warnings.push_back(file.string() + ": " + fits.error().message);
                continue;
            }
            if (byRank.count(trace.rank)) {
                out.warnings.push_back(file.string() + ": a second trace of rank " + std::to_string(trace.rank) + " (the first, "
                                       + byRank.at(trace.rank).second.filename().string() + ", is kept)");
                continue;
            }
            byRank.emplace(trace.rank, std::make_pair(std::move(trace), file));
        }
    }
    std::vector<profiler::RankTrace> traces;
    for (auto& [rank, entry] : byRank) {
        const auto s = profiler::summarise(entry.first);
        protocol::Event event;
        event.rank = rank;
        event.time = unixSeconds();
        event.body = protocol::TraceEvent{
            entry.second.string(), entry.first.source, {s.compute, s.comm, s.memory, s.idle, s.overlap}};
        out.events.push_back(std::move(event));
        traces.push_back(std::move(entry.first));
    }
    if (!traces.empty()) {
        const fs::path merged = tracesDir / "merged.json";
        if (auto written = profiler::writeMergedTrace(merged, traces, profiler::ClockAlignment{}); written)
            out.merged = merged.string();
        else
            out.warnings.push_back("the merged trace was not written: " + written.error().message);
    }
    return out;
}

} // namespace shardscope
