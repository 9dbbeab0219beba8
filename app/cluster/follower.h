#pragma once

// Following a cluster job from this machine until it ends, for `shardscope launch --target slurm`
// (the submitting launcher) and `shardscope runs follow` (any other) alike: one follower. It looks
// at SLURM (JobWatch: the run's status detail in the history as SLURM says it, a Stop asked for
// cancelling the job), takes in what the nodes wrote after each look (the caller says how), asks
// again while SLURM does not answer, and ends a job SLURM has forgotten as its folder says. The
// end is then decided (runs::decideRunEnd, through jobEnd) and recorded with each attempt.
// Qt-free and torch-free.

#include "app/cluster/attempts.h"
#include "app/cluster/slurm.h"
#include "storage/run_store.h"
#include "storage/run_types.h"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace shardscope::cluster {

// These signals ask for the followed job to be cancelled (scancel) at the next look: SIGINT
// (Ctrl-C, the workbench's Stop), and SIGTERM for a submitting launcher.
void cancelJobOnSignals(std::initializer_list<int> signals);
// These signals end the following, not the job (`runs follow`: SIGTERM and SIGHUP, a logout, a
// shutdown, a kill of a background follower).
void stopFollowingOnSignals(std::initializer_list<int> signals);
bool followingStopped();

// What the history shows of the job while it is not running yet, or where it runs.
std::string detailOf(const JobState& state, std::int64_t jobId = 0);

// A write to the history that failed, said as a warning: the run goes on.
void warnIf(const Result<void>& result);

// One look at a job, for `launch` and `runs follow` alike: a Stop asked for (SIGINT) cancels it
// (scancel); SLURM's state, and when what it says has changed, that into the history (the run
// marked running once it runs). None, having said why, when SLURM could not be asked.
struct JobWatch {
    const cluster::SlurmClient& slurm;
    std::int64_t jobId = 0;
    const char* who = ""; // "shardscope launch", "shardscope runs follow"
    storage::RunStore* store = nullptr; // none: followed without a history
    std::int64_t runId = 0;
    std::string said; // what the history shows now
    bool running = false;

    std::optional<cluster::JobState> look();
};

struct FollowOptions {
    std::chrono::milliseconds pollInterval{500}; // between looks
    // While SLURM does not answer: this before the first look again, doubled each time up to the
    // longest.
    std::chrono::milliseconds retryInterval{500};
    std::chrono::milliseconds longestRetry{10000};
    // How long SLURM may leave every look unanswered (a controller restarting, a login node's
    // network gone) before the run is left open for a later `runs follow`. The job goes on without
    // its controller, so the follower does too, from the nodes' files.
    std::chrono::milliseconds silenceLimit{std::chrono::hours(1)};
};

// Looks at the job until it ends, calling `ingest(ended)` after every look to take in what the
// nodes wrote. While SLURM does not answer, the nodes' files are followed instead, and the run
// ends when its last attempt's batch script wrote an end no requeue follows (0, or a failure
// other than 75 and 143); a job SLURM says it no longer knows ends as its folder's last attempt
// wrote. The end state; none when following stopped (followingStopped()) or SLURM did not answer
// for `silenceLimit` (said, the run left open for a later `runs follow`).
std::optional<JobState> followJob(JobWatch& watch, const std::filesystem::path& runDir, const FollowOptions& options,
                                  const std::function<void(bool ended)>& ingest);

// SLURM forgets an ended job after a while (MinJobAge): then the run folder says how it ended,
// when its last attempt's batch script saw its end. None when it did not (still running
// elsewhere, or killed with its node: only SLURM could tell).
std::optional<JobState> endFromFolder(const std::filesystem::path& runDir);
// While SLURM does not answer: the end the last attempt's batch script wrote when no requeue can
// follow it (0: completed; a failure other than 75, a requeue asked for, and 143, a SIGTERM that a
// preemption's requeue may follow). None otherwise.
std::optional<JobState> finalEndFromFolder(const std::filesystem::path& runDir);

// How a job ended: from its folder's events (events.jsonl: every attempt's, gathered) and SLURM's
// end state, naming nodes as SLURM does; with its attempts.
struct JobOutcome {
    storage::RunEnd end;
    std::vector<JobAttempt> attempts;
    std::optional<double> endedAt; // when the last attempt's batch script saw its end; none: not seen
};
JobOutcome decideJobEnd(const SlurmClient& slurm, const std::filesystem::path& runDir, const JobState& state, int worldSize,
                        int processesPerNode);
// Each attempt into the history, and the run's status detail cleared (its status says the end).
void recordAttempts(storage::RunStore& store, std::int64_t runId, const std::vector<JobAttempt>& attempts);

// `shardscope runs follow RUN`: a cluster run whose submitting launcher is gone (--detach, a closed
// terminal, a workbench on another machine) followed from here until its job ends: SLURM's state
// into the history, the nodes' steps recorded as they come (what the history already has is not
// recorded twice), the attempts and the end. Refused while its own launcher still follows it.
// RUN may be a cluster run's folder that this history does not have (submitted from another
// machine that shares the folder): its run.json puts it in (adoption.h). SIGINT cancels the job,
// as in `launch`. With `all`: a follower in the background for each run of the profiles' shared
// folders that nobody follows here (catch_up.h; the workbench does this when it opens). Returns
// the exit code.
struct FollowRequest {
    std::string reference; // a run id or name, or a cluster run's folder
    bool all = false;
    std::filesystem::path profilesFile; // --all: $SHARDSCOPE_HOME/clusters.ini unless given
    std::string programPath; // argv[0]: the followers --all starts run this program
    bool json = false; // --all: what was started as JSON (catch_up.h)
};
int followRun(const FollowRequest& request);

} // namespace shardscope::cluster
