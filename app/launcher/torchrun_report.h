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

struct TorchrunReport {
    std::vector<TorchrunFailure> failures; // the root cause among them; empty: no report found
    // The list of the other failures was read too. A rank a whole report leaves out exited 0:
    // torchrun lists every rank that did not, those it stopped itself after the first failure
    // too (exit code -15).
    bool whole = false;
};

// The last report in `output`. One whose beginning is cut off (a long traceback before it) still
// gives its root cause, without the other failures.
TorchrunReport parseTorchrunReport(std::string_view output);

} // namespace shardscope
