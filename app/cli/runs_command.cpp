// `shardscope runs list|show|compare|export|delete`: the run history from a terminal.
// The store is $SHARDSCOPE_HOME/history.sqlite (else the XDG data folder); --home overrides.

#include "app/cli/commands.h"
#include "storage/config_diff.h"
#include "app/cluster/follower.h"
#include "engine/common/text_format.h"
#include "app/launcher/hang_report.h"
#include "app/launcher/program.h"
#include "app/runs/local_run.h"
#include "app/runs/run_import.h"
#include "app/launcher/script_run.h"
#include "engine/recipe/recipe.h"
#include "engine/common/attempt_folders.h"
#include "engine/common/run_layout.h"
#include "engine/plan/run_plan.h"
#include "engine/common/byte_format.h"
#include "storage/run_store.h"
#include "storage/store_paths.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <iostream>
#include <map>
#include <optional>

namespace shardscope::cli {

namespace {

using namespace shardscope::storage;

struct RunsArgs {
    std::string home;
    // list
    std::vector<std::string> statuses;
    std::string type, precision, tag, search, sort = "created";
    bool ascending = false;
    std::int64_t limit = -1;
    // show / compare / export / delete
    std::vector<std::string> runs;
    bool showConfig = false;
    std::string format = "csv";
    std::string output;
    bool yes = false;
    bool keepFiles = false;
    bool readsOnly = true; // every subcommand but delete and import
    // import
    std::string directory, name;
    // diagnose
    double patience = 10; // seconds
    // generate
    std::string prompt;
    std::int64_t maxNewTokens = 32;
    double temperature = 0;
    std::int64_t topK = 0;
    std::int64_t seed = 0;
    bool json = false;
    bool noStacks = false; // runs diagnose: no native stacks (gdb) of an engine run's ranks
    // follow
    bool all = false;
    std::string profilesFile;
};

// A text table with a header row; numbers are right-aligned unless every cell is to be left-aligned
// (key/value listings).
class Table {
public:
    explicit Table(std::vector<std::string> header, bool alignNumbers = true) : m_alignNumbers(alignNumbers)
    {
        add(std::move(header));
    }
    void add(std::vector<std::string> row)
    {
        for (auto& cell : row)
            cell = terminalSafe(cell);
        m_rows.push_back(std::move(row));
    }
    void print(std::ostream& out) const
    {
        std::vector<std::size_t> widths;
        for (const auto& row : m_rows) {
            widths.resize(std::max(widths.size(), row.size()));
            for (std::size_t c = 0; c < row.size(); ++c)
                widths[c] = std::max(widths[c], row[c].size());
        }
        for (std::size_t r = 0; r < m_rows.size(); ++r) {
            std::string line;
            for (std::size_t c = 0; c < m_rows[r].size(); ++c) {
                const auto& cell = m_rows[r][c];
                const bool numeric = m_alignNumbers && r > 0 && cell.find_first_of("0123456789") != std::string::npos
                                     && cell.find_first_not_of("0123456789.-e+ %") == std::string::npos;
                const std::string pad(widths[c] - cell.size(), ' ');
                line += numeric ? pad + cell : cell + (c + 1 < m_rows[r].size() ? pad : "");
                if (c + 1 < m_rows[r].size())
                    line += "  ";
            }
            while (!line.empty() && line.back() == ' ')
                line.pop_back();
            out << line << "\n";
        }
    }

private:
    std::vector<std::vector<std::string>> m_rows;
    bool m_alignNumbers;
};

std::string formatTime(double epochSeconds)
{
    const std::time_t t = std::time_t(epochSeconds);
    std::tm local{};
    localtime_r(&t, &local);
    char buffer[32];
    std::strftime(buffer, sizeof buffer, "%Y-%m-%d %H:%M", &local);
    return buffer;
}

// A requeued cluster job's attempts, one line each: where and when it ran, what it resumed from.
void printAttempts(const std::vector<storage::RunAttempt>& attempts)
{
    if (attempts.empty())
        return;
    std::cout << "\n";
    for (const auto& a : attempts) {
        std::cout << "attempt " << a.attempt << ": job " << terminalSafe(a.jobId.empty() ? "-" : a.jobId) << " on "
                  << terminalSafe(a.nodes.empty() ? "-" : a.nodes) << ", " << (a.startedAt ? formatTime(*a.startedAt) : "-")
                  << " to " << (a.endedAt ? formatTime(*a.endedAt) : "-") << ", "
                  << (a.resumedStep > 0
                          ? "resumed after step " + std::to_string(a.resumedStep) + " from " + terminalSafe(a.resumedFrom)
                          : std::string("from the start"))
                  << ", "
                  << (a.exitCode ? "exit " + std::to_string(*a.exitCode) : std::string("its end not seen (preempted or killed)"))
                  << (a.lostNodes.empty() ? std::string() : "; SLURM lost node " + terminalSafe(a.lostNodes)) << "\n";
    }
}

std::string formatDuration(double seconds)
{
    const auto s = std::int64_t(std::llround(seconds));
    char buffer[32];
    if (s >= 3600)
        std::snprintf(buffer, sizeof buffer, "%lldh%02lldm", static_cast<long long>(s / 3600),
                      static_cast<long long>(s % 3600 / 60));
    else if (s >= 60)
        std::snprintf(buffer, sizeof buffer, "%lldm%02llds", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
    else
        std::snprintf(buffer, sizeof buffer, "%llds", static_cast<long long>(s));
    return buffer;
}

std::string formatNumber(double value, const char* format = "%.4g")
{
    if (std::isnan(value))
        return "nan";
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, format, value);
    return buffer;
}

std::string durationOf(const RunSummary& run)
{
    if (!run.startedAt)
        return "-";
    const double end = run.endedAt ? *run.endedAt : double(std::time(nullptr));
    return formatDuration(end - *run.startedAt);
}

std::string join(const std::vector<std::string>& parts, const char* separator)
{
    std::string out;
    for (const auto& p : parts)
        out += (out.empty() ? "" : separator) + p;
    return out;
}

Result<RunStore> openStore(const RunsArgs& args)
{
    std::filesystem::path home = args.home;
    if (home.empty()) {
        auto found = shardscopeHome();
        if (!found)
            return found.error();
        home = *found;
    }
    StoreOptions options;
    options.runsRoot = runsFolder(home);
    // Listing, showing, comparing and exporting only read: a full disk or a read-only home still
    // shows the history (with a warning); what changes it needs write access.
    options.fallBackToReadOnly = args.readsOnly;
    auto store = RunStore::open(historyFile(home), options);
    if (store)
        for (const auto& warning : store->warnings())
            std::cerr << "shardscope runs: warning: " << warning << "\n";
    return store;
}

Result<std::vector<std::int64_t>> resolveAll(const RunStore& store, const std::vector<std::string>& references)
{
    std::vector<std::int64_t> ids;
    for (const auto& reference : references) {
        auto id = store.resolveRun(reference);
        if (!id)
            return id.error();
        ids.push_back(*id);
    }
    return ids;
}

int fail(const char* command, const Error& error)
{
    std::cerr << "shardscope runs " << command << ": error: " << terminalSafe(error.message) << "\n";
    return 1;
}

int runList(const RunsArgs& args)
{
    RunFilter filter;
    for (const auto& s : args.statuses) {
        auto status = parseRunStatus(s);
        if (!status)
            return fail("list", makeError("unknown status '" + s
                                          + "' (pending, running, completed, failed, "
                                            "cancelled, interrupted)"));
        filter.statuses.push_back(*status);
    }
    filter.distributedType = args.type;
    filter.mixedPrecision = args.precision;
    filter.tag = args.tag;
    filter.text = args.search;
    const std::map<std::string, RunSort> sorts = {{"created", RunSort::Created}, {"name", RunSort::Name},
                                                  {"status", RunSort::Status},   {"duration", RunSort::Duration},
                                                  {"steps", RunSort::Steps},     {"loss", RunSort::Loss}};
    filter.sort = sorts.at(args.sort);
    filter.descending = !args.ascending;
    filter.limit = args.limit;

    auto store = openStore(args);
    if (!store)
        return fail("list", store.error());
    auto runs = store->listRuns(filter);
    if (!runs)
        return fail("list", runs.error());
    if (runs->empty()) {
        std::cout << "no runs" << (filter.statuses.empty() && filter.text.empty() && filter.tag.empty() ? "" : " match")
                  << " (history: " << store->database().path() << ")\n";
        return 0;
    }
    Table table({"ID", "NAME", "STATUS", "TYPE", "PRECISION", "RANKS", "STEPS", "LOSS", "CREATED", "DURATION", "TAGS"});
    for (const auto& run : *runs) {
        table.add({std::to_string(run.id), run.name, std::string(statusName(run.status)),
                   run.distributedType.empty() ? "-" : run.distributedType, run.mixedPrecision.empty() ? "-" : run.mixedPrecision,
                   std::to_string(run.worldSize), run.lastStep ? std::to_string(*run.lastStep) : "-",
                   run.lastLoss ? formatNumber(*run.lastLoss) : "-", formatTime(run.createdAt), durationOf(run),
                   join(run.tags, ",")});
    }
    table.print(std::cout);
    return 0;
}

int runShow(const RunsArgs& args)
{
    auto store = openStore(args);
    if (!store)
        return fail("show", store.error());
    auto ids = resolveAll(*store, args.runs);
    if (!ids)
        return fail("show", ids.error());
    for (std::size_t i = 0; i < ids->size(); ++i) {
        auto details = store->run((*ids)[i]);
        if (!details)
            return fail("show", details.error());
        auto stats = store->runStats((*ids)[i]);
        if (!stats)
            return fail("show", stats.error());
        const auto& s = details->summary;
        if (i)
            std::cout << "\n";
        Table info({"run", std::to_string(s.id) + " (" + s.name + ")"}, false);
        info.add({"status", std::string(statusName(s.status))
                                + (s.statusDetail.empty() ? std::string() : " (the job is " + s.statusDetail + ")")});
        if (!s.job.empty())
            info.add({"job", s.job});
        info.add({"created", formatTime(s.createdAt)});
        if (s.startedAt)
            info.add({"started", formatTime(*s.startedAt)});
        if (s.endedAt)
            info.add({"ended", formatTime(*s.endedAt)});
        info.add({"duration", durationOf(s)});
        info.add({"distributed", (s.distributedType.empty() ? "-" : s.distributedType) + ", " + std::to_string(s.worldSize)
                                     + " ranks, precision " + (s.mixedPrecision.empty() ? "-" : s.mixedPrecision)});
        info.add({"host", s.host});
        info.add({"directory", s.runDir.empty() ? "-" : s.runDir});
        if (!s.tags.empty())
            info.add({"tags", join(s.tags, ", ")});
        if (details->exitCode)
            info.add({"exit code", std::to_string(*details->exitCode)});
        if (details->rootCauseRank)
            info.add({"root cause", "rank " + std::to_string(*details->rootCauseRank)});
        if (!details->error.empty())
            info.add({"error", details->error});
        info.add({"steps", stats->steps ? std::to_string(*stats->steps) : "-"});
        info.add({"final loss", stats->finalLoss ? formatNumber(*stats->finalLoss) : "-"});
        info.add({"best loss", stats->bestLoss ? formatNumber(*stats->bestLoss) : "-"});
        info.add({"tokens/s", stats->meanTokensPerS ? formatNumber(*stats->meanTokensPerS, "%.0f") : "-"});
        info.add({"MFU", stats->meanMfu ? formatNumber(100.0 * *stats->meanMfu, "%.1f") + " %" : "-"});
        if (!stats->mfuPeak.empty())
            info.add({"MFU against", stats->mfuPeak});
        info.add({"skipped steps", std::to_string(stats->skippedSteps)});
        info.add({"metric rows", std::to_string(details->metricRows)});
        info.add({"metrics", details->metricKeys.empty() ? "-" : join(details->metricKeys, ", ")});
        if (!details->notes.empty())
            info.add({"notes", details->notes});
        info.print(std::cout);

        if (!details->ranks.empty()) {
            std::map<int, double> peaks(stats->peakMemory.begin(), stats->peakMemory.end());
            std::cout << "\n";
            // What each rank held at the end of its last step's forward, backward and optimizer
            // step (CUDA: allocated; CPU: resident set): where memory grows within a step.
            auto lastOf = [&](int rank, const char* key) {
                auto series = store->series(s.id, rank, key);
                return series && !series->empty() ? formatBytes(series->back().value) : std::string("-");
            };
            Table ranks({"RANK", "PID", "HOST", "DEVICE", "LOCAL", "MACHINE", "PEAK MEMORY", "AFTER FWD", "AFTER BWD",
                         "AFTER OPT", "EXIT"});
            for (const auto& r : details->ranks) {
                ranks.add({std::to_string(r.info.rank), r.info.pid ? std::to_string(r.info.pid) : "-",
                           r.info.host.empty() ? "-" : r.info.host, r.info.device.empty() ? "-" : r.info.device,
                           std::to_string(r.info.localRank), std::to_string(r.info.machineRank),
                           peaks.count(r.info.rank) ? formatBytes(peaks[r.info.rank]) : "-",
                           lastOf(r.info.rank, "mem.after_forward"), lastOf(r.info.rank, "mem.after_backward"),
                           lastOf(r.info.rank, "mem.after_optimizer"), r.exitCode ? std::to_string(*r.exitCode) : "-"});
            }
            ranks.print(std::cout);
        }
        printAttempts(details->attempts);
        if (!details->checkpoints.empty()) {
            std::cout << "\n";
            Table checkpoints({"STEP", "KIND", "RANK", "SIZE", "PATH"});
            for (const auto& c : details->checkpoints)
                checkpoints.add({std::to_string(c.step), c.kind, std::to_string(c.rank), formatBytes(double(c.bytes)), c.path});
            checkpoints.print(std::cout);
        }
        if (!details->traces.empty()) {
            std::cout << "\n";
            Table traces({"RANK", "SOURCE", "COMPUTE s", "COMM s", "OVERLAP", "PATH"});
            for (const auto& t : details->traces)
                traces.add({std::to_string(t.rank), t.source, formatNumber(t.compute), formatNumber(t.comm),
                            formatNumber(t.overlap * 100, "%.0f%%"), t.path});
            traces.print(std::cout);
        }
        if (args.showConfig) {
            std::cout << "\n# config\n" << details->configText << "\n# recipe\n" << details->recipeText << "\n";
        }
    }
    return 0;
}

int runCompare(const RunsArgs& args)
{
    auto store = openStore(args);
    if (!store)
        return fail("compare", store.error());
    auto ids = resolveAll(*store, args.runs);
    if (!ids)
        return fail("compare", ids.error());
    auto comparison = store->compareRuns(*ids);
    if (!comparison)
        return fail("compare", comparison.error());

    std::vector<std::string> header = {""};
    for (const auto& run : comparison->runs)
        header.push_back(std::to_string(run.runId) + " " + run.name);
    Table summary(header);
    auto row = [&](const std::string& label, auto&& cell) {
        std::vector<std::string> cells = {label};
        for (const auto& run : comparison->runs)
            cells.push_back(cell(run));
        summary.add(std::move(cells));
    };
    row("status", [](const RunStats& r) { return std::string(statusName(r.status)); });
    row("steps", [](const RunStats& r) { return r.steps ? std::to_string(*r.steps) : "-"; });
    row("final loss", [](const RunStats& r) { return r.finalLoss ? formatNumber(*r.finalLoss) : "-"; });
    row("best loss", [](const RunStats& r) { return r.bestLoss ? formatNumber(*r.bestLoss) : "-"; });
    row("tokens/s", [](const RunStats& r) { return r.meanTokensPerS ? formatNumber(*r.meanTokensPerS, "%.0f") : "-"; });
    row("MFU", [](const RunStats& r) {
        return r.meanMfu ? formatNumber(100.0 * *r.meanMfu, "%.1f") + " %" + (r.precisionEmulated ? " (emulated)" : "") : "-";
    });
    row("skipped steps", [](const RunStats& r) { return std::to_string(r.skippedSteps); });
    row("wall time", [](const RunStats& r) { return r.wallSeconds ? formatDuration(*r.wallSeconds) : "-"; });
    int maxRank = -1;
    for (const auto& run : comparison->runs)
        for (const auto& [rank, bytes] : run.peakMemory)
            maxRank = std::max(maxRank, rank);
    for (int rank = 0; rank <= maxRank; ++rank) {
        row("peak memory rank " + std::to_string(rank), [rank](const RunStats& r) {
            for (const auto& [k, bytes] : r.peakMemory)
                if (k == rank)
                    return formatBytes(bytes);
            return std::string("-");
        });
    }
    summary.print(std::cout);

    std::cout << "\n";
    if (comparison->differences.empty()) {
        std::cout << "configs and recipes are identical\n";
        return 0;
    }
    header[0] = "KEY";
    Table diff(header);
    for (const auto& d : comparison->differences) {
        std::vector<std::string> cells = {d.file + ": " + d.keyPath};
        for (const auto& value : d.values)
            cells.push_back(value ? (value->empty() ? "\"\"" : *value) : "(absent)");
        diff.add(std::move(cells));
    }
    diff.print(std::cout);
    return 0;
}

// The run `reference` names: a run directory itself (no details), else a run of the history (id or
// name) with its details.
struct NamedRun {
    std::filesystem::path dir;
    std::optional<RunDetails> details;
};
Result<NamedRun> namedRun(const RunsArgs& args, const std::string& reference)
{
    std::error_code error;
    if (std::filesystem::is_directory(reference, error))
        return NamedRun{std::filesystem::path(reference), std::nullopt};
    auto store = openStore(args);
    if (!store)
        return store.error();
    auto id = store->resolveRun(reference);
    if (!id)
        return id.error();
    auto details = store->run(*id);
    if (!details)
        return details.error();
    return NamedRun{std::filesystem::path(details->summary.runDir), std::move(*details)};
}

// The run directory of a running run (or a directory given as such): only its ranks can be asked.
Result<std::filesystem::path> runDirectoryOf(const RunsArgs& args, const std::string& reference)
{
    auto run = namedRun(args, reference);
    if (!run)
        return run.error();
    if (run->details && isTerminal(run->details->summary.status)) {
        const RunLayout layout(run->dir);
        std::string fix = std::filesystem::exists(layout.hangReportFile())
                              ? "; the report of its hang is in " + layout.hangReportFile().string()
                              : std::string("; its error is in `shardscope runs show ") + reference + "`";
        return makeError("run " + reference + " is " + std::string(statusName(run->details->summary.status))
                         + ": only a running run's ranks can be asked" + fix);
    }
    return run->dir;
}

// The tokenizer a run's model reads: the export's (the run copies its tokenizer there), else the
// recipe's data tokenizer; empty for a model that reads bytes (GPT on text).
Result<std::string> generationTokenizer(const RunLayout& layout, const config::Recipe& recipe)
{
    if (std::filesystem::exists(layout.exportDir() / "tokenizer.json"))
        return layout.exportDir().string();
    if (const std::string folder = config::tokenizerFolder(recipe);
        !folder.empty() && std::filesystem::exists(std::filesystem::path(folder) / "tokenizer.json"))
        return folder;
    if (recipe.data.type == "text")
        return std::string();
    return makeError(layout.exportDir().string()
                     + " has no tokenizer.json and the recipe's tokenizer cannot be found: "
                       "copy the tokenizer the run trained with into the export folder");
}

// Where a run's model was exported: the newest attempt's folder that has it when the run went on
// (a continued run's attempts/<N>/, a cluster run's attempts/<N>/node0/: the attempt that ended
// the training exports), else the run folder itself.
RunLayout exportingRun(const std::filesystem::path& runDir)
{
    std::error_code ec;
    for (const auto& folder : attemptRunFolders(RunLayout(runDir)))
        if (const RunLayout attempt(folder); std::filesystem::exists(attempt.exportDir() / "config.json", ec)
                                             || std::filesystem::exists(attempt.exportDir() / "adapter", ec))
            return attempt;
    return RunLayout(runDir);
}

// Continues a prompt with a finished run's exported model (shardscope-worker generate).
int runGenerate(const RunsArgs& args, const std::string& programPath)
{
    auto run = namedRun(args, args.runs.front());
    if (!run)
        return fail("generate", run.error());
    const RunLayout layout = exportingRun(run->dir);
    const RunLayout runFolder(run->dir);
    if (!std::filesystem::exists(runFolder.recipeFile()))
        return fail("generate", makeError(run->dir.string()
                                          + " has no recipe.yaml: only the engine's runs can be tried here "
                                            "(a script's model loads with transformers' from_pretrained)"));
    if (!std::filesystem::exists(layout.exportDir() / "config.json") && std::filesystem::exists(layout.exportDir() / "adapter"))
        return fail("generate", makeError(run->dir.string()
                                          + " exported only its LoRA adapter (export/adapter): set "
                                            "export.merge_lora: true in the recipe to export the merged "
                                            "model, which can be tried here, or load the adapter with PEFT"));
    if (!std::filesystem::exists(layout.exportDir() / "config.json"))
        return fail("generate", makeError(run->dir.string()
                                          + " has no exported model yet: a run exports it when training "
                                            "ends (the recipe's export.enabled); let it finish, or "
                                            "resume it (shardscope launch --continue_run)"));
    auto recipe = config::loadRecipe(runFolder.recipeFile().string());
    if (!recipe)
        return fail("generate", recipe.error());
    if (recipe->data.type == "synthetic_regression")
        return fail("generate", makeError(run->dir.string() + " trained the " + recipe->model.type
                                          + " model on "
                                            "synthetic_regression: it writes no text to continue a prompt with"));
    auto tokenizer = generationTokenizer(layout, *recipe);
    if (!tokenizer)
        return fail("generate", tokenizer.error());
    std::vector<std::string> workerArgs{"generate",
                                        "--recipe",
                                        runFolder.recipeFile().string(),
                                        "--weights",
                                        layout.exportDir().string(),
                                        "--prompt",
                                        args.prompt,
                                        "--max_new_tokens",
                                        std::to_string(args.maxNewTokens),
                                        "--temperature",
                                        shortestNumber(args.temperature),
                                        "--top_k",
                                        std::to_string(args.topK),
                                        "--seed",
                                        std::to_string(args.seed)};
    if (!tokenizer->empty())
        workerArgs.insert(workerArgs.end(), {"--tokenizer", *tokenizer});
    auto ran = runProgram(runs::defaultWorkerPath(programPath), workerArgs, std::chrono::minutes(10));
    if (!ran)
        return fail("generate", ran.error());
    // The worker prints one JSON line; around it (stdout and stderr come together) torch may warn.
    const std::string& output = ran->output;
    nlohmann::json parsed;
    for (std::size_t end = output.size(); ran->status == 0 && end > 0 && !parsed.is_object();) {
        const std::size_t start = output.rfind('\n', end - 1);
        const std::size_t from = start == std::string::npos ? 0 : start + 1;
        if (output.compare(from, 1, "{") == 0)
            parsed = nlohmann::json::parse(output.substr(from, end - from), nullptr, /*allow_exceptions=*/false);
        if (start == std::string::npos)
            break;
        end = start;
    }
    if (ran->status != 0 || !parsed.is_object() || !parsed.contains("text"))
        return fail("generate", makeError("shardscope-worker generate failed (exit " + std::to_string(ran->status)
                                          + "): " + output.substr(output.size() > 2000 ? output.size() - 2000 : 0)));
    if (args.json)
        std::cout << parsed.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    else
        std::cout << terminalSafe(args.prompt) << terminalSafe(parsed["text"].get<std::string>()) << "\n";
    return 0;
}

// The ranks of a script run (script.num_processes in the script.yaml the launcher wrote), else 0.
int scriptRanks(const std::filesystem::path& scriptFile)
{
    std::ifstream in(scriptFile);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (const auto& [key, value] : storage::flattenYaml(text))
        if (key == "script.num_processes")
            return std::atoi(value.c_str());
    return 0;
}

// A hang report as JSON (runs diagnose --json): the collective, who waits in it, who never
// entered it, who issued another, who said nothing.
std::string hangReportJson(const HangReport& report)
{
    return nlohmann::json{{"group", report.group},
                          {"seq", report.seq},
                          {"kind", report.kind},
                          {"bytes", report.bytes},
                          {"dtype", report.dtype},
                          {"waiting_ranks", report.waitingRanks},
                          {"missing_ranks", report.missingRanks},
                          {"mismatched_ranks", report.mismatchedRanks},
                          {"silent_ranks", report.silentRanks},
                          {"text", report.text}}
        .dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace); // names come from the ranks
}

// Whether `folder` holds files torch's Flight Recorder may have written (<prefix><rank>): the
// launcher's flight/torch_fr_rank<N> of a script run, or any run's dumps.
bool mayHoldTorchDumps(const std::filesystem::path& folder)
{
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(folder, ec)) {
        const std::string name = entry.path().filename().string();
        if (entry.is_regular_file(ec) && !name.empty() && std::isdigit(static_cast<unsigned char>(name.back()))
            && name.find(".json") == std::string::npos)
            return true;
    }
    return false;
}

// The process ids of an engine run's ranks on this machine, by local rank, from their newest hello
// events in `eventsFile` (a requeued job appends another attempt's) that are still a worker of
// this host; empty when a rank's is missing.
std::vector<pid_t> localRankPids(const std::filesystem::path& eventsFile, int ranks)
{
    std::vector<pid_t> pids(static_cast<std::size_t>(std::max(0, ranks)), 0);
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    std::ifstream in(eventsFile);
    for (std::string line; std::getline(in, line);) {
        if (line.find("\"hello\"") == std::string::npos)
            continue;
        const auto e = nlohmann::json::parse(line, nullptr, false);
        if (e.is_discarded() || !e.is_object() || e.value("type", nlohmann::json()) != "hello")
            continue;
        const auto local = e.value("local_rank", nlohmann::json()), pid = e.value("pid", nlohmann::json());
        if (!local.is_number_integer() || !pid.is_number_integer() || e.value("host", nlohmann::json()) != host)
            continue;
        if (const auto r = local.get<std::int64_t>(); r >= 0 && r < ranks)
            pids[static_cast<std::size_t>(r)] = static_cast<pid_t>(pid.get<std::int64_t>());
    }
    std::error_code ec;
    for (pid_t pid : pids) // gone, or the number reused since: no stacks rather than another process's
        if (pid <= 0
            || std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec).filename() != "shardscope-worker")
            return {};
    return pids;
}

// `runs diagnose` of PyTorch's own Flight Recorder dumps in `folder` (any run's, NCCL or Gloo).
int diagnoseTorchDumps(const RunsArgs& args, const std::filesystem::path& folder)
{
    // The reader needs the standard library only: Shardscope's own environment, else python3.
    std::string python = ownEnvironmentPython();
    if (python.empty())
        python = findOnPath("python3").value_or("");
    if (python.empty())
        return fail("diagnose", makeError("reading PyTorch's Flight Recorder dumps needs a python3 (the dumps are pickles); "
                                          "install one, or run ./scripts/setup.sh"));
    const auto reader = (std::filesystem::path(config::resourcesFolder()) / ".." / "python" / "shardscope" / "flight_dumps.py")
                            .lexically_normal();
    if (!std::filesystem::exists(reader))
        return fail("diagnose", makeError("Shardscope's " + reader.string()
                                          + " is missing, which reads PyTorch's Flight Recorder dumps; reinstall Shardscope"));
    std::vector<std::string> skipped;
    auto records = readTorchFlightDumps(folder, python, reader.string(), &skipped);
    if (!records)
        return fail("diagnose", records.error());
    const HangReport report = analyseFlightRecords(*records, std::chrono::milliseconds(0)); // read, not asked
    // Group names come from the dumps: shown, never obeyed.
    if (args.json) {
        std::cout << hangReportJson(report) << "\n";
        return 0;
    }
    std::cout << "from PyTorch's Flight Recorder dumps in " << terminalSafe(folder.string()) << " (" << records->size()
              << " ranks; steps and phases are not in them)\n"
              << terminalSafe(report.text);
    std::string names;
    for (const auto& name : skipped)
        names += (names.empty() ? "" : ", ") + name;
    if (!names.empty())
        std::cout << "not read (not a dump, a second file of a rank, or unreadable): " << terminalSafe(names) << "\n";
    return 0;
}

// Asks a live run's ranks for their flight records (they answer from their heartbeat thread,
// whatever their training thread does) and says where they wait. A folder of PyTorch's own Flight
// Recorder dumps, or an ended script run that left some in its flight/, is read instead.
int runDiagnose(const RunsArgs& args)
{
    const std::string& given = args.runs.front();
    std::error_code ec;
    const bool isRunFolder = std::filesystem::exists(RunLayout(given).planFile(), ec)
                             || std::filesystem::exists(RunLayout(given).scriptFile(), ec);
    if (std::filesystem::is_directory(given, ec) && !isRunFolder && mayHoldTorchDumps(given))
        return diagnoseTorchDumps(args, given);
    auto dir = runDirectoryOf(args, given);
    if (!dir) {
        if (auto run = namedRun(args, given); run && mayHoldTorchDumps(RunLayout(run->dir).flightDir()))
            return diagnoseTorchDumps(args, RunLayout(run->dir).flightDir());
        return fail("diagnose", dir.error());
    }
    const RunLayout layout(*dir);
    // An engine run's ranks on this machine are its plan's; a script run's, its script.yaml's
    // num_processes (its reporter answers for them: python/shardscope/collectives.py).
    int ranks = 0;
    const auto plan = config::loadPlan(layout.planFile().string());
    if (plan)
        ranks = plan->localProcesses();
    else
        ranks = scriptRanks(layout.scriptFile());
    if (ranks <= 0)
        return fail("diagnose", makeError(dir->string()
                                          + " has neither an engine run's plan.json nor a script run's "
                                            "script.yaml, nor PyTorch's Flight Recorder dumps: is it a run directory of "
                                            "shardscope launch, or a folder of torch's dumps (<prefix><rank>)?"));
    const auto patience = std::chrono::milliseconds(static_cast<std::int64_t>(args.patience * 1000));
    const auto records = gatherFlightRecords(layout.flightDir(), ranks, patience);
    const bool noAnswer = std::none_of(records.begin(), records.end(), [](const auto& r) { return r.has_value(); });
    if (noAnswer && mayHoldTorchDumps(layout.flightDir()))
        return diagnoseTorchDumps(args, layout.flightDir()); // gone, but torch dumped its recorder on a timeout
    if (noAnswer)
        return fail("diagnose", makeError("no rank of " + dir->string() + " answered within "
                                          + std::to_string(static_cast<int>(args.patience))
                                          + " s: is the run still running on this machine? (--timeout waits longer)"));
    const HangReport report = analyseFlightRecords(records, patience);
    // Group names, phases and stacks come from the ranks: shown, never obeyed.
    if (args.json)
        std::cout << hangReportJson(report) << "\n";
    else // a script's ranks wrote their Python stacks; an engine's are read with gdb, as they are now
        std::cout << terminalSafe(report.text + scriptStacks(layout.flightDir(), records)
                                  + (plan && !args.noStacks
                                         ? nativeStacks(localRankPids(layout.eventsFile(), ranks), std::chrono::seconds(60))
                                         : std::string()));
    return 0;
}

int runExport(const RunsArgs& args)
{
    auto store = openStore(args);
    if (!store)
        return fail("export", store.error());
    auto id = store->resolveRun(args.runs.front());
    if (!id)
        return fail("export", id.error());
    std::ofstream file;
    if (!args.output.empty() && args.output != "-") {
        std::error_code ec;
        if (std::filesystem::exists(args.output, ec) && !args.yes)
            return fail("export", makeError(args.output + " exists; give another -o, or --yes to replace it"));
        file.open(args.output, std::ios::binary);
        if (!file)
            return fail("export", makeError("cannot write " + args.output + ": check the folder exists and is writable"));
    }
    std::ostream& out = file.is_open() ? static_cast<std::ostream&>(file) : std::cout;
    auto rc = args.format == "json" ? store->exportJson(*id, out) : store->exportCsv(*id, out);
    if (!rc)
        return fail("export", rc.error());
    if (file.is_open())
        std::cerr << "shardscope runs export: wrote run " << *id << " to " << args.output << "\n";
    return 0;
}

int runDelete(const RunsArgs& givenArgs)
{
    RunsArgs args = givenArgs;
    args.readsOnly = false;
    auto store = openStore(args);
    if (!store)
        return fail("delete", store.error());
    auto ids = resolveAll(*store, args.runs);
    if (!ids)
        return fail("delete", ids.error());
    if (!args.yes) {
        if (!isatty(STDIN_FILENO))
            return fail("delete", makeError("deleting needs confirmation: pass --yes"));
        std::cout << "Delete " << ids->size() << " run(s) and their rows" << (args.keepFiles ? "" : " and directories")
                  << "? [y/N] " << std::flush;
        std::string answer;
        std::getline(std::cin, answer);
        if (answer != "y" && answer != "Y" && answer != "yes")
            return 1;
    }
    for (auto id : *ids) {
        if (auto rc = store->deleteRun(id, !args.keepFiles); !rc)
            return fail("delete", rc.error());
        std::cout << "deleted run " << id << "\n";
    }
    return 0;
}

int runImport(const RunsArgs& args)
{
    std::filesystem::path home = args.home;
    if (home.empty()) {
        auto found = shardscopeHome();
        if (!found) {
            std::cerr << "shardscope runs import: error: " << terminalSafe(found.error().message) << "\n";
            return 1;
        }
        home = *found;
    }
    auto imported = importRunDirectory(home, args.directory, args.name);
    if (!imported) {
        std::cerr << "shardscope runs import: error: " << terminalSafe(imported.error().message) << "\n";
        return 1;
    }
    std::cout << "imported run " << imported->runId << " (" << terminalSafe(imported->name) << "): " << imported->ranks
              << " ranks, " << imported->events << " events, " << imported->status << "\n";
    if (imported->malformed > 0)
        std::cerr << "shardscope runs import: warning: " << imported->malformed << " lines that are not events were skipped\n";
    return 0;
}

} // namespace

void addRunsCommand(CLI::App& app, CommandContext& context)
{
    auto args = std::make_shared<RunsArgs>();
    auto* runs = app.add_subcommand("runs", "Browse the run history (list, show, compare, export, delete, import, diagnose, "
                                            "generate)");
    runs->require_subcommand(1);
    runs->add_option("--home", args->home,
                     "Shardscope's data folder (default: $SHARDSCOPE_HOME, else $XDG_DATA_HOME/shardscope, "
                     "else ~/.local/share/shardscope)");

    auto* list = runs->add_subcommand("list", "List runs, newest first");
    list->add_option("--status", args->statuses, "Only runs in this status (repeatable)");
    list->add_option("--type", args->type, "Only this distributed_type (MULTI_CPU, MULTI_GPU, FSDP, DEEPSPEED, ...)");
    list->add_option("--precision", args->precision, "Only this mixed_precision (no, fp16, bf16, fp8)");
    list->add_option("--tag", args->tag, "Only runs carrying this tag");
    list->add_option("--search", args->search, "Text in the name, notes, tags or run directory");
    list->add_option("--sort", args->sort, "Sort by created, name, status, duration, steps or loss")
        ->check(CLI::IsMember({"created", "name", "status", "duration", "steps", "loss"}))
        ->capture_default_str();
    list->add_flag("--asc", args->ascending, "Ascending order (default: descending)");
    list->add_option("--limit", args->limit, "At most this many runs")->transform(numberIn({1, true, 1e9, true}));
    list->callback([args, &context] { context.exitCode = runList(*args); });

    auto* show = runs->add_subcommand("show", "Show runs: status, ranks, summary, checkpoints, traces");
    show->add_option("run", args->runs, "Run id or name")->required();
    show->add_flag("--config", args->showConfig, "Also print the config and recipe");
    show->callback([args, &context] { context.exitCode = runShow(*args); });

    auto* compare = runs->add_subcommand("compare", "Compare runs: summary and config differences");
    compare->add_option("runs", args->runs, "Two or more run ids or names")->required()->expected(2, 64);
    compare->callback([args, &context] { context.exitCode = runCompare(*args); });

    auto* exportCmd = runs->add_subcommand("export", "Export a run's metrics (CSV) or everything (JSON)");
    exportCmd->add_option("run", args->runs, "Run id or name")->required()->expected(1);
    exportCmd->add_option("--format", args->format, "csv or json")->check(CLI::IsMember({"csv", "json"}))->capture_default_str();
    exportCmd->add_option("-o,--output", args->output, "Output file, a new one (default: standard output)");
    exportCmd->add_flag("-y,--yes", args->yes, "Replace the output file when it exists");
    exportCmd->callback([args, &context] { context.exitCode = runExport(*args); });

    auto* del = runs->add_subcommand("delete", "Delete runs: their rows and run directories");
    del->add_option("runs", args->runs, "Run ids or names")->required();
    del->add_flag("-y,--yes", args->yes, "Do not ask for confirmation");
    del->add_flag("--keep-files", args->keepFiles, "Delete the rows only, keep the run directories");
    del->callback([args, &context] { context.exitCode = runDelete(*args); });

    auto* diagnose = runs->add_subcommand("diagnose", "Ask a running run's ranks where they are: the collective they wait "
                                                      "in, who never entered it, each rank's last collective");
    diagnose
        ->add_option("run", args->runs,
                     "Run id, name or directory; or a folder of PyTorch's own Flight Recorder dumps (<prefix><rank>, "
                     "any run's)")
        ->required()
        ->expected(1);
    diagnose->add_flag("--json", args->json, "Print the verdict as JSON (collective, waiting, missing, mismatched ranks)");
    diagnose->add_flag("--no_stacks", args->noStacks,
                       "Leave out an engine run's native stacks (gdb reads them in seconds to a minute)");
    diagnose->add_option("--timeout", args->patience, "Seconds to wait for the ranks' answers")
        ->transform(numberIn({0, false, 3600, false, " (seconds)"}))
        ->capture_default_str();
    diagnose->callback([args, &context] { context.exitCode = runDiagnose(*args); });

    auto* follow = runs->add_subcommand("follow", "Follow a SLURM run whose launcher is gone (--detach, a closed terminal, "
                                                  "another machine): its state, steps and end into this machine's "
                                                  "history; Ctrl-C cancels the job");
    follow->add_option("run", args->runs, "Run id or name, or a cluster run's folder (one another machine submitted)")
        ->expected(1);
    follow->add_flag("--all", args->all,
                     "Follow, each in the background, every run of the cluster profiles' shared folders that nobody "
                     "follows here: this history's whose follower is gone, and yours submitted elsewhere");
    follow->add_flag("--json", args->json, "With --all: what it started as JSON ({\"started\": [...], \"said\": ...})");
    follow->add_option("--cluster_profiles", args->profilesFile,
                       "The profiles file: --all's shared folders, and the login node a run's profile names "
                       "(default: $SHARDSCOPE_HOME/clusters.ini)");
    follow->callback([args, &context] {
        if (args->all == !args->runs.empty()) {
            std::cerr << "shardscope runs follow: give a run (id, name or folder) or --all, one of them\n";
            context.exitCode = 2;
            return;
        }
        if (!args->home.empty()) // the followers --all starts use it too
            ::setenv("SHARDSCOPE_HOME", args->home.c_str(), 1);
        context.exitCode = cluster::followRun({args->runs.empty() ? std::string() : args->runs.front(), args->all,
                                               args->profilesFile, context.programPath, args->json});
    });

    auto* import = runs->add_subcommand("import", "Add a run directory's events to the history (a script run under a plain "
                                                  "`accelerate launch`, whose shardscope reporter wrote events/rank<N>.jsonl)");
    import->add_option("directory", args->directory, "The run directory")->required();
    import->add_option("--name", args->name, "The run's name in the history (default: the directory's name)");
    import->callback([args, &context] { context.exitCode = runImport(*args);
});

auto* generate = runs->add_subcommand("generate", "Continue a prompt with a run's exported model (greedy, or sampled "
                                                  "with --temperature)");
generate->add_option("run", args->runs, "Run id, name or directory")->required()->expected(1);
generate->add_option("--prompt", args->prompt, "The text to continue")->required();
generate->add_option("--max_new_tokens", args->maxNewTokens, "Tokens to generate at most")
    ->transform(numberIn({1, true, 4096, true}))
    ->capture_default_str();
generate->add_option("--temperature", args->temperature, "0: the most likely token each time; above: sampled")
    ->transform(numberIn({0, true, 100, false}))
    ->capture_default_str();
generate->add_option("--top_k", args->topK, "Sampling: only the k most likely tokens (0: all)")
    ->transform(numberIn({0, true, 1e9, true}))
    ->capture_default_str();
generate->add_option("--seed", args->seed, "Sampling: the same seed gives the same text")
    ->transform(numberIn({0, true, 9e15, true}))
    ->capture_default_str();
generate->add_flag("--json", args->json, "Print JSON: prompt_ids, ids, text, ended_at_eos");
generate->callback([args, &context] { context.exitCode = runGenerate(*args, context.programPath); });
} // namespace shardscope::cli

} // namespace shardscope::cli
