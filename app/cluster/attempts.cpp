#include "app/cluster/attempts.h"

#include "app/cluster/slurm.h"
#include "engine/checkpoint/checkpoint_paths.h"
#include "engine/protocol/events.h"
#include "engine/common/run_layout.h"
#include "engine/common/user_file.h"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

namespace shardscope::cluster {

namespace {

namespace fs = std::filesystem;

// What the batch script writes of an attempt (a few lines), and what a node's launcher writes of
// its ranks' events (as a run's events.jsonl, at most 4 GiB).
const UserFileKind kAttemptRecord{"an attempt's record", 64u << 10, std::chrono::seconds(10)};
const UserFileKind kNodeEvents{"a node's events.jsonl", std::uint64_t(4) << 30, std::chrono::minutes(5)};

// attempt.txt's key=value lines.
void readAttemptFile(const fs::path& file, JobAttempt& attempt)
{
    auto text = readUserFile(file, kAttemptRecord);
    std::istringstream in(text ? *text : std::string());
    for (std::string line; std::getline(in, line);) {
        const auto eq = line.find('=');
        if (eq == std::string::npos)
            continue;
        const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
        try {
            if (key == "job_id")
                attempt.jobId = std::stoll(value);
            else if (key == "nodes")
                attempt.nodes = value;
            else if (key == "started")
                attempt.startedAt = std::stod(value);
            else if (key == "ended")
                attempt.endedAt = std::stod(value);
            else if (key == "exit")
                attempt.exitCode = std::stoi(value);
        } catch (const std::exception&) {
            // A line cut short (the attempt was killed while writing it): the field stays unknown.
        }
    }
}

// The step a plan.json resumed from (0: none), and the checkpoint's folder.
void readResume(const fs::path& planFile, JobAttempt& attempt)
{
    auto text = readUserFile(planFile, {"a node's plan.json", 16u << 20, std::chrono::seconds(10)});
    const auto plan = nlohmann::json::parse(text ? *text : std::string(), nullptr, false);
    if (!plan.is_object() || !plan.contains("resume_from") || !plan["resume_from"].is_string())
        return;
    attempt.resumedFrom = plan["resume_from"].get<std::string>();
    attempt.resumedStep = attempt.resumedFrom.empty() ? 0 : checkpoint::stepOf(attempt.resumedFrom).value_or(0);
}

// What to keep of one event line of an attempt that `next` (if any) followed: empty to drop it.
std::string keptLine(const std::string& line, const JobAttempt& attempt, const JobAttempt* next)
{
    if (!next)
        return line;
    auto event = protocol::decodeEvent(line);
    if (!event)
        return line; // not an event: the importer counts it as malformed, as for any run
    const std::string where = "attempt " + std::to_string(attempt.attempt) + " (job " + std::to_string(attempt.jobId) + ")";
    if (const auto* done = std::get_if<protocol::DoneEvent>(&event->body)) {
        event->body = protocol::LogEvent{"warning", where + " ended " + done->status + " after step "
                                                        + std::to_string(done->steps) + "; the job went on in attempt "
                                                        + std::to_string(next->attempt)};
        return protocol::encodeEvent(*event);
    }
    if (const auto* error = std::get_if<protocol::ErrorEvent>(&event->body)) {
        event->body = protocol::LogEvent{"warning", where + ": " + error->kind + ": " + error->message};
        return protocol::encodeEvent(*event);
    }
    // Done again by the next attempt, which resumed from an earlier checkpoint.
    const auto step = std::visit(
        [](const auto& body) -> std::optional<std::int64_t> {
            if constexpr (requires { body.step; })
                return static_cast<std::int64_t>(body.step);
            else
                return std::nullopt;
        },
        event->body);
    return step && *step > next->resumedStep ? std::string() : line;
}

} // namespace

std::vector<JobAttempt> readAttempts(const fs::path& runDir)
{
    std::vector<JobAttempt> attempts;
    std::error_code ec;
    for (int n = 0; fs::is_directory(attemptDir(runDir, n), ec); ++n) {
        JobAttempt attempt;
        attempt.attempt = n;
        readAttemptFile(RunLayout(runDir).attemptRecordFile(n), attempt);
        readResume(RunLayout(nodeRunDir(runDir, n, 0)).planFile(), attempt);
        if (auto unseen = readUserFile(RunLayout(runDir).unseenFolderFile(n), kAttemptRecord)) {
            const std::string nodes = unseen->substr(0, unseen->find('\n'));
            attempt.nodesWithoutFolder = nodes.substr(0, nodes.find_last_not_of(" \t\r") + 1);
        }
        if (auto lost = readUserFile(RunLayout(runDir).lostNodesFile(n), kAttemptRecord)) {
            const std::string nodes = lost->substr(0, lost->find('\n'));
            attempt.lostNodes = nodes.substr(0, nodes.find_last_not_of(" \t\r") + 1);
        }
        attempts.push_back(attempt);
    }
    return attempts;
}

Result<std::int64_t> gatherAttemptEvents(const fs::path& runDir, int nodes, const std::vector<JobAttempt>& attempts)
{
    const fs::path target = RunLayout(runDir).eventsFile();
    // Written beside it and renamed over it: another machine following the same run (its own
    // `runs follow`) gathers into the same file, and a reader must never see it half written.
    char host[256] = "";
    ::gethostname(host, sizeof host - 1);
    const fs::path partial = runDir / ("events.jsonl.partial-" + std::string(host) + "-" + std::to_string(::getpid()));
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    std::int64_t written = 0;
    std::string missing; // the first node of the last attempt that left no events file
    std::string refused; // the first events file that is not one (a FIFO, a device, past 4 GiB)
    const std::string slurmOutput = RunLayout(runDir).slurmOutput("<job>").string();
    for (std::size_t a = 0; a < attempts.size(); ++a) {
        const JobAttempt* next = a + 1 < attempts.size() ? &attempts[a + 1] : nullptr;
        if (!attempts[a].lostNodes.empty()) { // said between this attempt and the next
            protocol::Event lost;
            lost.time = next && next->startedAt > 0 ? next->startedAt : std::max(attempts[a].startedAt, attempts[a].endedAt);
            lost.body = protocol::LogEvent{"warning", "attempt " + std::to_string(attempts[a].attempt) + " (job "
                                                          + std::to_string(attempts[a].jobId) + "): SLURM lost node "
                                                          + attempts[a].lostNodes};
            out << protocol::encodeEvent(lost) << '\n';
            ++written;
        }
        for (int node = 0; node < nodes; ++node) {
            const fs::path file = RunLayout(nodeRunDir(runDir, attempts[a].attempt, node)).eventsFile();
            std::error_code ec;
            if (!fs::exists(file, ec)) {
                // An attempt cut short before this node's launcher started leaves nothing to gather.
                if (next)
                    continue;
                if (missing.empty())
                    missing = "node " + std::to_string(node) + " left no events in attempt " + std::to_string(attempts[a].attempt)
                              + " (" + file.string() + "); its launcher's output is in " + slurmOutput;
                continue; // the other nodes' are gathered all the same
            }
            auto lines = readUserFileLines(file, kNodeEvents, [&](const std::string& line) {
                const std::string kept = keptLine(line, attempts[a], next);
                if (kept.empty())
                    return;
                out << kept << '\n';
                ++written;
            });
            if (!lines && refused.empty())
                refused = lines.error().message; // what it read before is kept
        }
    }
    out.close();
    std::error_code ec;
    if (!out || (fs::rename(partial, target, ec), ec)) {
        fs::remove(partial, ec);
        return makeError("cannot write " + target.string());
    }
    if (!missing.empty())
        return makeError(missing);
    if (!refused.empty())
        return makeError(refused);
    return written;
}

} // namespace shardscope::cluster
