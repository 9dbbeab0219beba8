#pragma once

// The launcher's side of the run history: creates the run's row, turns each decoded event into
// store rows (through storage's batching RunWriter), and records how the run ended (as
// runs::decideRunEnd decided it). The store
// never stops a run: if it cannot be opened or written, the run goes on and the launcher says so.

#include "app/launcher/launcher.h"
#include "engine/common/result.h"
#include "engine/protocol/events.h"
#include "storage/run_types.h"

#include <filesystem>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace shardscope {

namespace storage {
class RunWriter;
}

class RunRecorder {
public:
    // Creates the run (pending → running; a cluster job's stays pending until it runs) in
    // <home>/history.sqlite and opens its writer.
    enum class Starts { Now, Later };
    static Result<std::unique_ptr<RunRecorder>> start(const std::filesystem::path& home, const storage::NewRun& run,
                                                      Starts starts = Starts::Now);
    // Goes on recording run `runId` of <home>/history.sqlite as its next attempt (RunStore::continueRun).
    static Result<std::unique_ptr<RunRecorder>> resume(const std::filesystem::path& home, std::int64_t runId,
                                                       const storage::RunAttempt& attempt);
    ~RunRecorder();

    void record(const protocol::Event& event);
    // Records the end. A history that cannot be written (a full disk) is retried for up to
    // `patience`; the error says what failed when it still cannot.
    Result<void> finish(const storage::RunEnd& end, std::chrono::milliseconds patience = std::chrono::seconds(10));

    std::int64_t runId() const { return m_runId; }

private:
    RunRecorder() = default;

    std::int64_t m_runId = 0;
    std::unique_ptr<storage::RunWriter> m_writer;
    std::optional<storage::RunAttempt> m_attempt; // a continued run's attempt: its end recorded with the run's
    std::filesystem::path m_history;
};

// The last `lines` lines of a text file (a rank's log), for failure reports; blank lines at its end
// do not count.
std::string tailOfFile(const std::string& path, int lines);

} // namespace shardscope
