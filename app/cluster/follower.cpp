#include "app/cluster/follower.h"

#include "app/cluster/adoption.h"
#include "app/cluster/batch_script.h"
#include "app/cluster/catch_up.h"
#include "app/cluster/job_watch.h"
#include "app/cluster/submission.h"
#include "app/runs/run_import.h"
#include "engine/common/run_layout.h"
#include "engine/common/user_file.h"
#include "engine/common/wall_clock.h"
#include "storage/store_paths.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <iostream>
#include <thread>
#include <utility>

namespace shardscope::cluster {

namespace {

namespace fs = std::filesystem;

std::atomic<bool> g_cancelAsked{false};
std::atomic<bool> g_stopFollowing{false};

storage::RunAttempt attemptRow(const cluster::JobAttempt& a)
{
    storage::RunAttempt row;
    row.attempt = a.attempt;
    row.jobId = std::to_string(a.jobId);
    row.nodes = a.nodes;
    if (a.startedAt > 0)
        row.startedAt = a.startedAt;
    if (a.endedAt > 0)
        row.endedAt = a.endedAt;
    if (a.exitCode >= 0)
        row.exitCode = a.exitCode;
    row.lostNodes = a.lostNodes;
    row.resumedStep = a.resumedStep;
    row.resumedFrom = a.resumedFrom;
    return row;
}

// The last attempt's nodes that did not see the run folder (the batch script's probe).
std::string unseenFolderNodes(const std::vector<cluster::JobAttempt>& attempts)
{
    return attempts.empty() ? std::string() : attempts.back().nodesWithoutFolder;
}

// What the nodes wrote so far, into the run folder's events.jsonl and the history (the steps the
// history lacks: RunStore::recoverFromEventLog compares with the last step it has per rank).
void catchUp(storage::RunStore& store, std::int64_t runId, const fs::path& runDir, int nodes)
{
    const auto attempts = cluster::readAttempts(runDir);
    if (attempts.empty())
        return;
    (void)cluster::gatherAttemptEvents(runDir, nodes, attempts); // a node not started yet has no file: later
    if (auto recorded = store.recoverFromEventLog(runId); !recorded)
        std::cerr << "shardscope runs follow: warning: " << recorded.error().message << "\n";
}

// Where to ask SLURM of a run: a profile of this machine whose shared folder holds the run folder
// (the one its run.json names first: two profiles may share a folder), with its login node if it
// has one; on this machine when none does. A profile of the same name elsewhere may be another
// cluster: the folder decides.
cluster::SlurmClient clientOf(const fs::path& runDir, const fs::path& profilesFileGiven)
{
    auto profiles = cluster::loadProfiles(cluster::profilesFile(profilesFileGiven));
    if (!profiles)
        return {};
    auto submission = cluster::readSubmission(runDir);
    const std::string named = submission ? submission->profile : std::string();
    std::error_code ec;
    const fs::path folder = fs::weakly_canonical(runDir, ec).parent_path();
    const cluster::ClusterProfile* chosen = nullptr;
    for (const auto& [name, profile] : *profiles)
        if (!profile.sharedFolder.empty() && fs::weakly_canonical(fs::path(profile.sharedFolder) / "runs", ec) == folder
            && (!chosen || name == named))
            chosen = &profile;
    if (!chosen)
        return {};
    const cluster::SlurmClient client(*chosen);
    if (!chosen->login.empty())
        std::cout << "shardscope runs follow: SLURM's commands on " << client.where() << " (profile [" << chosen->name << "])"
                  << std::endl;
    return client;
}

// The end of a followed job into the history, as the submitting launcher would have recorded it:
// every attempt's events gathered, the end decided from them and SLURM's state, each attempt. The
// process's exit code.
int recordFollowedEnd(storage::RunStore& store, std::int64_t runId, const storage::RunSummary& summary, const fs::path& runDir,
                      int nodes, const cluster::SlurmClient& slurm, const cluster::JobState& end, bool sawItRun)
{
    const JobOutcome outcome = decideJobEnd(slurm, runDir, end, summary.worldSize, std::max(1, summary.worldSize / nodes));
    const storage::RunEnd& runEnd = outcome.end;
    const auto& attempts = outcome.attempts;
    recordAttempts(store, runId, attempts);
    if (!sawItRun) // a job that ran between two looks still ran, from its first attempt's start
        warnIf(store.markRunning(runId, attempts.empty() || attempts.front().startedAt <= 0
                                            ? std::nullopt
                                            : std::optional<double>(attempts.front().startedAt)));
    if (auto finished = store.finishRun(runId, runEnd, outcome.endedAt); !finished) {
        std::cerr << "shardscope runs follow: recording the end failed: " << finished.error().message << "\n";
        return 1;
    }
    std::cout << "shardscope runs follow: job " << summary.job.substr(6) << " ended " << end.state << "; run " << summary.name
              << " in the history: " << storage::statusName(runEnd.status) << " (" << attempts.size()
              << (attempts.size() == 1 ? " attempt" : " attempts") << ")\n";
    return runEnd.status == storage::RunStatus::Completed ? 0 : runEnd.status == storage::RunStatus::Cancelled ? 130 : 1;
}

// An attempt that ran on `runningOn` and is over (the job requeued, or running elsewhere): the
// nodes SLURM lost of it, asked now (later they may be back), said and written into the
// attempt's folder, so that the history and `runs show` name them.
void noteLostNodes(const JobWatch& watch, const fs::path& runDir, const JobState& state, std::string& runningOn)
{
    const bool runs = state.state == "RUNNING" || state.state == "COMPLETING";
    if (runs && (runningOn.empty() || state.nodes == runningOn)) {
        runningOn = state.nodes;
        return;
    }
    if (runningOn.empty())
        return;
    const std::string ranOn = std::exchange(runningOn, runs ? state.nodes : std::string());
    auto lost = watch.slurm.lostNodes(ranOn);
    if (!lost || lost->empty())
        return;
    const auto attempts = cluster::readAttempts(runDir);
    const auto ran = std::find_if(attempts.rbegin(), attempts.rend(), [&](const JobAttempt& a) { return a.nodes == ranOn; });
    if (ran == attempts.rend())
        return;
    std::cout << watch.who << ": attempt " << ran->attempt << " lost node " << *lost << "; SLURM "
              << (state.ended() ? "ended the job" : "runs the job again") << std::endl;
    std::ofstream(RunLayout(runDir).lostNodesFile(ran->attempt)) << *lost << "\n";
}

} // namespace

void cancelJobOnSignals(std::initializer_list<int> signals)
{
    struct sigaction cancel { };
    cancel.sa_handler = [](int) { g_cancelAsked.store(true); };
    for (int sig : signals)
        sigaction(sig, &cancel, nullptr);
}

void stopFollowingOnSignals(std::initializer_list<int> signals)
{
    struct sigaction stop { };
    stop.sa_handler = [](int) { g_stopFollowing.store(true); };
    for (int sig : signals)
        sigaction(sig, &stop, nullptr);
}

bool followingStopped() { return g_stopFollowing.load(); }

// What the history shows of the job while it is not running yet, or where it runs.
std::string detailOf(const JobState& state, std::int64_t jobId)
{
    if (state.state == "PENDING")
        return "pending (" + state.reason + "): " + cluster::pendingAdvice(state.reason, jobId);
    return state.state + (state.nodes.empty() ? "" : " on " + state.nodes);
}

void warnIf(const Result<void>& result)
{
    if (!result)
        std::cerr << "shardscope launch: warning: the history: " << result.error().message << "\n";
}

std::optional<JobState> JobWatch::look()
{
    if (g_cancelAsked.exchange(false)) {
        std::cout << who << ": cancelling job " << jobId << " (scancel)" << std::endl;
        if (auto cancelled = slurm.cancel(jobId); !cancelled)
            std::cerr << who << ": " << cancelled.error().message << "\n";
    }
    auto state = slurm.state(jobId);
    if (!state) {
        std::cerr << who << ": " << state.error().message << "\n";
        return std::nullopt;
    }
    if (const std::string now = detailOf(*state, jobId); now != said && !state->ended()) {
        said = now;
        std::cout << who << ": job " << jobId << " is " << now << std::endl;
        if (store) {
            warnIf(store->setStatusDetail(runId, now));
            if (state->state == "RUNNING" && !running)
                warnIf(store->markRunning(runId));
        }
        running = running || state->state == "RUNNING";
    }
    return *state;
}

std::optional<JobState> followJob(JobWatch& watch, const fs::path& runDir, const FollowOptions& options,
                                  const std::function<void(bool ended)>& ingest)
{
    using Clock = std::chrono::steady_clock;
    bool silent = false; // SLURM has not answered since silentSince
    Clock::time_point silentSince{};
    auto retry = options.retryInterval;
    std::string runningOn; // the nodes of the attempt SLURM last said runs
    while (!g_stopFollowing.load()) {
        auto state = watch.look();
        if (!state) {
            // SLURM could not be asked. A job it says it does not know has ended: the folder may
            // say how. A SLURM that does not answer at all (its controller restarting) is not a
            // job that ended: the nodes go on, and so does the following, from their files.
            const auto known = watch.slurm.knowsJob(watch.jobId);
            if (known && !*known) {
                state = endFromFolder(runDir);
            } else if (!known) {
                if (!silent) {
                    silent = true;
                    silentSince = Clock::now();
                    std::cout << watch.who << ": SLURM does not answer; the job goes on without its controller, and this "
                              << "follows the nodes' files until SLURM answers again" << std::endl;
                }
                state = finalEndFromFolder(runDir);
                if (!state && Clock::now() - silentSince > options.silenceLimit) {
                    std::cerr << watch.who << ": SLURM has not answered for "
                              << std::chrono::duration_cast<std::chrono::seconds>(options.silenceLimit).count()
                              << " s; the run stays open (`runs follow` takes it up again)\n";
                    return std::nullopt;
                }
            }
            if (!state) {
                ingest(false);
                std::this_thread::sleep_for(retry);
                retry = std::min(retry * 2, options.longestRetry);
                continue;
            }
            std::cout << watch.who << ": " << state->reason << std::endl;
        } else if (silent) {
            std::cout << watch.who << ": SLURM answers again (after "
                      << std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - silentSince).count() << " s)"
                      << std::endl;
        }
        silent = false;
        retry = options.retryInterval;
        noteLostNodes(watch, runDir, *state, runningOn);
        ingest(state->ended());
        if (state->ended())
            return state;
        std::this_thread::sleep_for(options.pollInterval);
    }
    return std::nullopt;
}

namespace {

// The last attempt of the run folder, when its batch script wrote its end.
std::optional<JobAttempt> lastEndedAttempt(const fs::path& runDir)
{
    const auto attempts = cluster::readAttempts(runDir);
    if (attempts.empty() || attempts.back().endedAt <= 0)
        return std::nullopt;
    return attempts.back();
}

} // namespace

std::optional<JobState> finalEndFromFolder(const fs::path& runDir)
{
    const auto last = lastEndedAttempt(runDir);
    if (!last || last->exitCode < 0 || last->exitCode == 75 || last->exitCode == 143)
        return std::nullopt;
    return cluster::JobState{last->exitCode == 0 ? "COMPLETED" : "FAILED",
                             "SLURM does not answer; the job's batch script wrote its end (exit " + std::to_string(last->exitCode)
                                 + ")",
                             last->nodes, std::to_string(last->exitCode) + ":0"};
}

std::optional<JobState> endFromFolder(const fs::path& runDir)
{
    const auto last = lastEndedAttempt(runDir);
    if (!last)
        return std::nullopt;
    // SLURM keeps a requeued or preempted job under its id while it waits: one it no longer knows
    // has no attempt to come. Stopped by SIGTERM (143: scancel, a preemption) is cancelled; the
    // rest is what the batch script saw (75: a requeue asked for that never ran).
    const std::string state = last->exitCode == 0 ? "COMPLETED" : last->exitCode == 143 ? "CANCELLED" : "FAILED";
    return cluster::JobState{state, "the job has left SLURM's memory; its end is what its batch script wrote", last->nodes,
                             std::to_string(std::max(0, last->exitCode)) + ":0"};
}

JobOutcome decideJobEnd(const SlurmClient& slurm, const fs::path& runDir, const JobState& state, int worldSize,
                        int processesPerNode)
{
    JobOutcome outcome;
    outcome.attempts = readAttempts(runDir);
    std::int64_t malformed = 0;
    auto events = readRunEvents(runDir, malformed);
    std::vector<std::string> nodeNames;
    if (auto names = slurm.hostnames(outcome.attempts.empty() ? state.nodes : outcome.attempts.back().nodes))
        nodeNames = *names;
    outcome.end = jobEnd(state, events ? *events : std::vector<protocol::Event>{}, worldSize, processesPerNode, nodeNames,
                         unseenFolderNodes(outcome.attempts), runDir.string());
    // When the job's last attempt ended, as its batch script wrote it (a follower that caught up
    // later must not make it end now).
    if (!outcome.attempts.empty() && outcome.attempts.back().endedAt > 0)
        outcome.endedAt = outcome.attempts.back().endedAt;
    return outcome;
}

void recordAttempts(storage::RunStore& store, std::int64_t runId, const std::vector<JobAttempt>& attempts)
{
    for (const auto& a : attempts)
        warnIf(store.recordAttempt(runId, attemptRow(a)));
    warnIf(store.setStatusDetail(runId, ""));
}

int followRun(const FollowRequest& request)
{
    if (request.all)
        return catchUpClusterRuns(request.profilesFile, request.programPath, request.json);
    const std::string& reference = request.reference;
    auto home = storage::shardscopeHome();
    if (!home) {
        std::cerr << "shardscope runs follow: " << home.error().message << "\n";
        return 1;
    }
    storage::StoreOptions options;
    options.markInterrupted = false;
    auto store = storage::RunStore::open(storage::historyFile(*home), options);
    bool adopted = false;
    auto runId = store ? followedRun(*store, *home, reference, adopted) : Result<std::int64_t>(store.error());
    auto details = runId ? store->run(*runId) : Result<storage::RunDetails>(runId.error());
    if (!details) {
        std::cerr << "shardscope runs follow: " << details.error().message << "\n";
        return 1;
    }
    const auto& summary = details->summary;
    if (summary.job.rfind("slurm:", 0) != 0) {
        std::cerr << "shardscope runs follow: run " << summary.name
                  << " is not a cluster job; `runs follow` follows runs submitted with `launch --target slurm`\n";
        return 2;
    }
    if (storage::isTerminal(summary.status)) {
        std::cout << "shardscope runs follow: run " << summary.name << " has ended: " << storage::statusName(summary.status)
                  << "\n";
        return 0;
    }
    if (!adopted && storage::checkLiveness(details->launcher) != storage::Liveness::Gone) {
        std::cerr << "shardscope runs follow: run " << summary.name << " is followed by its launcher (pid "
                  << details->launcher.pid << " on " << details->launcher.host
                  << "), which records it; Stop it there, or follow it from here once that one has gone\n";
        return 2;
    }
    if (adopted)
        std::cout << "shardscope runs follow: run " << summary.name << " (run " << *runId
                  << ") put in this history from its folder's run.json" << std::endl;
    const std::int64_t jobId = std::atoll(summary.job.c_str() + 6);
    const fs::path runDir = summary.runDir;
    const int nodes = std::max(1, nodesOfBatchScript(runDir));
    warnIf(store->adoptRun(*runId, storage::LauncherIdentity::current()));
    // A run that started before this follower (caught up): running since its first attempt began.
    bool running = summary.status == storage::RunStatus::Running;
    if (const auto attempts = cluster::readAttempts(runDir); !running && !attempts.empty() && attempts.front().startedAt > 0)
        running = store->markRunning(*runId, attempts.front().startedAt).ok();
    // SIGINT (Ctrl-C, the workbench's Stop) cancels the job; SIGTERM and SIGHUP (a logout, a
    // shutdown, a kill of a background follower) only stop following it. (Before it says it
    // follows: a Stop that answers that line must find them.)
    cancelJobOnSignals({SIGINT});
    stopFollowingOnSignals({SIGTERM, SIGHUP});
    std::cout << "shardscope runs follow: following job " << jobId << " of run " << summary.name << " (" << nodes
              << " nodes; run folder " << runDir.string() << ")" << std::endl;
    const cluster::SlurmClient slurm = clientOf(runDir, request.profilesFile);
    // Over SSH every look is a login: less often.
    const auto pollInterval = slurm.where() == "this machine" ? std::chrono::milliseconds(500) : std::chrono::milliseconds(3000);
    JobWatch watch{slurm, jobId, "shardscope runs follow", &*store, *runId, summary.statusDetail, running};
    auto lastCatchUp = std::chrono::steady_clock::now() - std::chrono::hours(1);
    FollowOptions following;
    following.pollInterval = pollInterval;
    following.retryInterval = pollInterval;
    const auto end = followJob(watch, runDir, following, [&](bool ended) {
        if (ended || std::chrono::steady_clock::now() - lastCatchUp > std::chrono::seconds(2)) {
            catchUp(*store, *runId, runDir, nodes);
            lastCatchUp = std::chrono::steady_clock::now();
        }
    });
    if (followingStopped()) {
        std::cout << "shardscope runs follow: stopped following job " << jobId << " (SIGTERM/SIGHUP: the job goes on; "
                  << "`runs follow` takes it up again)" << std::endl;
        return 0;
    }
    if (!end)
        return 1;
    return recordFollowedEnd(*store, *runId, summary, runDir, nodes, slurm, *end, watch.running);
}

} // namespace shardscope::cluster
