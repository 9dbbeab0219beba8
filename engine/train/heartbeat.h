#pragma once

// A rank's heartbeat: a thread of its own that sends a `heartbeat` event every interval, whatever
// the training thread does (a long eval or checkpoint, a wait in a collective), saying the step,
// the phase and the collective the rank waits in, if any. The launcher takes a rank as hung when
// it hears nothing at all (the process was stopped, or is wedged beyond its threads), and when a
// collective stays pending past the timeout it names the rank that is not waiting in it. The same
// thread answers requests for the rank's flight record (engine/protocol/flight_record.h).

#include "engine/train/event_sink.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <thread>

namespace shardscope::train {

// Setup, then per step Data / Forward / Backward / Optimizer, between steps Eval / Checkpoint.
enum class Phase { Setup, Train, Data, Forward, Backward, Optimizer, Eval, Checkpoint, Finish };
const char* phaseName(Phase phase);

// What the training thread is doing; cheap (two relaxed atomic stores), called at phase changes.
void setProgress(std::int64_t stepsDone, Phase phase);

class Heartbeat {
public:
    // The interval comes from SHARDSCOPE_HEARTBEAT_MS (the launcher derives it from its hang
    // timeout), else `fallback`. `flightDir` empty: no flight records are answered.
    Heartbeat(EventSink& sink, int rank, std::filesystem::path flightDir,
              std::chrono::milliseconds fallback = std::chrono::seconds(2));
    ~Heartbeat();
    Heartbeat(const Heartbeat&) = delete;
    Heartbeat& operator=(const Heartbeat&) = delete;

private:
    void run();
    void answerFlightRequest();
    EventSink& m_sink;
    int m_rank;
    std::filesystem::path m_flightDir;
    std::int64_t m_answered = 0; // the last flight request answered
    std::chrono::milliseconds m_interval;
    std::mutex m_mutex;
    std::condition_variable m_wake;
    bool m_stop = false;
    std::thread m_thread;
};

inline constexpr const char* kHeartbeatMsVariable = "SHARDSCOPE_HEARTBEAT_MS";

} // namespace shardscope::train
