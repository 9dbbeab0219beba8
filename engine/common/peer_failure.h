#pragma once

// An error a rank raises because another rank failed (that rank's own error names the cause), such
// as a checkpoint that could not be saved because another rank could not write its part. Its
// error event's kind is "peer" (protocol::kPeerLostKind), so the launcher never takes it for the
// run's root cause, whichever error arrives first.

#include <stdexcept>

namespace shardscope {

struct PeerFailure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

} // namespace shardscope
