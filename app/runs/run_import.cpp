#include "app/runs/run_import.h"

#include "app/launcher/run_recorder.h"
#include "app/runs/run_end.h"
#include "engine/common/run_layout.h"
#include "engine/common/user_file.h"
#include "engine/protocol/events.h"
#include "storage/run_store.h"
#include "storage/store_paths.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>

namespace shardscope {

namespace fs = std::filesystem;

namespace {

// A run folder's file (events, run.json, config.yaml) is read only when it is the run's own (no
// link out of the folder: it would read what the run did not write), and through the one reader
// of user files (engine/common/user_file.h): a FIFO with no writer, a device (/dev/zero), a
// folder or a file past its kind's size is refused, not read.
constexpr std::uint64_t kMaxEventsFileBytes = std::uint64_t{4} << 30;

Result<void> checkRunFile(const fs::path& file, const fs::path& runDir)
{
    std::error_code ec;
    const auto link = fs::symlink_status(file, ec);
    if (fs::is_symlink(link)) {
        const fs::path target = fs::weakly_canonical(file, ec);
        const fs::path folder = fs::weakly_canonical(runDir, ec);
        const auto [end, _] = std::mismatch(folder.begin(), folder.end(), target.begin(), target.end());
        if (ec || end != folder.end())
            return makeError(file.string() + " is a link out of the run folder (to " + target.string()
                             + "); a run's files must be its own");
    }
    return {};
}

// A run folder's small file (run.json, config.yaml, script.yaml), checked and read whole.
Result<std::string> readRunFile(const fs::path& file, const fs::path& runDir)
{
    if (auto usable = checkRunFile(file, runDir); !usable)
        return usable.error();
    return readUserFile(file, {"a run's " + file.filename().string(), 16u << 20, std::chrono::seconds(30)});
}

} // namespace

// Every event of the directory, in time order (ranks' files interleaved by their timestamps).
Result<std::vector<protocol::Event>> readRunEvents(const fs::path& runDir, std::int64_t& malformed,
                                                   std::chrono::milliseconds deadline)
{
    const auto started = std::chrono::steady_clock::now();
    std::vector<fs::path> files;
    std::error_code ec;
    static const std::regex rankFile("rank[0-9]+\\.jsonl");
    const RunLayout layout(runDir);
    for (fs::directory_iterator it(layout.reporterEventsDir(), ec), end; !ec && it != end; it.increment(ec))
        if (std::regex_match(it->path().filename().string(), rankFile))
            files.push_back(it->path());
    if (fs::exists(layout.eventsFile(), ec))
        files.push_back(layout.eventsFile());
    if (files.empty())
        return makeError(runDir.string()
                         + " has no events (neither events/rank<N>.jsonl, which the shardscope Python "
                           "reporter writes, nor events.jsonl, which shardscope launch writes)");
    std::vector<protocol::Event> events;
    for (const auto& file : files) {
        if (auto usable = checkRunFile(file, runDir); !usable)
            return usable.error();
        // A regular file can still stall (a network filesystem that stopped answering): an
        // import ends, with the file named, rather than never.
        const auto left = deadline
                          - std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
        auto lines = readUserFileLines(file, {"a run's events", kMaxEventsFileBytes, left}, [&](const std::string& line) {
            if (line.empty())
                return;
            if (auto event = protocol::decodeEvent(line))
                events.push_back(std::move(*event));
            else
                ++malformed;
        });
        if (!lines)
            return lines.error();
    }
    std::stable_sort(events.begin(), events.end(),
                     [](const protocol::Event& a, const protocol::Event& b) { return a.time < b.time; });
    return events;
}

namespace {

// What the reporter knew of the run without a launcher (run.json): how Accelerate ran it. A field
// of the wrong type is an error naming the file and the key.
Result<void> readRunJson(const fs::path& runDir, storage::NewRun& run)
{
    const fs::path file = RunLayout(runDir).submissionFile();
    std::error_code ec;
    if (!fs::exists(file, ec))
        return {};
    auto content = readRunFile(file, runDir);
    if (!content)
        return content.error();
    const auto info = nlohmann::json::parse(*content, nullptr, false);
    if (!info.is_object())
        return makeError(file.string() + " is not a JSON object; the shardscope reporter writes run.json as one");
    const auto text = [&](const char* key, std::string& out) -> Result<void> {
        if (!info.contains(key))
            return {};
        if (!info[key].is_string())
            return makeError(file.string() + ": " + key + " is " + info[key].dump() + ", not a string");
        out = info[key].get<std::string>();
        return {};
    };
    if (auto read = text("distributed_type", run.distributedType); !read)
        return read.error();
    if (auto read = text("mixed_precision", run.mixedPrecision); !read)
        return read.error();
    if (info.contains("num_processes")) {
        const auto& n = info["num_processes"];
        if (!n.is_number_integer() || n.get<std::int64_t>() < 1 || n.get<std::int64_t>() > 1 << 20)
            return makeError(file.string() + ": num_processes is " + n.dump() + ", not a number of ranks");
        run.worldSize = std::max(run.worldSize, static_cast<int>(n.get<std::int64_t>()));
    }
    return {};
}

// The run's name: given, else the folder's (a trailing slash, as tab completion writes it, names
// the same folder); never empty.
Result<std::string> importedName(const fs::path& runDir, const std::string& given)
{
    std::string name = given;
    if (name.empty()) {
        const fs::path normal = runDir.lexically_normal();
        name = (normal.has_filename() ? normal.filename() : normal.parent_path().filename()).string();
    }
    if (name.find_first_not_of(" \t\n") == std::string::npos)
        return makeError("the run needs a name and " + runDir.string() + " gives none; give one with --name");
    return name;
}

} // namespace

std::optional<std::pair<std::int64_t, std::string>> runOwningFolder(const storage::RunStore& store, const fs::path& home,
                                                                    const fs::path& runDir)
{
    auto runs = store.listRuns();
    if (!runs)
        return std::nullopt;
    std::error_code ec;
    const fs::path wanted = fs::weakly_canonical(runDir, ec);
    for (const auto& r : *runs) {
        if (r.runDir.empty())
            continue;
        fs::path dir = r.runDir;
        if (dir.is_relative())
            dir = home / dir;
        if (fs::weakly_canonical(dir, ec) == wanted)
            return std::pair{r.id, r.name};
    }
    return std::nullopt;
}

Result<ImportedRun> importRunDirectory(const fs::path& home, const fs::path& runDirIn, const std::string& nameIn)
{
    std::error_code ec;
    const fs::path runDir = fs::absolute(runDirIn, ec);
    if (!fs::is_directory(runDir, ec))
        return makeError(runDirIn.string() + " is not a directory");
    ImportedRun imported;
    auto name = importedName(runDir, nameIn);
    if (!name)
        return name.error();
    imported.name = *name;
    auto events = readRunEvents(runDir, imported.malformed);
    if (!events)
        return events.error();
    if (events->empty())
        return makeError(runDir.string() + " has no events: " + std::to_string(imported.malformed)
                         + " line(s) were read and none was an event of the Shardscope protocol");
    if (auto store = storage::RunStore::open(storage::historyFile(home))) {
        if (auto existing = store->resolveRun(imported.name))
            return makeError("the history already has a run named " + imported.name + " (run " + std::to_string(*existing)
                             + "); give another name with --name");
        if (auto owner = runOwningFolder(*store, home, runDir))
            return makeError(runDir.string() + " is already the folder of run " + std::to_string(owner->first) + " ("
                             + owner->second + "); a folder belongs to one run (deleting the other would delete its files)");
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
    const RunLayout layout(runDir);
    for (const auto& [file, text] : {std::pair{layout.configFile(), &run.configText}, {layout.scriptFile(), &run.recipeText}}) {
        if (!fs::exists(file, ec))
            continue;
        auto content = readRunFile(file, runDir);
        if (!content)
            return content.error();
        *text = std::move(*content);
    }
    // What the reporter knew of the run without a launcher (run.json): how Accelerate ran it.
    if (auto described = readRunJson(runDir, run); !described)
        return described.error();
    run.notes = "imported from " + runDir.string();
    auto recorder = RunRecorder::start(home, run);
    if (!recorder)
        return recorder.error();
    for (const auto& event : *events)
        (*recorder)->record(event);
    // Every rank of the world must have said it finished, not only those whose files are here.
    std::set<int> world;
    for (int r = 0; r < run.worldSize; ++r)
        world.insert(r);
    world.insert(ranks.begin(), ranks.end());
    runs::RunEvidence evidence;
    evidence.ranks = runs::testimonyOf(*events);
    evidence.world = world;
    const runs::RunVerdict verdict = runs::decideRunEnd(evidence);
    imported.status = verdict.word;
    if (auto finished = (*recorder)->finish(verdict.end); !finished)
        return finished.error();
    imported.runId = (*recorder)->runId();
    imported.ranks = static_cast<int>(ranks.size());
    imported.events = static_cast<std::int64_t>(events->size());
    return imported;
}

} // namespace shardscope
