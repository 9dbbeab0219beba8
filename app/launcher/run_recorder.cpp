#include "app/launcher/run_recorder.h"
#include "engine/common/wall_clock.h"

#include "storage/event_rows.h"
#include "storage/run_store.h"
#include "storage/run_writer.h"
#include "storage/store_paths.h"

#include <deque>
#include <fstream>
#include <thread>

namespace shardscope {

Result<std::unique_ptr<RunRecorder>> RunRecorder::start(const std::filesystem::path& home, const storage::NewRun& run,
                                                        Starts starts)
{
    std::error_code ec;
    std::filesystem::create_directories(home, ec);
    const auto file = storage::historyFile(home);
    auto store = storage::RunStore::open(file);
    if (!store)
        return store.error();
    auto id = store->createRun(run);
    if (!id)
        return id.error();
    if (starts == Starts::Now)
        if (auto running = store->markRunning(*id); !running)
            return running.error();
    auto writer = storage::RunWriter::open(file, *id);
    if (!writer)
        return writer.error();
    std::unique_ptr<RunRecorder> recorder(new RunRecorder());
    recorder->m_runId = *id;
    recorder->m_writer = std::move(*writer);
    return recorder;
}

Result<std::unique_ptr<RunRecorder>> RunRecorder::resume(const std::filesystem::path& home, std::int64_t runId,
                                                         const storage::RunAttempt& attempt)
{
    const auto file = storage::historyFile(home);
    auto store = storage::RunStore::open(file);
    if (!store)
        return store.error();
    if (auto continued = store->continueRun(runId, attempt, storage::LauncherIdentity::current()); !continued)
        return continued.error();
    auto writer = storage::RunWriter::open(file, runId);
    if (!writer)
        return writer.error();
    std::unique_ptr<RunRecorder> recorder(new RunRecorder());
    recorder->m_runId = runId;
    recorder->m_writer = std::move(*writer);
    recorder->m_attempt = attempt;
    recorder->m_history = file;
    return recorder;
}

RunRecorder::~RunRecorder() = default;

void RunRecorder::record(const protocol::Event& event) { storage::writeEventRows(*m_writer, event); }

Result<void> RunRecorder::finish(const storage::RunEnd& end, std::chrono::milliseconds patience)
{
    auto finished = m_writer->finish(end);
    const auto deadline = std::chrono::steady_clock::now() + patience;
    // The writer keeps the end and retries it on its own; wait for one of its attempts to land.
    while (!finished && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
        finished = m_writer->flush();
        if (finished && !m_writer->finishedRun())
            finished = makeError("the end of the run is not recorded yet");
    }
    if (finished && m_attempt) {
        m_attempt->endedAt = unixSeconds();
        m_attempt->exitCode = end.exitCode;
        auto store = storage::RunStore::open(m_history);
        if (!store)
            return store.error();
        return store->recordAttempt(m_runId, *m_attempt);
    }
    return finished;
}

std::string tailOfFile(const std::string& path, int lines)
{
    std::ifstream in(path);
    std::deque<std::string> last;
    std::string line;
    int blanks = 0; // held back until a line follows them: blank lines at the end are no lines
    while (std::getline(in, line)) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) {
            ++blanks;
            continue;
        }
        for (; blanks > 0; --blanks)
            last.emplace_back();
        last.push_back(line);
        while (static_cast<int>(last.size()) > lines)
            last.pop_front();
    }
    std::string out;
    for (const auto& l : last)
        out += l + "\n";
    return out;
}

} // namespace shardscope
