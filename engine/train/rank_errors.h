#pragma once

// How a rank reports what ended it. An error is either the rank's own (a corrupt checkpoint, a
// full disk, a bad option) or a consequence of another rank's end: a peer's closed connection,
// which Gloo raises as gloo::IoException (sometimes on one of its own threads, where it would
// call std::terminate) and c10d as DistNetworkError. The launcher blames the rank whose own error
// came first, so the kind matters; the message is torch's without its C++ backtrace.

#include "engine/train/event_sink.h"

#include <exception>
#include <stdexcept>
#include <string>

namespace shardscope::train {

using protocol::kPeerLostKind; // the error event kind for a lost peer

struct RankError {
    std::string kind; // "peer", or "exception" for the rank's own error
    std::string message; // without C++ backtraces
};
RankError describeError(const std::exception& e);

// An allocation that failed: CUDA's caching allocator (c10::OutOfMemoryError) or the CPU's
// (a c10::Error "can't allocate memory"), or std::bad_alloc. Its error event's kind is "oom".
bool isOutOfMemory(const std::exception& e);
// What the trainer throws instead, with the phase, the sizes and the estimate (trainer.cpp).
struct OutOfMemory : std::runtime_error {
    using std::runtime_error::runtime_error;
};
inline constexpr const char* kOutOfMemoryKind = "oom";

// Exit code of a rank that ended because a peer went away (see app/worker/main.cpp).
inline constexpr int kPeerLostExitCode = 5;

// From here on an exception that escapes any thread (Gloo's included) ends the rank like an
// ordinary error: an error event on `sink` (unless the sink is busy on another thread), a line on
// stderr, and exit code 4, or 5 for a lost peer. Never an abort with a core and a backtrace.
void installTerminateHandler(EventSink& sink);

} // namespace shardscope::train
