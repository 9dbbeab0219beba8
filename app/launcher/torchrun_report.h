#pragma once

// torchrun's own account of a failed launch: the ChildFailedError report it prints on its stderr
// (under `accelerate launch` too) when ranks fail. Only torchrun saw its ranks exit, so a script
// run learns from this report which rank failed first and how (exit code or signal, pid); the
// rank launcher's own exit code (1) says neither.

#include <sys/types.h>

#include <string_view>
#include <vector>

namespace shardscope {

struct TorchrunFailure {
    int rank = 0; // global rank
    int localRank = 0;
    int exitCode = 0; // as torchrun gives it: negative for a signal (-6: SIGABRT)
    pid_t pid = 0;
    bool rootCause = false; // torchrun's "first observed failure"
};

// The failures listed by the last report in `output`, or none when it holds no whole report.
// A rank the report leaves out exited 0: torchrun lists every rank that did not, those it stopped
// itself after the first failure too (exit code -15).
std::vector<TorchrunFailure> parseTorchrunFailures(std::string_view output);

} // namespace shardscope
