#include "ui/run_data_source.h"

#include "engine/common/attempt_folders.h"
#include "engine/common/run_layout.h"
#include "engine/recipe/recipe.h"
#include "engine/protocol/events.h"
#include "storage/config_diff.h"
#include "storage/event_rows.h"
#include "storage/metric_keys.h"
#include "storage/run_store.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <optional>
#include <type_traits>

namespace shardscope::ui {

namespace fs = std::filesystem;
using storage::RunStatus;

namespace {

// A script run's total steps, from its arguments (script.yaml's script.args) where they name them
// the way the common scripts do; none otherwise (a script's own default is unknown here).
std::optional<std::int64_t> scriptMaxSteps(const std::vector<std::pair<std::string, std::string>>& fields)
{
    std::vector<std::string> args;
    for (const auto& [key, value] : fields)
        if (key.rfind("script.args", 0) == 0)
            args.push_back(value);
    static const char* const kFlags[] = {"--steps", "--max_steps", "--max_train_steps", "--num_train_steps", "--total_steps"};
    std::optional<std::int64_t> steps;
    for (std::size_t i = 0; i < args.size(); ++i)
        for (const char* flag : kFlags) {
            std::string value;
            if (args[i] == flag && i + 1 < args.size())
                value = args[i + 1];
            else if (args[i].rfind(std::string(flag) + "=", 0) == 0)
                value = args[i].substr(std::string(flag).size() + 1);
            std::int64_t n = 0;
            if (!value.empty() && std::from_chars(value.data(), value.data() + value.size(), n).ec == std::errc{} && n > 0)
                steps = n; // the last one given wins, as argparse takes it
        }
    return steps;
}

} // namespace

bool recipeWritesText(const std::string& recipeText)
{
    const auto recipe = config::parseRecipe(recipeText, "the run's recipe");
    return recipe && recipe->data.type != "synthetic_regression";
}

std::optional<std::int64_t> recipeMaxSteps(const std::string& recipeText)
{
    // The recipe's own reader first (it reads flow style, `training: {max_steps: 6}`, too); a
    // recipe it refuses (written by another version) is read line by line.
    if (auto recipe = config::parseRecipe(recipeText, "the run's recipe"))
        return recipe->maxSteps;
    const auto fields = storage::flattenYaml(recipeText);
    // A script run keeps its script.yaml here: its steps are its arguments', not a recipe's default
    // ("step 40/100" for a script that asked for 40).
    if (std::any_of(fields.begin(), fields.end(), [](const auto& f) { return f.first.rfind("script.", 0) == 0; }))
        return scriptMaxSteps(fields);
    for (const auto& [key, value] : fields) {
        if (key != "training.max_steps")
            continue;
        std::int64_t steps = 0;
        const auto* end = value.data() + value.size();
        if (std::from_chars(value.data(), end, steps).ec == std::errc{})
            return steps;
        return std::nullopt;
    }
    return config::Recipe{}.maxSteps; // the recipe schema's default
}

namespace {

// The logs folder holding a cluster run's rank: its newest attempt's node folder that has the
// rank's log (attempts/<N>/node<M>/logs/); none before any has.
std::optional<std::string> clusterRankLogs(const RunLayout& run, int rank)
{
    std::error_code ec;
    for (const auto& folder : attemptRunFolders(run))
        if (const RunLayout attempt(folder); fs::exists(attempt.logsDir() / RunLayout::rankLogName(rank), ec))
            return attempt.logsDir().string();
    return std::nullopt;
}

} // namespace

RunFiles RunDataSource::readFiles(const RunInfo& info, int rank, std::uint64_t logOffset, bool readCommand) const
{
    RunFiles files;
    if (info.runDir.empty())
        return files;
    const RunLayout layout(info.runDir);
    if (readCommand) {
        files.command = std::string();
        std::ifstream command(layout.commandFile(), std::ios::binary);
        std::string text(1 << 20, '\0');
        command.read(text.data(), static_cast<std::streamsize>(text.size()));
        text.resize(static_cast<std::size_t>(std::max<std::streamsize>(0, command.gcount())));
        std::size_t from = 0;
        while (from < text.size()) {
            const std::size_t end = std::min(text.find('\n', from), text.size());
            if (end > from && text[from] != '#')
                *files.command = text.substr(from, end - from); // the last command line (after the shebang and comments)
            from = end + 1;
        }
        // A script run has no plan.json; an engine run's mesh is in it.
        auto plan = config::loadPlan(layout.planFile().string());
        files.mesh = plan ? config::describeMesh(*plan) : config::MeshDescription{};
    }
    files.logsDir = info.logsDir.empty() ? layout.logsDir().string() : info.logsDir;
    if (!info.job.empty()) // a cluster run: each node's launcher keeps its ranks' logs in its own folder
        if (auto nodeLogs = clusterRankLogs(layout, rank))
            files.logsDir = *nodeLogs;
    std::ifstream log(fs::path(files.logsDir) / RunLayout::rankLogName(rank), std::ios::binary | std::ios::ate);
    if (!log)
        return files;
    files.logOffset = logOffset;
    const auto size = static_cast<std::uint64_t>(std::max<std::streamoff>(0, log.tellg()));
    if (size < logOffset) {
        files.logShrunk = true;
        return files;
    }
    files.log.resize(static_cast<std::size_t>(std::min<std::uint64_t>(size - logOffset, 4 * 1024 * 1024))); // the rest next time
    log.seekg(static_cast<std::streamoff>(logOffset));
    log.read(files.log.data(), static_cast<std::streamsize>(files.log.size()));
    files.log.resize(static_cast<std::size_t>(std::max<std::streamsize>(0, log.gcount())));
    return files;
}

StoreRunSource::StoreRunSource(fs::path databaseFile, std::int64_t runId, int rowsPerPoll)
    : m_databaseFile(std::move(databaseFile)), m_runId(runId), m_rowsPerPoll(rowsPerPoll)
{
}

std::string StoreRunSource::describe() const { return "history run " + std::to_string(m_runId); }

Result<RunUpdate> StoreRunSource::poll()
{
    if (!m_store) {
        storage::StoreOptions options;
        options.markInterrupted = false; // a viewer never changes a run's status
        auto store = storage::RunStore::open(m_databaseFile, options);
        if (!store)
            return store.error();
        m_store = std::make_shared<storage::RunStore>(std::move(*store));
    }
    auto& store = *static_cast<storage::RunStore*>(m_store.get());

    RunUpdate update;
    auto details = store.run(m_runId);
    if (!details)
        return details.error();
    const auto& s = details->summary;
    update.info.runId = s.id;
    update.info.name = s.name;
    update.info.status = s.status;
    update.info.startedAt = s.startedAt;
    update.info.endedAt = s.endedAt;
    if (!m_recipeRead) {
        m_maxSteps = recipeMaxSteps(details->recipeText);
        m_writesText = recipeWritesText(details->recipeText);
        m_recipeRead = true;
    }
    update.info.maxSteps = m_maxSteps;
    update.info.writesText = m_writesText;
    int newestAttempt = 0;
    for (const auto& attempt : details->attempts)
        newestAttempt = std::max(newestAttempt, attempt.attempt);
    if (newestAttempt > 0) {
        const fs::path attemptLogs = RunLayout(RunLayout(s.runDir).attemptDir(newestAttempt)).logsDir();
        std::error_code ec;
        if (fs::is_directory(attemptLogs, ec))
            update.info.logsDir = attemptLogs.string();
    }
    update.info.rootCauseRank = details->rootCauseRank;
    update.info.error = details->error;
    update.info.runDir = s.runDir;
    update.info.distributedType = s.distributedType;
    update.info.mixedPrecision = s.mixedPrecision;
    update.info.worldSize = s.worldSize;
    update.info.launcher = details->launcher;
    update.info.job = s.job;
    update.info.statusDetail = s.statusDetail;
    const storage::MfuPeak peak = storage::mfuPeakOf(details->ranks);
    update.info.mfuPeak = peak.source;
    update.info.precisionEmulated = peak.emulated;

    auto rows = store.metricsSince(m_runId, m_cursor, m_rowsPerPoll);
    if (!rows)
        return rows.error();
    update.rows = std::move(*rows);
    if (!update.rows.empty())
        m_cursor = update.rows.back().id;
    update.more = static_cast<int>(update.rows.size()) >= m_rowsPerPoll;

    // By row id, as the metrics: the evals sort by rank and step, and a new one of rank 0 lands
    // before rank 1's older ones (the last evals of a live run were lost that way).
    auto evals = store.evalsSince(m_runId, m_evalCursor);
    if (!evals)
        return evals.error();
    if (!evals->empty())
        m_evalCursor = evals->back().id;
    update.evals = std::move(*evals);
    auto samples = store.evalSamplesSince(m_runId, m_sampleCursor);
    if (!samples)
        return samples.error();
    if (!samples->empty())
        m_sampleCursor = samples->back().id;
    update.samples = std::move(*samples);
    return update;
}

EventFileRunSource::EventFileRunSource(fs::path runDir) : m_runDir(std::move(runDir))
{
    m_info.name = m_runDir.filename().string();
    m_info.runDir = m_runDir.string();
}

std::string EventFileRunSource::describe() const { return "events.jsonl in " + m_runDir.string(); }

Result<RunUpdate> EventFileRunSource::poll()
{
    if (!m_infoRead) {
        std::ifstream recipe(RunLayout(m_runDir).recipeFile());
        if (recipe) {
            const std::string text((std::istreambuf_iterator<char>(recipe)), std::istreambuf_iterator<char>());
            m_info.maxSteps = recipeMaxSteps(text);
            m_info.writesText = recipeWritesText(text);
        }
        m_infoRead = true;
    }
    RunUpdate update;
    std::ifstream in(RunLayout(m_runDir).eventsFile(), std::ios::binary);
    if (!in) {
        update.info = m_info; // not started yet: the launcher creates the file with the run
        return update;
    }
    in.seekg(static_cast<std::streamoff>(m_offset));
    std::string line;
    while (std::getline(in, line)) {
        if (in.eof())
            break; // a line still being written: read it whole next time
        m_offset += line.size() + 1;
        if (line.empty())
            continue;
        auto event = protocol::decodeEvent(line);
        if (!event)
            continue; // the launcher reports bad lines; a viewer skips them
        const int rank = event->rank;
        const double time = event->time;
        std::visit(
            [&](const auto& body) {
                using T = std::decay_t<decltype(body)>;
                if constexpr (std::is_same_v<T, protocol::HelloEvent>) {
                    if (m_info.status == RunStatus::Pending)
                        m_info.status = RunStatus::Running;
                    if (!m_info.startedAt || time < *m_info.startedAt)
                        m_info.startedAt = time;
                    m_info.worldSize = std::max(m_info.worldSize, body.worldSize);
                    m_info.precisionEmulated = m_info.precisionEmulated || body.precisionEmulated;
                    if (m_info.mfuPeak.empty())
                        m_info.mfuPeak = body.peakSource;
                } else if constexpr (std::is_same_v<T, protocol::StepEvent>) {
                    if (m_info.status == RunStatus::Pending)
                        m_info.status = RunStatus::Running;
                    if (!m_info.startedAt)
                        m_info.startedAt = time;
                    // The rows the launcher writes to the history (storage/event_rows.h).
                    for (const auto& metric : storage::stepMetrics(body))
                        update.rows.push_back({m_nextRowId++, rank, body.step, time, std::string(metric.key), metric.value});
                } else if constexpr (std::is_same_v<T, protocol::EvalEvent>) {
                    for (auto& record : storage::evalRecords(rank, time, body))
                        update.evals.push_back(std::move(record));
                    for (const auto& sample : body.samples)
                        update.samples.push_back({body.step, time, sample.prompt, sample.text});
                } else if constexpr (std::is_same_v<T, protocol::ErrorEvent>) {
                    if (!m_info.rootCauseRank) {
                        m_info.rootCauseRank = rank;
                        m_info.error = body.message;
                    }
                } else if constexpr (std::is_same_v<T, protocol::DoneEvent>) {
                    // Ranks finish one by one; a failure anywhere makes the run failed.
                    const auto status = storage::parseRunStatus(body.status).value_or(RunStatus::Completed);
                    if (m_info.status != RunStatus::Failed)
                        m_info.status = status;
                    m_info.endedAt = time;
                }
            },
            event->body);
    }
    update.info = m_info;
    return update;
}

} // namespace shardscope::ui
