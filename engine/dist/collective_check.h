#pragma once

// A self-test of the c10d path: every rank runs all-reduce, all-gather, reduce-scatter and
// broadcast on tensors whose correct result it computes on its own, for several dtypes, and
// reports each mismatch. `shardscope-worker check-collectives` runs it; the multi-process tests
// and scripts/gpu-check.sh (NCCL) use that.

#include "engine/common/dist_env.h"
#include "engine/common/backend_kind.h"

#include <cstdint>
#include <string>
#include <vector>

namespace shardscope::dist {

struct CollectiveCheckOptions {
    BackendKind backend = BackendKind::Gloo;
    std::int64_t numel = 1024; // elements per rank in each collective
    // Fault injection for tests: this rank perturbs its inputs, so every check must fail.
    int corruptRank = -1;
};

struct CollectiveCheckReport {
    std::string device; // where the tensors lived, e.g. "cpu" or "cuda:0"
    int checksRun = 0;
    std::vector<std::string> failures; // one line per wrong result: collective, dtype, first bad element
};

// Connects (throws std::runtime_error if the rendezvous or the backend fails), runs the checks,
// and returns what was found.
CollectiveCheckReport runCollectiveChecks(const DistEnv& env, const CollectiveCheckOptions& options);

} // namespace shardscope::dist
