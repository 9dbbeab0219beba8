#include "app/launcher/trace_merge.h"

#include "profiler/chrome_trace.h"

#include <algorithm>
#include <filesystem>
#include <regex>

namespace shardscope {

Result<std::string> mergeRankTraces(const std::string& tracesDir)
{
    namespace fs = std::filesystem;
    static const std::regex rankFile("rank([0-9]+)\\.json");
    std::vector<std::pair<int, fs::path>> files;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(tracesDir, ec)) {
        std::smatch m;
        const std::string name = entry.path().filename().string();
        if (std::regex_match(name, m, rankFile))
            files.emplace_back(std::stoi(m[1]), entry.path());
    }
    if (files.empty())
        return std::string();
    std::sort(files.begin(), files.end());
    std::vector<profiler::RankTrace> traces;
    for (const auto& [rank, path] : files) {
        auto read = profiler::readChromeTrace(path);
        if (!read)
            return read.error();
        traces.insert(traces.end(), read->begin(), read->end());
    }
    const std::string merged = (fs::path(tracesDir) / "merged.json").string();
    if (auto written = profiler::writeMergedTrace(merged, traces, profiler::ClockAlignment{}); !written)
        return written.error();
    return merged;
}

} // namespace shardscope
