#include "app/runs/run_end.h"

#include "engine/common/run_layout.h"

#include "app/launcher/run_monitor.h"

#include <algorithm>
#include <csignal>

namespace shardscope::runs {

bool Testimony::heardFrom(int rank) const
{
    const auto found = ranks.find(rank);
    return found != ranks.end() && found->second.heard;
}

bool Testimony::endedWith(int rank, const std::string& status) const
{
    const auto found = ranks.find(rank);
    return found != ranks.end() && found->second.saidDone && found->second.done == status;
}

std::set<int> Testimony::ranksDone(const std::string& status) const
{
    std::set<int> out;
    for (const auto& [rank, words] : ranks)
        if (words.saidDone && words.done == status)
            out.insert(rank);
    return out;
}

std::optional<double> Testimony::doneAt(int rank) const
{
    const auto found = ranks.find(rank);
    if (found == ranks.end() || !found->second.saidDone)
        return std::nullopt;
    return found->second.doneAt;
}

std::int64_t Testimony::lastStepOf(int rank) const
{
    const auto found = ranks.find(rank);
    return found == ranks.end() ? 0 : found->second.lastStep;
}

std::string Testimony::messageOf(std::size_t error) const
{
    return error < errorMessages.size() ? errorMessages[error] : std::string();
}

bool Testimony::isEnding(int rank) const
{
    return doneAt(rank).has_value()
           || std::any_of(errors.begin(), errors.end(), [&](const ReportedError& e) { return e.rank == rank; });
}

Testimony testimonyOf(const std::vector<protocol::Event>& events)
{
    Testimony t;
    for (const auto& event : events) {
        RankWords& words = t.ranks[event.rank];
        words.heard = true;
        if (const auto* done = std::get_if<protocol::DoneEvent>(&event.body)) {
            words.saidDone = true;
            words.done = done->status;
            words.doneAt = event.time;
        } else if (const auto* error = std::get_if<protocol::ErrorEvent>(&event.body)) {
            t.errors.push_back({event.rank, event.time, error->kind});
            t.errorMessages.push_back(error->message);
        } else if (const auto* step = std::get_if<protocol::StepEvent>(&event.body)) {
            words.lastStep = step->step;
        } else if (const auto* hello = std::get_if<protocol::HelloEvent>(&event.body)) {
            words.pid = hello->pid;
        } else if (const auto* saved = std::get_if<protocol::CheckpointEvent>(&event.body); saved && saved->kind == "state") {
            t.lastCheckpoint = saved->path;
        }
    }
    return t;
}

Testimony testimonyOf(const RunMonitor& monitor, const std::vector<int>& ranks)
{
    Testimony t;
    t.errors = monitor.reportedErrors();
    t.errorMessages = monitor.reportedErrorMessages();
    t.lastCheckpoint = monitor.lastCheckpoint();
    t.eventFileTrouble = monitor.eventFileTrouble();
    for (int rank : ranks) {
        RankWords& words = t.ranks[rank];
        words.heard = monitor.heardFrom(rank);
        words.pid = monitor.pidOf(rank);
        words.lastStep = monitor.lastStepOf(rank);
        if (const auto done = monitor.doneAt(rank)) {
            words.saidDone = true;
            words.doneAt = *done;
            words.done = monitor.doneStatusOf(rank);
        }
    }
    return t;
}

namespace {

// --- A launcher's run ---------------------------------------------------------------------------

// What the ranks reported decides, not only their exit codes: the root cause is the rank whose
// own error came first, and a run succeeded only when every rank finished its steps.
void judgeLaunch(LaunchOutcome& outcome, const Testimony& said, std::int64_t totalSteps, bool scriptRun)
{
    if (!said.eventFileTrouble.empty())
        outcome.addReason("warning: " + said.eventFileTrouble);
    const auto completed = said.ranksDone("completed");
    const auto& errors = said.errors;
    if (scriptRun)
        // torchrun starts a script's ranks: their pids are their own hellos' (not accelerate
        // launch's), and one that exited 0 is known to have ended only by its reporter's `done`,
        // sent from its exit handler.
        for (auto& r : outcome.ranks) {
            if (const auto found = said.ranks.find(r.rank); found != said.ranks.end() && found->second.pid)
                r.pid = static_cast<pid_t>(*found->second.pid);
            if (const auto done = said.doneAt(r.rank); done && !r.failed())
                r.exitedAt = *done;
        }
    // A script rank's reporter says "completed" on any exit with code 0, sys.exit(0) mid-training
    // too: one whose peers lost it after it said so had left them (#43 point 1).
    const auto lostAfterItsEnd = [&](int rank) {
        const auto done = scriptRun ? said.doneAt(rank) : std::nullopt;
        return done && std::any_of(errors.begin(), errors.end(), [&](const ReportedError& e) {
                   return e.rank != rank && e.kind == protocol::kPeerLostKind && e.time > *done;
               });
    };
    // A rank that exits 0 without having reported the end of its steps left early (a script
    // without the reporter says nothing either way: its exit status is all there is).
    outcome.blameFirstOwnError(errors, [&](int rank) {
        return (!completed.count(rank) && (!scriptRun || said.heardFrom(rank)) && !said.isEnding(rank)) || lostAfterItsEnd(rank);
    });
    if (outcome.cancelled && !outcome.rootCauseRank && !outcome.ranks.empty()
        && std::all_of(outcome.ranks.begin(), outcome.ranks.end(),
                       [&](const RankExit& r) { return !r.failed() && completed.count(r.rank); })) {
        // The stop came after every rank had finished its steps (a time limit's warning at the end
        // of the last attempt): nothing was cut short, the run completed.
        outcome.cancelled = false;
        outcome.checkpointSignal = 0;
        outcome.exitCode = 0;
        return;
    }
    if (outcome.cancelled)
        return;
    if (outcome.exitCode != 0) {
        // Still a failure (the process did not end well), but what it trained is whole.
        if (outcome.rootCauseRank && !outcome.rootCauseStandsIn && completed.count(*outcome.rootCauseRank)
            && !lostAfterItsEnd(*outcome.rootCauseRank))
            outcome.addReason("rank " + std::to_string(*outcome.rootCauseRank)
                              + " had reported that it finished its training before it ended: it failed on its way out");
        return;
    }
    for (const auto& r : outcome.ranks) {
        // A script without Shardscope's reporter says nothing: its exit status is all there is.
        if (completed.count(r.rank) || (scriptRun && !said.heardFrom(r.rank)))
            continue;
        outcome.exitCode = 1;
        outcome.rootCauseRank = r.rank;
        outcome.addReason("rank " + std::to_string(r.rank) + " exited with code " + std::to_string(r.status())
                          + " without reporting that it finished its steps (last step " + std::to_string(said.lastStepOf(r.rank))
                          + (totalSteps > 0 ? " of " + std::to_string(totalSteps) : std::string()) + "): the run is incomplete");
        return;
    }
}

// A stop on SIGTERM or SIGUSR1 (a time limit's warning, a preemption) ended as asked when every
// rank of this machine saved the checkpoint and said so: the run can go on from it, and the
// launcher exits with kCheckpointedExitCode after SIGUSR1 (a SLURM batch script requeues its job
// on it), 143 after SIGTERM.
void settleCheckpointStop(LaunchOutcome& outcome, const Testimony& said)
{
    const auto signalName = [](int sig) { return sig == SIGTERM ? std::string("SIGTERM") : std::string("SIGUSR1"); };
    if (outcome.checkpointSignal == 0 || outcome.rootCauseRank)
        return;
    const auto saved = said.ranksDone("checkpointed");
    for (const auto& r : outcome.ranks)
        if (!saved.count(r.rank)) {
            outcome.addReason("stopped by " + signalName(outcome.checkpointSignal) + ", but rank " + std::to_string(r.rank)
                              + " did not report a saved checkpoint");
            return;
        }
    outcome.exitCode = outcome.checkpointSignal == SIGUSR1 ? kCheckpointedExitCode : 128 + SIGTERM;
    outcome.savedCheckpoint = said.lastCheckpoint;
    outcome.addReason("stopped by " + signalName(outcome.checkpointSignal) + " after step "
                      + std::to_string(said.lastStepOf(outcome.ranks.empty() ? 0 : outcome.ranks.front().rank))
                      + " with a checkpoint to resume from: " + said.lastCheckpoint);
}

// The history's record of a launcher's judged outcome: the root cause's own errors, its exit and
// its last log lines, then why the launcher ended it and what else went wrong.
storage::RunEnd recordOfLaunch(const LaunchOutcome& outcome, const Testimony& said,
                               const std::function<std::string(int)>& logTail)
{
    storage::RunEnd end;
    end.status = outcome.cancelled       ? storage::RunStatus::Cancelled
                 : outcome.exitCode == 0 ? storage::RunStatus::Completed
                                         : storage::RunStatus::Failed;
    end.exitCode = outcome.exitCode;
    end.rootCauseRank = outcome.rootCauseRank;
    for (const auto& r : outcome.ranks)
        end.rankExitCodes.emplace_back(r.rank, r.status());
    if (outcome.rootCauseRank) {
        for (std::size_t i = 0; i < said.errors.size(); ++i)
            if (said.errors[i].rank == *outcome.rootCauseRank)
                end.error += said.errors[i].kind + ": " + said.messageOf(i) + "\n";
        for (const auto& r : outcome.ranks)
            if (r.rank == *outcome.rootCauseRank)
                end.error += r.describe() + "\n";
        if (const std::string log = logTail ? logTail(*outcome.rootCauseRank) : std::string(); !log.empty())
            end.error += "last log lines:\n" + log;
    }
    if (!outcome.abortReason.empty())
        end.error += outcome.abortReason + "\n";
    if (!outcome.reason.empty())
        end.error += outcome.reason + "\n";
    return end;
}

RunVerdict launcherEnd(const RunEvidence& evidence)
{
    RunVerdict verdict;
    if (*evidence.launch) {
        verdict.launch = **evidence.launch;
        judgeLaunch(verdict.launch, evidence.ranks, evidence.totalSteps, evidence.scriptRun);
        settleCheckpointStop(verdict.launch, evidence.ranks);
    } else {
        verdict.launch.exitCode = 1; // the launch itself failed: no rank ran
    }
    verdict.end = recordOfLaunch(verdict.launch, evidence.ranks, evidence.logTail);
    verdict.word = !verdict.launch.savedCheckpoint.empty() ? "stopped with a checkpoint"
                                                           : std::string(storage::statusName(verdict.end.status));
    return verdict;
}

// --- A run known by its events alone (an import, a cluster job's folder) ------------------------

// Failed when a rank reported its own error (the earliest is the root cause), completed when every
// rank of the world said done "completed", else failed as unfinished (a rank never said how it
// ended: killed, or its files were copied mid-run).
RunVerdict eventsEnd(const RunEvidence& evidence)
{
    RunVerdict verdict;
    storage::RunEnd& end = verdict.end;
    const Testimony& said = evidence.ranks;
    const auto own = std::find_if(said.errors.begin(), said.errors.end(),
                                  [](const ReportedError& e) { return e.kind != protocol::kPeerLostKind; });
    if (own != said.errors.end()) {
        end.rootCauseRank = own->rank;
        end.error = own->kind + ": " + said.messageOf(static_cast<std::size_t>(own - said.errors.begin()));
    }
    const bool allCompleted = std::all_of(evidence.world.begin(), evidence.world.end(),
                                          [&](int r) { return said.endedWith(r, "completed"); });
    if (end.rootCauseRank) {
        end.status = storage::RunStatus::Failed;
        verdict.word = "failed";
    } else if (allCompleted) {
        end.status = storage::RunStatus::Completed;
        end.exitCode = 0;
        verdict.word = "completed";
    } else {
        // Not a success it was not: the history has no "unknown", so failed, saying why.
        end.status = storage::RunStatus::Failed;
        end.error = "not every rank reported its end (killed, or its files were copied while it ran)";
        verdict.word = "failed (unfinished)";
    }
    return verdict;
}

// --- A cluster job ------------------------------------------------------------------------------

// The node that runs `rank`, for the user: "n2 (node 1)".
std::string nodeOf(int rank, const ClusterJobEnd& job)
{
    const int node = rank / std::max(1, job.processesPerNode);
    return (static_cast<std::size_t>(node) < job.nodeNames.size() ? job.nodeNames[static_cast<std::size_t>(node)] + " " : "")
           + "(node " + std::to_string(node) + ")";
}

// What SLURM's end state says beyond the ranks, for a failed run.
std::string whatSlurmSays(const ClusterJobEnd& job, const std::string& word)
{
    if (word == "TIMEOUT")
        return "the job reached its time limit (TIMEOUT) with no checkpoint saved for it: give the profile a longer time, "
               "or a warning_seconds long enough for a step and a checkpoint";
    if (word == "NODE_FAIL")
        return "SLURM lost a node of the job (NODE_FAIL" + (job.nodes.empty() ? "" : ", nodes " + job.nodes) + ")";
    if (word == "OUT_OF_MEMORY")
        return "a node ran out of host memory (OUT_OF_MEMORY); ask for more memory (--mem in the profile's sbatch lines)";
    if (word == "PREEMPTED")
        return "the job was preempted and not requeued (PREEMPTED)";
    if (word == "BOOT_FAIL" || word == "DEADLINE")
        return "the job ended " + word;
    return "the job ended " + word + (job.exitCode.empty() ? "" : " (exit " + job.exitCode + ")");
}

// What the ranks said decides (a rank's own error is the root cause; every rank done is a
// success, whatever SLURM's state), then SLURM's end state: CANCELLED is a cancelled run;
// otherwise it failed, and a rank that went silent while its peers lost it (its node's job step
// killed, the node down) is the root cause, named with its node. A job whose nodes did not all
// see the run folder ended before any rank started (the batch script's probe): that, with the
// fix, is its end, not a silent rank.
RunVerdict clusterJobEnd(const RunEvidence& evidence)
{
    const ClusterJobEnd& job = *evidence.job;
    RunVerdict verdict = eventsEnd(evidence);
    storage::RunEnd& end = verdict.end;
    if (!job.nodesWithoutFolder.empty()) {
        end.status = storage::RunStatus::Failed;
        end.rootCauseRank.reset();
        end.error = "node(s) " + job.nodesWithoutFolder + " do not see the run folder " + job.runDir
                    + ", so the job ended before any rank started: the profile's shared_folder must be mounted at the same "
                      "path on every node and on this machine. Mount it there, or choose a shared_folder that every node sees";
        verdict.word = "failed";
        return verdict;
    }
    if (end.status == storage::RunStatus::Completed)
        return verdict;
    const std::string word = job.state.substr(0, job.state.find(' '));
    if (word == "CANCELLED") {
        end.status = storage::RunStatus::Cancelled;
        end.rootCauseRank.reset();
        end.error = "the job was cancelled (scancel)";
        verdict.word = "cancelled";
        return verdict;
    }
    end.status = storage::RunStatus::Failed;
    verdict.word = "failed";
    if (end.rootCauseRank) {
        end.error = "rank " + std::to_string(*end.rootCauseRank) + " on " + nodeOf(*end.rootCauseRank, job)
                    + " failed first: " + end.error;
    } else if (std::none_of(evidence.world.begin(), evidence.world.end(),
                            [&](int rank) { return evidence.ranks.heardFrom(rank); })) {
        // Not one rank said a word: the job failed before its launchers started them (a node's
        // launcher that could not run, the batch script itself). No rank is to blame.
        end.error = "no rank started: the job failed before its nodes' launchers started the ranks; the job's output ("
                    + RunLayout(job.runDir).slurmOutput("<job>").string() + ") and each node's launcher log say why";
    } else {
        // The ranks that said neither done nor an error of their own: the peers that lost them said "peer".
        for (int rank : evidence.world)
            if (!evidence.ranks.isEnding(rank)) {
                end.rootCauseRank = rank;
                end.error = "rank " + std::to_string(rank) + " on " + nodeOf(rank, job)
                            + " ended without a word while its peers lost it: its node's job step was killed, or the node "
                              "went down; its log is in that node's folder of the run";
                break;
            }
    }
    const std::string slurm = whatSlurmSays(job, word);
    end.error = end.error.empty() ? slurm : end.error + "; " + slurm;
    return verdict;
}

} // namespace

RunVerdict decideRunEnd(const RunEvidence& evidence)
{
    if (evidence.launch)
        return launcherEnd(evidence);
    if (evidence.job)
        return clusterJobEnd(evidence);
    return eventsEnd(evidence);
}

} // namespace shardscope::runs
