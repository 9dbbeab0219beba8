#include "engine/train/rank_errors.h"

#include "engine/common/peer_failure.h"

#include <c10/util/Exception.h>

#include <unistd.h>

#include <cstdio>
#include <new>
#include <string_view>

namespace shardscope::train {

namespace {

EventSink* g_sink = nullptr;

bool mentionsLostPeer(const std::string& text)
{
    for (const char* needle : {"Connection closed by peer", "Connection reset by peer", "Broken pipe", "remote worker crashing",
                               "Socket Timeout", "connection was closed"})
        if (text.find(needle) != std::string::npos)
            return true;
    return false;
}

[[noreturn]] void onTerminate()
{
    RankError error{"exception", "std::terminate called without an active exception"};
    if (std::exception_ptr current = std::current_exception()) {
        try {
            std::rethrow_exception(current);
        } catch (const std::exception& e) {
            error = describeError(e);
        } catch (...) {
            error.message = "an exception of an unknown type escaped";
        }
    }
    if (g_sink)
        (void)g_sink->tryEmit(protocol::ErrorEvent{error.kind, error.message});
    const std::string line = "shardscope-worker: error: " + error.message + "\n";
    ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
    (void)ignored;
    _exit(error.kind == kPeerLostKind ? kPeerLostExitCode : 4);
}

} // namespace

RankError describeError(const std::exception& e)
{
    RankError out;
    if (const auto* c10 = dynamic_cast<const c10::Error*>(&e))
        out.message = c10->what_without_backtrace();
    else
        out.message = e.what();
    // gloo::IoException carries no type we can name here (Gloo's headers are the backend's
    // business): its text says what happened.
    if (dynamic_cast<const PeerFailure*>(&e)) {
        out.kind = kPeerLostKind; // its message says which failure of another rank it follows from
        return out;
    }
    const bool network = dynamic_cast<const c10::DistNetworkError*>(&e) != nullptr;
    out.kind = network || mentionsLostPeer(out.message) ? kPeerLostKind : isOutOfMemory(e) ? kOutOfMemoryKind : "exception";
    if (out.kind == kPeerLostKind)
        out.message = "lost the connection to another rank (" + out.message
                      + "); that rank's own error, in its log, is the cause";
    return out;
}

bool isOutOfMemory(const std::exception& e)
{
    if (dynamic_cast<const OutOfMemory*>(&e) || dynamic_cast<const c10::OutOfMemoryError*>(&e)
        || dynamic_cast<const std::bad_alloc*>(&e))
        return true;
    const auto* c10 = dynamic_cast<const c10::Error*>(&e);
    return c10 && std::string_view(c10->what_without_backtrace()).find("can't allocate memory") != std::string_view::npos;
}

void installTerminateHandler(EventSink& sink)
{
    g_sink = &sink;
    std::set_terminate(onTerminate);
}

} // namespace shardscope::train
