#pragma once

// The launcher: the supervisor of one machine's ranks, like torchrun's agent. It starts N worker
// processes with torchrun's environment, watches them, and when one fails stops the others and
// reports that rank as the root cause. Qt-free and torch-free: it is a plain POSIX process
// supervisor (fork/exec with argument vectors, never a shell).

#include "engine/common/result.h"

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace shardscope {

struct LaunchOptions {
    std::string workerPath; // the executable every rank runs
    std::vector<std::string> workerArgs; // its arguments (argv[1..])
    int numProcesses = 1; // ranks on this machine
    // A job over several machines runs one launcher per machine; machine 0's rank 0 serves the
    // rendezvous at masterAddr:masterPort, which the others must be told (no free-port pick).
    int numMachines = 1;
    int machineRank = 0;
    std::string masterAddr = "127.0.0.1";
    int masterPort = 0; // 0: pick a free port (single machine only)
    // Machines other than 0 wait this long for machine 0's rendezvous to answer before any rank
    // starts, saying so every few seconds (on stderr), then give up with an error.
    std::chrono::milliseconds rendezvousTimeout = std::chrono::minutes(5);
    // How long ranks get to exit after being told to stop (Ctrl-C, another rank's failure) before
    // they are killed.
    std::chrono::milliseconds stopGrace = std::chrono::seconds(3);
    // The same when the launcher got SIGTERM or SIGUSR1 and the ranks save a checkpoint first.
    std::chrono::milliseconds checkpointGrace = std::chrono::minutes(10);
    // NAME=VALUE pairs added to every rank's environment (after the inherited ones).
    std::vector<std::string> extraEnvironment;
    // When set, rank N's standard output and error go to <logDirectory>/rank<N>.log instead of
    // the launcher's own.
    std::string logDirectory;
    // When set, each rank gets a pipe for its JSON-lines events (its number in
    // SHARDSCOPE_EVENTS_FD), and every complete line arrives here, on the launcher's thread. A
    // rank that dies mid-line delivers what it wrote as a last, incomplete line.
    std::function<void(int rank, std::string_view line)> onEventLine;
    // Called about every 50 ms while ranks run (progress display).
    std::function<void()> onTick;
    // With event pipes: a rank that sends no event line for this long is taken as hung (a rank
    // stuck in a collective whose peer died, a deadlock) and fails the run. 0: never. Ranks beat
    // from a thread of their own (SHARDSCOPE_HEARTBEAT_MS is set to a quarter of it, at most 2 s),
    // so a long eval or checkpoint, or a wait in a collective, is not silence.
    std::chrono::milliseconds hangTimeout{0};
    // Before its first event a rank is still starting (loading libtorch, joining the rendezvous,
    // which has its own timeout): it is taken as hung only after max(hangTimeout, startupGrace).
    std::chrono::milliseconds startupGrace = std::chrono::seconds(60);
    // With hangTimeout: asked about every 50 ms whether the ranks' heartbeats show a collective
    // pending for longer than the timeout; returns the rank to blame (the one that never entered
    // it) and what it was doing. A rank that is silent is found without it.
    std::function<std::optional<std::pair<int, std::string>>(std::chrono::milliseconds timeout)> findStuckRank;
    // With hangTimeout: whether a rank (global rank) has said it is ending (its `done` or `error`
    // event): its heartbeat has stopped on purpose while the process tears down, so it gets
    // max(hangTimeout, startupGrace) like a starting rank.
    std::function<bool(int rank)> rankIsEnding;
    // With hangTimeout: called once when a rank is taken as hung, before any rank is stopped, so
    // that what the ranks can still say is gathered (their flight records; it may block for a few
    // seconds). `rankPids`: this machine's rank processes in rank order (none for a script run,
    // whose ranks torchrun starts), for their native stacks.
    std::function<void(const std::vector<pid_t>& rankPids)> onHang;
    // Asked while the run goes on: a reason to end it that no rank can see alone (a diverged
    // loss); the ranks are then stopped and the run fails with the reason (LaunchOutcome::abortReason).
    std::function<std::optional<std::string>()> findAbortReason;

    // A script run: the worker is itself a launcher that starts this machine's ranks (the real
    // `accelerate launch`, which runs torchrun), so it is started once, without torchrun's
    // variables (it sets them for its ranks) and without a bound rendezvous socket. torchrun hands
    // its ranks no inherited descriptors, so each rank's events come through a named pipe,
    // <eventPipeDirectory>/rank<N>.fifo (N the global rank; SHARDSCOPE_EVENT_PIPES names the
    // folder). Its output, with torchrun's "[<role><local rank>]:" prefixes (--tee 3), is split
    // into logDirectory's rank<N>.log and launcher.log. A rank is held to the heartbeat only after
    // its first event (a script without the reporter sends none). The launcher becomes the
    // subreaper of what it starts, so ranks orphaned by a killed torchrun are stopped too.
    bool launcherStartsRanks = false;
    // The engine's ranks have a run folder to save a checkpoint in: SIGTERM and SIGUSR1 to the
    // launcher then make them save one before they stop (else they stop as on Ctrl-C).
    bool ranksCanCheckpoint = false;
    std::string eventPipeDirectory;
};

// How often ranks beat under a hang timeout: a quarter of it, within 0.1 .. 2 s.
std::chrono::milliseconds heartbeatInterval(std::chrono::milliseconds hangTimeout);

struct RankExit {
    int rank = 0; // global rank
    pid_t pid = 0;
    int exitCode = 0; // when it exited normally
    int signal = 0; // when a signal ended it, else 0
    bool stoppedByLauncher = false; // it was ended by the launcher after another rank failed or on Ctrl-C
    bool stoppedByTorchrun = false; // a script run's: torchrun ended it so (stoppedByLauncher too)
    bool hung = false; // it sent no event for LaunchOptions::hangTimeout and was stopped for it
    std::string hungDetail; // why it was taken as hung, when not silence
    double seconds = 0; // from launch to exit
    double exitedAt = 0; // when the launcher saw it exit, seconds since the epoch

    bool failed() const { return signal != 0 || exitCode != 0; }
    // The conventional shell status: the exit code, or 128 + signal.
    int status() const { return signal != 0 ? 128 + signal : exitCode; }
    std::string describe() const;
};

// An error a rank reported in an error event: its own (a corrupt file, a full disk) or, with kind
// "peer", the consequence of another rank's end.
struct ReportedError {
    int rank = 0;
    double time = 0; // the event's time, seconds since the epoch
    std::string kind;
};

// The exit code of a run whose root cause hung (no heartbeat, or a collective it never entered):
// as timeout(1) exits, whatever the stopped rank exited with.
inline constexpr int kHungExitCode = 124;
// The exit code of a run stopped by SIGUSR1 (a time limit's warning) after every rank saved the
// same checkpoint: sysexits' EX_TEMPFAIL, "try again later". A SLURM batch script requeues its job
// on it. After SIGTERM the launcher exits 143 (128 + SIGTERM), as terminated: a job cancelled or
// preempted is not requeued by its own script (SLURM requeues a preempted one itself).
inline constexpr int kCheckpointedExitCode = 75;

struct LaunchOutcome {
    int exitCode = 0; // what the launcher exits with: 0, or the root-cause rank's status
    std::optional<int> rootCauseRank; // global rank of the first rank that failed on its own
    // A script run's rank launcher failed and neither a report of torchrun's nor an error event
    // named a rank: the first rank stands for it.
    bool rootCauseStandsIn = false;
    // A script run's rank launcher (accelerate launch, torchrun's agent) itself killed by a signal
    // from outside the run, not after a rank of it failed (it would have exited with torchrun's
    // report): no rank is the root cause, its ranks were stopped by the launcher, abortReason says
    // so and the launcher exits with its status.
    std::optional<RankExit> rankLauncherKilled;
    // Why the run failed with no rank the root cause: the launcher ended it while its ranks were
    // well (LaunchOptions::findAbortReason), or its rank launcher was killed.
    std::string abortReason;
    bool cancelled = false; // the launcher was asked to stop (SIGINT/SIGTERM/SIGHUP/SIGUSR1)
    // SIGTERM or SIGUSR1 asked the ranks to save a checkpoint before they stop (an engine run's):
    // the signal, else 0.
    int checkpointSignal = 0;
    std::string savedCheckpoint; // and every rank of this machine saved this one

    int masterPort = 0;
    std::vector<RankExit> ranks; // this machine's ranks, in rank order

    std::string reason; // a sentence on what went wrong beyond the exits (e.g. steps not finished)
    void addReason(const std::string& sentence) { reason += (reason.empty() ? "" : "; ") + sentence; }
    // A torchrun-style summary, root cause first; empty when every rank succeeded.
    std::string failureSummary() const;
    // After a failure: the root cause is the rank whose own error came first, by the time of its
    // error event (peer-loss errors are consequences and never the cause) or, for a rank that
    // died without one (a signal), the time it exited; not simply the first rank to exit. A hang
    // the launcher detected keeps its rank. The exit code follows the root cause.
    // `leftUnfinished(rank)`: whether a rank that exited 0 had not reported finishing its steps; such
    // a rank left the others as much as a crash does, and counts from its exit too.
    void blameFirstOwnError(const std::vector<ReportedError>& errors, const std::function<bool(int rank)>& leftUnfinished = {});
};

// Blocks the signals the launcher handles itself (SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGCHLD) in the calling
// thread, so that threads started afterwards (the run store's writer) inherit the block and a
// Ctrl-C is never delivered to one of them, which would kill the launcher outright. Call it before
// starting any thread; runLaunch blocks them too.
void blockLauncherSignals();

// Starts the ranks and supervises them until all have exited. Errors are returned for what
// prevents the launch itself (worker not executable, port in use, fork failure).
Result<LaunchOutcome> runLaunch(const LaunchOptions& options);

// The name of the launcher's own log inside LaunchOptions::logDirectory (a script run's
// `accelerate launch` output that belongs to no rank).
inline constexpr const char* kLauncherLogName = "launcher.log";

} // namespace shardscope
