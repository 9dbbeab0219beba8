#include "app/launcher/run_import.h"

#include "app/launcher/run_recorder.h"
#include "engine/protocol/events.h"
#include "storage/run_store.h"
#include "storage/store_paths.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <set>

namespace shardscope {

namespace fs = std::filesystem;

// Every event of the directory, in time order (ranks' files interleaved by their timestamps).
Result<std::vector<protocol::Event>> readRunEvents(const fs::path& runDir, std::int64_t& malformed)
{
    std::vector<fs::path> files;
    std::error_code ec;
    static const std::regex rankFile("rank[0-9]+\\.jsonl");
    for (fs::directory_iterator it(runDir / "events", ec), end; !ec && it != end; it.increment(ec))
        if (std::regex_match(it->path().filename().string(), rankFile))
            files.push_back(it->path());
    if (fs::exists(runDir / "events.jsonl", ec))
        files.push_back(runDir / "events.jsonl");
    if (files.empty())
        return makeError(runDir.string()
                         + " has no events (neither events/rank<N>.jsonl, which the shardscope Python "
                           "reporter writes, nor events.jsonl, which shardscope launch writes)");
    std::vector<protocol::Event> events;
    for (const auto& file : files) {
        std::ifstream in(file);
        if (!in)
            return makeError("cannot read " + file.string());
        std::string line;
        while (std::getline(in, line)) {
            if (line.empty())
                continue;
            if (auto event = protocol::decodeEvent(line))
                events.push_back(std::move(*event));
            else
                ++malformed;
        }
    }
    std::stable_sort(events.begin(), events.end(),
                     [](const protocol::Event& a, const protocol::Event& b) { return a.time < b.time; });
    return events;
}

storage::RunEnd endFromEvents(const std::vector<protocol::Event>& events, const std::set<int>& ranks, std::string& status)
{
    storage::RunEnd end;
    std::map<int, std::string> done;
    for (const auto& event : events) {
        if (const auto* d = std::get_if<protocol::DoneEvent>(&event.body))
            done[event.rank] = d->status;
        if (const auto* e = std::get_if<protocol::ErrorEvent>(&event.body);
            e && e->kind != protocol::kPeerLostKind && !end.rootCauseRank) {
            end.rootCauseRank = event.rank;
            end.error = e->kind + ": " + e->message;
        }
    }
    const bool allCompleted = std::all_of(ranks.begin(), ranks.end(),
                                          [&](int r) { return done.count(r) && done.at(r) == "completed"; });
    if (end.rootCauseRank) {
        end.status = storage::RunStatus::Failed;
        status = "failed";
    } else if (allCompleted) {
        end.status = storage::RunStatus::Completed;
        end.exitCode = 0;
        status = "completed";
    } else {
        // Not a success it was not: the history has no "unknown", so failed, saying why.
        end.status = storage::RunStatus::Failed;
        end.error = "not every rank reported its end (killed, or its files were copied while it ran)";
        status = "failed (unfinished)";
    }
    return end;
}

Result<ImportedRun> importRunDirectory(const fs::path& home, const fs::path& runDirIn, const std::string& nameIn)
{
    std::error_code ec;
    const fs::path runDir = fs::absolute(runDirIn, ec);
    if (!fs::is_directory(runDir, ec))
        return makeError(runDirIn.string() + " is not a directory");
    ImportedRun imported;
    imported.name = nameIn.empty() ? runDir.filename().string() : nameIn;
    auto events = readRunEvents(runDir, imported.malformed);
    if (!events)
        return events.error();
    if (auto store = storage::RunStore::open(storage::historyFile(home))) {
        if (auto existing = store->resolveRun(imported.name))
            return makeError("the history already has a run named " + imported.name + " (run " + std::to_string(*existing)
                             + "); give another name with --name");
    }
    std::set<int> ranks;
    storage::NewRun run;
    run.name = imported.name;
    run.runDir = runDir.string();
    for (const auto& event : *events) {
        ranks.insert(event.rank);
        if (const auto* hello = std::get_if<protocol::HelloEvent>(&event.body))
            run.worldSize = std::max(run.worldSize, hello->worldSize);
    }
    run.worldSize = std::max(run.worldSize, ranks.empty() ? 1 : *ranks.rbegin() + 1);
    if (std::ifstream in(runDir / "config.yaml"); in)
        run.configText.assign(std::istreambuf_iterator<char>(in), {});
    // What the reporter knew of the run without a launcher (run.json): how Accelerate ran it.
    if (std::ifstream in(runDir / "run.json"); in) {
        const auto info = nlohmann::json::parse(in, nullptr, false);
        if (info.is_object()) {
            run.distributedType = info.value("distributed_type", std::string());
            run.mixedPrecision = info.value("mixed_precision", std::string());
            run.worldSize = std::max(run.worldSize, info.value("num_processes", 1));
        }
    }
    if (std::ifstream in(runDir / "script.yaml"); in)
        run.recipeText.assign(std::istreambuf_iterator<char>(in), {});
    run.notes = "imported from " + runDir.string();
    auto recorder = RunRecorder::start(home, run);
    if (!recorder)
        return recorder.error();
    for (const auto& event : *events)
        (*recorder)->record(event);
    const storage::RunEnd end = endFromEvents(*events, ranks, imported.status);
    if (auto finished = (*recorder)->finish(end); !finished)
        return finished.error();
    imported.runId = (*recorder)->runId();
    imported.ranks = static_cast<int>(ranks.size());
    imported.events = static_cast<std::int64_t>(events->size());
    return imported;
}

} // namespace shardscope
