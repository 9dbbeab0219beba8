#pragma once

// What the launcher does with the ranks' event lines: decodes them, appends the valid ones to
// runs/<id>/events.jsonl, keeps the latest state of the run, and draws a progress line (step/total,
// loss, tokens/s, ETA). A malformed or truncated line is reported and skipped, never fatal.

#include "app/launcher/launcher.h"
#include "app/launcher/loss_spikes.h"
#include "app/launcher/stragglers.h"
#include "engine/protocol/events.h"

#include <chrono>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope {

class RunMonitor {
public:
    // `eventsFile` empty: events are not written. `progress` null: no progress display.
    // `interactive`: redraw one line in place (a terminal) instead of printing a line now and then.
    RunMonitor(const std::string& eventsFile, std::int64_t totalSteps, std::FILE* progress, bool interactive);
    ~RunMonitor();
    RunMonitor(const RunMonitor&) = delete;
    RunMonitor& operator=(const RunMonitor&) = delete;

    void onEventLine(int rank, std::string_view line);
    // Watch the ranks' compute-only times for stragglers (stragglers.h): a flag is printed,
    // written to events.jsonl as a `straggler` event of the slow rank and passed to onEvent.
    void detectStragglers(int ranks, StragglerOptions options);
    // Watch rank 0's loss for spikes (loss_spikes.h), reported the same way (a `loss_spike` event).
    void detectLossSpikes(LossSpikeOptions options);
    void tick();
    // Writes what events.jsonl still lacks, trying for up to `patience` while it cannot.
    void finish(std::chrono::milliseconds patience = std::chrono::seconds(10));
    // Empty when events.jsonl got every line in time; else what went wrong, for the run's record.
    std::string eventFileTrouble() const;

    // Every decoded event, for further consumers (the run store).
    std::function<void(const protocol::Event&)> onEvent;

    int malformedLines() const { return m_malformed; }
    // Error events as they came (rank, the event's time, kind), for LaunchOutcome::blameFirstOwnError.
    const std::vector<ReportedError>& reportedErrors() const { return m_reported; }
    // Their messages, one for each of reportedErrors().
    const std::vector<std::string>& reportedErrorMessages() const { return m_reportedMessages; }
    // Whether rank reported its `done` or an `error` event (it is on its way out).
    bool isEnding(int rank) const;
    // A run whose loss has been non-finite for `steps` steps in a row (rank 0's events; fp16's
    // skipped steps do not count, the scaler handles them): why it should stop, naming the first
    // such step and, when a rank said so, where the non-finite values began. None otherwise, or
    // with `steps` 0.
    std::optional<std::string> divergence(int steps) const;
    // The process id rank said hello with (a script rank's own, which its launcher, torchrun, knows).
    std::optional<std::int64_t> pidOf(int rank) const;
    // When rank reported its `done` event (the event's time, seconds since the epoch): a script
    // rank's process ends right after it, unseen by the launcher (torchrun starts it).
    std::optional<double> doneAt(int rank) const;
    // The status of rank's `done` event ("completed", "checkpointed", ...); empty: none yet.
    std::string doneStatusOf(int rank) const;
    // The ranks that reported a `done` event with status "completed".
    std::set<int> completedRanks() const { return ranksDone("completed"); }
    // The ranks that reported a `done` event with this status ("checkpointed", ...).
    std::set<int> ranksDone(const std::string& status) const;
    // The folder of the last training-state checkpoint rank 0 reported (empty: none).
    const std::string& lastCheckpoint() const { return m_lastCheckpoint; }
    // Whether rank sent any valid event (a script without Shardscope's reporter sends none).
    bool heardFrom(int rank) const { return m_heard.count(rank) > 0; }
    // The last step each rank reported (0 when none).
    std::int64_t lastStepOf(int rank) const;
    // From the ranks' heartbeats: a deadlock (every rank has waited in a collective for longer
    // than `timeout`) and the rank to blame (the one on the earliest collective), or a rank in no
    // collective while another has waited past the timeout: idle, or busy far longer than its
    // usual step (a loop that never reaches the collective). A rank that evaluates, checkpoints,
    // or computes a step of its usual length is never blamed. For LaunchOptions::findStuckRank.
    std::optional<std::pair<int, std::string>> stuckRank(std::chrono::milliseconds timeout) const;
    std::int64_t stepsDone() const { return m_lastStep ? m_lastStep->step : 0; }
    const std::optional<protocol::StepEvent>& lastStep() const { return m_lastStep; }
    const std::vector<std::string>& errorMessages() const { return m_errors; }
    std::string progressLine() const;

private:
    void reportStraggler(const protocol::Event& flag); // printed, then reportFinding
    void reportLossSpike(const protocol::Event& spike);
    void reportFinding(const protocol::Event& finding); // to events.jsonl and onEvent
    void writeEvents();
    void noteWriteFailure(int error);
    static constexpr std::size_t kMaxUnwrittenBytes = 256u << 20;

    std::string m_eventsPath;
    int m_eventsFd = -1;
    std::string m_unwritten; // complete lines not yet in events.jsonl
    std::int64_t m_droppedLines = 0;
    std::optional<std::chrono::steady_clock::time_point> m_writeFailingSince;
    std::chrono::steady_clock::time_point m_lastWriteAttempt;
    int m_lastWriteError = 0;
    std::string m_eventFileTrouble;
    std::int64_t m_totalSteps;
    std::FILE* m_progress;
    bool m_interactive;
    std::chrono::steady_clock::time_point m_start;
    std::chrono::steady_clock::time_point m_lastPrint;
    std::int64_t m_lastPrintedStep = -1;
    std::optional<protocol::StepEvent> m_lastStep;
    std::vector<std::string> m_errors;
    std::vector<ReportedError> m_reported;
    std::vector<std::string> m_reportedMessages;
    struct Beat {
        protocol::HeartbeatEvent event;
        std::chrono::steady_clock::time_point at;
    };
    std::map<int, Beat> m_beats;
    // Per rank, its recent beats' (time, CPU seconds): whether a rank is idle or computing.
    std::map<int, std::deque<std::pair<std::chrono::steady_clock::time_point, double>>> m_cpuHistory;
    // The CPU cores `rank` used over the last `window` (none: not beating for that long yet).
    std::optional<double> cpuUse(int rank, std::chrono::duration<double> window) const;
    struct Done {
        std::string status;
        double time = 0; // the event's, seconds since the epoch
    };
    std::map<int, Done> m_done; // per rank, its `done` event
    std::map<int, std::int64_t> m_pids;
    // Rank 0's non-finite losses in a row (the first of them, and how many), and the last thing a
    // rank said of non-finite values (the engine's probe names the module where they began).
    std::int64_t m_nonfiniteFrom = 0;
    int m_nonfiniteSteps = 0;
    double m_nonfiniteLoss = 0;
    std::string m_nonfiniteNote;
    std::string m_lastCheckpoint;
    std::map<int, std::int64_t> m_lastSteps;
    // Per rank, when its last step event came and its recent step times (s): how long it has been
    // in its current step against its usual, for a busy rank that never reaches a collective.
    struct StepClock {
        std::chrono::steady_clock::time_point lastStepAt;
        std::deque<double> recentStepTimes;
    };
    std::map<int, StepClock> m_stepClocks;
    // Whether `rank`, busy in no collective, has been in its step long past its usual step time
    // (the seconds it has); none while that could still be work.
    std::optional<double> stuckInStep(int rank, double limit) const;
    std::set<int> m_heard;
    std::optional<StragglerDetector> m_stragglers;
    std::optional<LossSpikeDetector> m_lossSpikes;
    int m_malformed = 0;
};

} // namespace shardscope
