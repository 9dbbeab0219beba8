#pragma once

// How a run ended: the one decision, from the evidence. Whatever watched the run (this machine's
// launcher, a follower reading a cluster job's folder, an import of a folder's files) gathers
// what it knows into RunEvidence; decideRunEnd says completed, failed, cancelled or stopped with a
// checkpoint, names the root cause and says why. Nothing else decides a run's end state.
//
// What decides, in order:
//   - what the ranks said (their `done` and `error` events): a rank's own error is the root cause
//     (the earliest; a peer's loss is a consequence), and a run succeeded only when every rank
//     said it finished its steps;
//   - a launcher's outcome (exits, signals, a hang it saw, a stop it was asked for): a rank that
//     exited 0 without saying it finished left early; a stop on SIGTERM/SIGUSR1 where every rank
//     saved the same checkpoint can go on from it;
//   - a cluster job's end state (SLURM's): CANCELLED is a cancelled run; otherwise a rank that went
//     silent while its peers lost it is named with its node, beside what SLURM says;
//   - the nodes that could not see the run folder: the job ended before any rank started.
// Qt-free, torch-free, and starts nothing: tested with recorded events and SLURM text.

#include "app/launcher/launcher.h"
#include "engine/protocol/events.h"
#include "storage/run_types.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace shardscope {
class RunMonitor;
}

namespace shardscope::runs {

// What one rank said of itself in its events.
struct RankWords {
    bool heard = false; // any event at all (a script without Shardscope's reporter sends none)
    bool saidDone = false; // it sent its `done` event
    std::string done; // that event's status ("completed", "checkpointed", ...)
    double doneAt = 0; // that event's time, seconds since the epoch
    std::optional<std::int64_t> pid; // the process id it said hello with
    std::int64_t lastStep = 0;
};

// What the ranks said: as a launcher's monitor heard them, or as a run folder's events hold them.
struct Testimony {
    std::map<int, RankWords> ranks;
    std::vector<ReportedError> errors; // every error event in the order they came, peers' losses too
    std::vector<std::string> errorMessages; // what each of `errors` said
    std::string lastCheckpoint; // the last training-state checkpoint a rank reported
    std::string eventFileTrouble; // what events.jsonl could not take (a full disk), empty when nothing

    bool heardFrom(int rank) const;
    bool endedWith(int rank, const std::string& status) const; // its `done` said this status
    std::set<int> ranksDone(const std::string& status) const;
    std::optional<double> doneAt(int rank) const;
    std::int64_t lastStepOf(int rank) const;
    bool isEnding(int rank) const; // it said `done` or reported an error: on its way out
    std::string messageOf(std::size_t error) const; // errorMessages[error], empty when missing
};

Testimony testimonyOf(const std::vector<protocol::Event>& events);
// The monitor's view of `ranks`.
Testimony testimonyOf(const RunMonitor& monitor, const std::vector<int>& ranks);

// A cluster scheduler's word on a job that has ended, and where its ranks ran.
struct ClusterJobEnd {
    std::string state; // SLURM's: "COMPLETED", "FAILED", "CANCELLED by 1000", "TIMEOUT", "NODE_FAIL", ...
    std::string nodes; // its node list ("n[1-2]")
    std::string exitCode; // "0:15" (code:signal)
    int processesPerNode = 1; // node M runs ranks M * processesPerNode ..
    std::vector<std::string> nodeNames; // the last attempt's nodes, in SLURM's order
    std::string nodesWithoutFolder; // the last attempt's nodes that did not see the run folder ("n3")
    std::string runDir; // the run folder, for the message of nodes that did not see it
};

struct RunEvidence {
    Testimony ranks; // what the ranks said
    std::set<int> world; // every rank of the run: each must have said it finished for a success
    // Where a launcher supervised the ranks (a local run; a node's launcher): its outcome, or why
    // the launch itself failed (no rank ran).
    std::optional<Result<LaunchOutcome>> launch;
    bool scriptRun = false; // a user's script: torchrun starts its ranks, which may not report
    std::int64_t totalSteps = 0; // the steps the run was to train (0: unknown), for the message
    std::function<std::string(int rank)> logTail; // a rank's last log lines, for the root cause
    std::optional<ClusterJobEnd> job; // a cluster job's end
};

struct RunVerdict {
    storage::RunEnd end; // what the history and outcome.json record
    // With a launcher: its outcome as judged (the exit code the launcher ends with, its root cause,
    // the sentences of why), which the launcher reports.
    LaunchOutcome launch;
    // The word for it: "completed", "failed", "failed (unfinished)" (not every rank said how it
    // ended), "cancelled", "stopped with a checkpoint".
    std::string word;
};

RunVerdict decideRunEnd(const RunEvidence& evidence);

} // namespace shardscope::runs
