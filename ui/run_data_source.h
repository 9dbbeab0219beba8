#pragma once

// Where the Run page gets a run's data from. Two sources behind one interface:
//  - StoreRunSource reads the run history (RunStore::metricsSince with a row-id cursor), the
//    normal case now that the launcher records every run;
//  - EventFileRunSource tails runs/<id>/events.jsonl, for a run directory that is not in the
//    store (launched with --no_history, copied from another machine, or an older launcher).
// Each poll() returns only what is new since the previous one, so the page appends.

#include "engine/common/result.h"
#include "engine/plan/run_plan.h"
#include "storage/run_types.h"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace shardscope::ui {

struct RunInfo {
    std::int64_t runId = 0; // in the history; 0: a run directory read without it
    std::string name;
    storage::RunStatus status = storage::RunStatus::Pending;
    std::optional<double> startedAt, endedAt; // seconds since the Unix epoch
    std::optional<std::int64_t> maxSteps; // from the recipe, for the ETA
    std::optional<int> rootCauseRank;
    std::string error;
    std::string runDir;
    std::string distributedType, mixedPrecision;
    int worldSize = 1;
    storage::LauncherIdentity launcher; // pid 0 when unknown
    std::string job; // a cluster run's job ("slurm:123"); empty: a run of this machine
    bool writesText = false; // an engine run of a language model (its export can continue a prompt)
    // Where the ranks' logs are: the run directory's logs/, or its newest attempt's
    // (attempts/<n>/logs, a run gone on with Resume or requeued); empty: the run directory's.
    std::string logsDir;
    std::string statusDetail; // what the scheduler says of it now ("pending (Resources): ...")
    std::string mfuPeak; // what its MFU is against (the lowest rank's peak source); empty: unknown
    bool precisionEmulated = false; // its precision has no unit of its own on a rank's device
};

struct RunUpdate {
    RunInfo info;
    std::vector<storage::MetricRow> rows; // new since the last poll, in insertion order
    std::vector<storage::EvalRecord> evals; // new since the last poll
    std::vector<storage::EvalSample> samples; // new since the last poll
    bool more = false; // the poll stopped at its row limit: poll again right away
};

// What the Run page shows beside the rows, read from the run's directory where poll() runs.
struct RunFiles {
    // Asked for once (readCommand): a script run's command line (the last command of its
    // command.sh; empty for an engine run), and an engine run's device mesh from its plan.json
    // (empty for one data-parallel dimension, or a script run).
    std::optional<std::string> command;
    std::optional<config::MeshDescription> mesh;
    std::string logsDir; // the folder the log was read from; empty: no run directory known yet
    // The rank's log from `logOffset` on (4 MiB at most: the rest next time); logOffset stays 0
    // when there is no log file yet.
    std::uint64_t logOffset = 0;
    std::string log;
    bool logShrunk = false; // the file is shorter than what was read: rotated or rewritten
};

class RunDataSource {
public:
    virtual ~RunDataSource() = default;
    virtual Result<RunUpdate> poll() = 0;
    virtual std::string describe() const = 0; // "history run 12", "events.jsonl in <dir>"

    // The files of the run `info` describes (its runDir, and logsDir: the newest attempt's logs,
    // else the run directory's): its command and mesh when `readCommand`, and `rank`'s log from
    // `logOffset`. Nothing when the run directory is not known yet.
    RunFiles readFiles(const RunInfo& info, int rank, std::uint64_t logOffset, bool readCommand) const;
};

class StoreRunSource final : public RunDataSource {
public:
    StoreRunSource(std::filesystem::path databaseFile, std::int64_t runId, int rowsPerPoll = 200000);
    Result<RunUpdate> poll() override;
    std::string describe() const override;

private:
    struct Impl;
    std::filesystem::path m_databaseFile;
    std::int64_t m_runId;
    int m_rowsPerPoll;
    std::int64_t m_cursor = 0;
    std::int64_t m_evalCursor = 0; // the last eval row read
    std::int64_t m_sampleCursor = 0; // the last eval sample row read
    // What the run's recipe says (it never changes), read once: its step count, whether it writes text.
    bool m_recipeRead = false;
    std::optional<std::int64_t> m_maxSteps;
    bool m_writesText = false;
    std::shared_ptr<void> m_store; // the RunStore, opened on first poll (on the polling thread)
};

class EventFileRunSource final : public RunDataSource {
public:
    explicit EventFileRunSource(std::filesystem::path runDir);
    Result<RunUpdate> poll() override;
    std::string describe() const override;

private:
    std::filesystem::path m_runDir;
    std::uint64_t m_offset = 0; // bytes of events.jsonl consumed (complete lines only)
    std::int64_t m_nextRowId = 1;
    RunInfo m_info;
    bool m_infoRead = false;
};

// training.max_steps of a recipe (the recipe's default when absent), read without the engine.
std::optional<std::int64_t> recipeMaxSteps(const std::string& recipeText);
// Whether a run of this recipe trains a language model (its export continues prompts).
bool recipeWritesText(const std::string& recipeText);

} // namespace shardscope::ui
