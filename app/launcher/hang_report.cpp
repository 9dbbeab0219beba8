#include "app/launcher/hang_report.h"

#include "app/launcher/program.h"

#include "engine/common/byte_format.h"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <future>
#include <map>
#include <sstream>
#include <thread>
#include <tuple>

namespace shardscope {

namespace {

using protocol::CollectiveRecord;
using protocol::FlightRecord;
using Records = std::vector<std::optional<FlightRecord>>;

// Seconds in a collective that every rank has entered that are still any step's wait.
constexpr double kBriefWait = 2.0;

std::string rankList(const std::vector<int>& ranks)
{
    std::string text = ranks.size() == 1 ? "rank " : "ranks ";
    for (std::size_t i = 0; i < ranks.size(); ++i)
        text += (i ? ", " : "") + std::to_string(ranks[i]);
    return text;
}

std::string describe(const CollectiveRecord& c) { return c.kind + " #" + std::to_string(c.seq) + " of " + c.group; }

std::string sizeOf(const CollectiveRecord& c)
{
    return c.dtype.empty() ? std::string("no data") : formatBytes(static_cast<double>(c.bytes)) + " " + c.dtype;
}

const CollectiveRecord* find(const FlightRecord& r, const std::string& group, std::int64_t seq)
{
    for (const auto& c : r.collectives)
        if (c.group == group && c.seq == seq)
            return &c;
    return nullptr;
}

std::int64_t issuedIn(const FlightRecord& r, const std::string& group)
{
    auto it = r.issued.find(group);
    return it == r.issued.end() ? 0 : it->second;
}

// A rank is in a group when it issued anything in it; every rank is in the default group.
bool isMember(const FlightRecord& r, const std::string& group) { return group == "default_pg" || r.issued.count(group) > 0; }

struct Candidate {
    const CollectiveRecord* first = nullptr; // the earliest issue of it among the waiters
    std::vector<int> waiting;
    std::vector<int> missing;
};

// Every collective pending somewhere, with who waits in it and who never issued it; the one to
// report is the earliest that someone never entered, else the earliest pending.
std::optional<Candidate> chooseWaitedCollective(const Records& records)
{
    std::map<std::pair<std::string, std::int64_t>, Candidate> pending;
    for (std::size_t rank = 0; rank < records.size(); ++rank) {
        if (!records[rank])
            continue;
        for (const auto& c : records[rank]->collectives) {
            if (c.completedAt)
                continue;
            Candidate& candidate = pending[{c.group, c.seq}];
            candidate.waiting.push_back(static_cast<int>(rank));
            if (!candidate.first || c.issuedAt < candidate.first->issuedAt)
                candidate.first = &c;
        }
    }
    std::optional<Candidate> best;
    for (auto& [key, candidate] : pending) {
        for (std::size_t rank = 0; rank < records.size(); ++rank)
            if (records[rank] && isMember(*records[rank], key.first) && issuedIn(*records[rank], key.first) < key.second)
                candidate.missing.push_back(static_cast<int>(rank));
        const bool better = !best || (!candidate.missing.empty() && best->missing.empty())
                            || (candidate.missing.empty() == best->missing.empty()
                                && candidate.first->issuedAt < best->first->issuedAt);
        if (better)
            best = candidate;
    }
    return best;
}

// What a collective is beyond its number: ranks that disagree on it took different code paths.
std::tuple<std::string, std::int64_t, std::string> signatureOf(const CollectiveRecord& c) { return {c.kind, c.bytes, c.dtype}; }

// The chosen collective as most ranks issued it (the one that went its own way is then the other),
// and whether that majority is strict (two ranks that disagree have none).
std::pair<const CollectiveRecord*, bool> majorityIssue(const Records& records, const CollectiveRecord& first)
{
    std::map<std::tuple<std::string, std::int64_t, std::string>, std::pair<int, const CollectiveRecord*>> counts;
    for (const auto& record : records)
        if (const CollectiveRecord* theirs = record ? find(*record, first.group, first.seq) : nullptr) {
            auto& [count, example] = counts[signatureOf(*theirs)];
            ++count;
            if (!example || theirs == &first)
                example = theirs;
        }
    const CollectiveRecord* best = &first;
    int bestCount = counts[signatureOf(first)].first;
    int runnerUp = 0;
    for (const auto& [signature, entry] : counts) {
        if (signature == signatureOf(*best))
            continue;
        if (entry.first > bestCount) {
            runnerUp = bestCount;
            best = entry.second;
            bestCount = entry.first;
        } else {
            runnerUp = std::max(runnerUp, entry.first);
        }
    }
    return {best, bestCount > runnerUp};
}

std::string rankLine(int rank, const FlightRecord& r, double now)
{
    const CollectiveRecord* lastDone = nullptr;
    const CollectiveRecord* waitingIn = nullptr;
    for (const auto& c : r.collectives) {
        if (c.completedAt && (!lastDone || c.issuedAt >= lastDone->issuedAt))
            lastDone = &c;
        if (!c.completedAt && !waitingIn)
            waitingIn = &c;
    }
    std::ostringstream line;
    line << "rank " << rank << ": last completed ";
    // (A record read from torch's own dumps knows no steps or phases: nothing is said of them.)
    if (lastDone)
        line << describe(*lastDone)
             << (lastDone->phase.empty() ? std::string() : " (issued in " + rankPosition(lastDone->step, lastDone->phase) + ")");
    else
        line << "none in its record";
    if (!r.phase.empty())
        line << "; now in " << rankPosition(r.step, r.phase);
    if (waitingIn) {
        char waited[32];
        std::snprintf(waited, sizeof waited, "%.1f s", std::max(0.0, now - waitingIn->issuedAt));
        line << ", waiting in " << describe(*waitingIn) << " for " << waited;
    } else {
        line << ", in no collective";
    }
    return line.str();
}

} // namespace

Result<std::vector<std::optional<protocol::FlightRecord>>> readTorchFlightDumps(const std::filesystem::path& folder,
                                                                                const std::string& python,
                                                                                const std::string& reader,
                                                                                std::vector<std::string>* skipped)
{
    constexpr std::int64_t kRanks = 1 << 16; // more than any run has; the reader skips files past it
    auto ran = runProgram(python, {reader, folder.string()}, std::chrono::seconds(120));
    if (!ran)
        return ran.error();
    if (ran->timedOut || ran->status != 0)
        return makeError("reading the Flight Recorder dumps in " + folder.string() + " with " + python + " " + reader
                         + " failed: "
                         + (ran->output.size() > 2000 ? ran->output.substr(ran->output.size() - 2000) : ran->output));
    Records records;
    std::size_t worldSize = 0;
    std::istringstream lines(ran->output);
    for (std::string line; std::getline(lines, line);) {
        const auto fields = nlohmann::json::parse(line, nullptr, false);
        if (fields.is_discarded() || !fields.is_object())
            continue; // a warning of the interpreter
        if (fields.contains("skipped")) {
            if (const auto size = fields.value("world_size", nlohmann::json()); size.is_number_integer())
                worldSize = static_cast<std::size_t>(std::clamp<std::int64_t>(size.get<std::int64_t>(), 0, kRanks));
            for (const auto& name : fields.value("skipped", nlohmann::json::array()))
                if (skipped && name.is_string())
                    skipped->push_back(name.get<std::string>());
            continue;
        }
        const auto rankField = fields.value("rank", nlohmann::json());
        if (!rankField.is_number_integer() || rankField.get<std::int64_t>() < 0 || rankField.get<std::int64_t>() >= kRanks)
            return makeError(folder.string() + ": a dump's rank is not 0 to " + std::to_string(kRanks - 1));
        auto record = protocol::parseFlightRecord(line, folder.string());
        if (!record)
            return record.error();
        const auto rank = static_cast<std::size_t>(rankField.get<std::int64_t>());
        if (records.size() <= rank)
            records.resize(rank + 1);
        records[rank] = std::move(*record);
    }
    if (records.empty())
        return makeError(folder.string()
                         + " holds no Flight Recorder dump of PyTorch (files named <prefix><rank>, as torch writes them to "
                           "TORCH_FR_DUMP_TEMP_FILE)");
    if (records.size() < worldSize) // the last ranks wrote none: they are silent, not absent
        records.resize(worldSize);
    return records;
}

std::string rankPosition(std::int64_t stepsDone, const std::string& phase)
{
    if (phase == "data" || phase == "forward" || phase == "backward" || phase == "optimizer")
        return "step " + std::to_string(stepsDone + 1) + "'s " + phase;
    if (phase == "train") // a script rank's: somewhere in its training loop
        return "step " + std::to_string(stepsDone + 1);
    if (phase == "setup" || phase.empty())
        return phase.empty() ? std::string("an unknown phase") : phase;
    return phase + (stepsDone == 0 ? " before step 1" : " after step " + std::to_string(stepsDone));
}

HangReport analyseFlightRecords(const Records& records, std::chrono::milliseconds patience)
{
    HangReport report;
    std::ostringstream text;
    double now = 0;
    int answered = 0;
    for (std::size_t rank = 0; rank < records.size(); ++rank) {
        if (!records[rank]) {
            report.silentRanks.push_back(static_cast<int>(rank));
            continue;
        }
        ++answered;
        now = std::max(now, records[rank]->time);
    }
    text << "flight records: " << answered << " of " << records.size() << " ranks answered\n";
    if (!report.silentRanks.empty()) {
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%.1f s", static_cast<double>(patience.count()) / 1000.0);
        if (patience.count() == 0)
            text << rankList(report.silentRanks)
                 << " left no dump (it never reached the timeout, or died first): look there first\n";
        else
            text << rankList(report.silentRanks) << " did not answer within " << seconds
                 << " (stopped, or wedged beyond its heartbeat thread): look there first\n";
    }
    if (auto chosen = chooseWaitedCollective(records)) {
        const auto [majority, strict] = majorityIssue(records, *chosen->first);
        const CollectiveRecord& c = *majority;
        report.group = c.group;
        report.seq = c.seq;
        report.kind = c.kind;
        report.bytes = c.bytes;
        report.dtype = c.dtype;
        report.waitingRanks = chosen->waiting;
        report.missingRanks = chosen->missing;
        char waited[32];
        std::snprintf(waited, sizeof waited, "%.1f s", std::max(0.0, now - c.issuedAt));
        text << rankList(report.waitingRanks) << (report.waitingRanks.size() == 1 ? " waits" : " wait") << " in " << describe(c)
             << " (" << sizeOf(c) << ")" << (c.phase.empty() ? std::string() : ", issued in " + rankPosition(c.step, c.phase))
             << ", for up to " << waited << "\n";
        for (int rank : report.missingRanks)
            text << "rank " << rank << " never entered it: the last collective it issued in " << c.group << " is #"
                 << issuedIn(*records[static_cast<std::size_t>(rank)], c.group) << "\n";
        for (std::size_t rank = 0; rank < records.size(); ++rank) {
            const CollectiveRecord* theirs = records[rank] ? find(*records[rank], c.group, c.seq) : nullptr;
            if (theirs && signatureOf(*theirs) != signatureOf(c)) {
                report.mismatchedRanks.push_back(static_cast<int>(rank));
                text << "rank " << rank << " issued " << describe(*theirs) << " (" << sizeOf(*theirs)
                     << ") under the same number as " << (strict ? "the others' " : "another rank's ") << c.kind << " ("
                     << sizeOf(c) << ")" << (strict ? "" : ", and no majority says which is astray")
                     << ": the ranks took different paths\n";
            }
        }
        // A healthy run asked (runs diagnose, the Run page's Diagnose) has some collective in
        // flight at any moment: every rank in it, briefly, is no hang, and the report says so.
        if (report.missingRanks.empty() && report.mismatchedRanks.empty() && report.silentRanks.empty()
            && now - c.issuedAt < kBriefWait)
            text << "no rank hangs: every rank is in that collective and it has waited only " << waited
                 << ", as collectives do in any step; ask again if it stays\n";
    } else if (answered > 0) {
        text << (report.silentRanks.empty() ? "no rank hangs: " : "")
             << "no collective is pending: every collective the ranks issued has completed\n";
    }
    for (std::size_t rank = 0; rank < records.size(); ++rank)
        if (records[rank])
            text << rankLine(static_cast<int>(rank), *records[rank], now) << "\n";
    report.text = text.str();
    return report;
}

Records gatherFlightRecords(const std::filesystem::path& flightDir, int ranks, std::chrono::milliseconds patience)
{
    Records records(static_cast<std::size_t>(std::max(ranks, 0)));
    std::error_code error;
    std::filesystem::create_directories(flightDir, error);
    // Milliseconds since the epoch: larger than any request before it, whoever asked.
    const auto request =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    {
        const auto partial = flightDir / "request.partial";
        std::ofstream(partial, std::ios::trunc) << request << "\n";
        std::filesystem::rename(partial, protocol::flightRequestFile(flightDir), error);
    }
    if (error)
        return records;
    const auto deadline = std::chrono::steady_clock::now() + patience;
    for (;;) {
        bool missing = false;
        for (int rank = 0; rank < ranks; ++rank) {
            auto& slot = records[static_cast<std::size_t>(rank)];
            if (slot)
                continue;
            const auto path = protocol::flightRecordFile(flightDir, rank);
            std::ifstream in(path);
            std::stringstream text;
            text << in.rdbuf();
            if (auto record = protocol::parseFlightRecord(text.str(), path.string()); record && record->request == request)
                slot = std::move(*record);
            else
                missing = true;
        }
        if (!missing || std::chrono::steady_clock::now() >= deadline)
            return records;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
}

std::string scriptStacks(const std::filesystem::path& flightDir, const Records& records)
{
    std::ostringstream out;
    for (std::size_t rank = 0; rank < records.size(); ++rank) {
        if (!records[rank])
            continue;
        std::ifstream in(flightDir / ("rank" + std::to_string(rank) + ".stacks.txt"));
        std::string header;
        std::int64_t request = 0;
        if (!(in >> header >> request) || header != "request" || request != records[rank]->request)
            continue; // an engine rank, or an answer to another request
        in.ignore(1);
        out << "stacks of rank " << rank << " (Python, innermost call last):\n";
        for (std::string line; std::getline(in, line);)
            out << "  " << line << "\n";
    }
    return out.str();
}

namespace {

// gdb's backtrace lines ("Thread 3 (...)", "#0 ..."), without its warnings and banners.
std::string backtraceLines(const std::string& output)
{
    std::istringstream in(output);
    std::ostringstream kept;
    for (std::string line; std::getline(in, line);)
        if (line.rfind("Thread ", 0) == 0 || line.rfind("#", 0) == 0)
            kept << "  " << line << "\n";
    return kept.str();
}

} // namespace

std::string nativeStacks(const std::vector<pid_t>& pids, std::chrono::milliseconds timeout)
{
    if (pids.empty())
        return {};
    const std::string gdb = findOnPath("gdb").value_or("");
    if (gdb.empty())
        return "native stacks: gdb is not on PATH; install it (apt install gdb) to see where each rank's threads are\n";
    std::vector<std::future<Result<ProgramResult>>> running;
    for (pid_t pid : pids)
        running.push_back(std::async(std::launch::async, [&gdb, pid, timeout] {
            std::vector<std::string> args{"-batch", "-nx",
                                          "-p",     std::to_string(pid),
                                          "-iex",   "set debuginfod enabled off",
                                          "-ex",    "set print frame-arguments none",
                                          "-ex",    "set print entry-values no",
                                          "-ex",    "thread apply all bt"};
            // At the lowest priority: reading libtorch's symbols takes gdb seconds of a core, which
            // other work on the machine (other runs, other ranks) must not lose.
            if (access("/usr/bin/nice", X_OK) == 0) {
                args.insert(args.begin(), {"-n", "10", gdb});
                return runProgram("/usr/bin/nice", args, timeout);
            }
            return runProgram(gdb, args, timeout);
        }));
    std::ostringstream out;
    for (std::size_t rank = 0; rank < running.size(); ++rank) {
        const auto ran = running[rank].get();
        out << "stacks of rank " << rank << " (native, pid " << pids[rank] << ", innermost call first):\n";
        const std::string lines = ran ? backtraceLines(ran->output) : std::string();
        if (!lines.empty())
            out << lines;
        else
            out << "  gdb could not read them ("
                << (!ran            ? ran.error().message
                    : ran->timedOut ? "no answer in time"
                                    : "it may not attach: ptrace refused?")
                << ")\n";
    }
    return out.str();
}

} // namespace shardscope
