// Fuzz target: `shardscope runs import` (app/runs/run_import.h) on a run folder made from the
// input. The input is split at form feeds ('\f') into run.json, events/rank0.jsonl,
// events/rank1.jsonl and events.jsonl (missing parts: no file). Invariants: the import never
// crashes or throws; a refusal has a message; an import that succeeds has a name, and is
// "completed" only when every rank of the world it records said it completed; the history then holds the
// run under that name with that status; the run folder is left as it was (import never deletes).

#include "app/runs/run_import.h"
#include "storage/run_store.h"
#include "storage/store_paths.h"
#include "tests/fuzz/fuzz_check.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <variant>
#include <vector>

namespace fs = std::filesystem;

namespace {

// One scratch folder per process, removed at exit.
const fs::path& scratch()
{
    static const fs::path dir = [] {
        std::string pattern = (fs::temp_directory_path() / "shardscope-fuzz-import-XXXXXX").string();
        const char* made = ::mkdtemp(pattern.data());
        if (!made)
            std::abort();
        std::atexit([] {
            std::error_code ec;
            fs::remove_all(scratch(), ec);
        });
        return fs::path(made);
    }();
    return dir;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    static long counter = 0;
    const std::string text = shardscope::fuzz::text(data, size);
    const fs::path runDir = scratch() / ("run" + std::to_string(++counter));
    std::error_code ec;
    fs::create_directories(runDir / "events", ec);
    const fs::path parts[] = {runDir / "run.json", runDir / "events/rank0.jsonl", runDir / "events/rank1.jsonl",
                              runDir / "events.jsonl"};
    std::size_t start = 0, written = 0;
    for (const auto& part : parts) {
        if (start > text.size())
            break;
        const std::size_t end = std::min(text.find('\f', start), text.size());
        std::ofstream(part, std::ios::binary) << text.substr(start, end - start);
        start = end + 1;
        ++written;
    }
    const fs::path home = scratch() / "home";
    auto imported = shardscope::importRunDirectory(home, runDir, "fuzz-" + std::to_string(counter));
    if (!imported) {
        FUZZ_CHECK(!imported.error().message.empty(), "a refused import without a message");
    } else {
        FUZZ_CHECK(!imported->name.empty(), "an imported run without a name");
        FUZZ_CHECK(imported->status != "completed" || (imported->ranks >= 1 && imported->events > 0),
                   "completed with no rank or no event: " + imported->status);
        auto store = shardscope::storage::RunStore::open(shardscope::storage::historyFile(home));
        FUZZ_CHECK(store.ok(), "the history does not open after an import");
        auto id = store->resolveRun(imported->name);
        FUZZ_CHECK(id.ok() && *id == imported->runId, "the imported run is not in the history under its name");
        if (imported->status == "completed") {
            // Every rank of the world the history records said it completed.
            std::int64_t malformed = 0;
            auto events = shardscope::readRunEvents(runDir, malformed);
            std::set<int> completed;
            for (const auto& event : events ? *events : std::vector<shardscope::protocol::Event>{})
                if (const auto* done = std::get_if<shardscope::protocol::DoneEvent>(&event.body);
                    done && done->status == "completed")
                    completed.insert(event.rank);
            auto details = store->run(imported->runId);
            FUZZ_CHECK(details.ok(), "the imported run cannot be read back");
            for (int rank = 0; rank < details->summary.worldSize; ++rank)
                FUZZ_CHECK(completed.count(rank) == 1, "completed, but rank " + std::to_string(rank) + " of "
                                                           + std::to_string(details->summary.worldSize) + " never said so");
        }
    }
    std::size_t left = 0;
    for (const auto& part : parts)
        left += fs::exists(part, ec) ? 1 : 0;
    FUZZ_CHECK(left == written, "the import removed a file of the run folder");
    fs::remove_all(runDir, ec);
    return 0;
}
