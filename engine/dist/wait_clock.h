#pragma once

// The time this process spends blocked waiting for collectives: every wait of the engine goes
// through waitFor, which adds the blocked time to one process-wide counter. The trainer takes the
// difference over a step to tell compute from waiting (straggler detection: DDP's all-reduce
// makes step times equal across ranks, so a slow rank shows only in the time it did not wait).
// With Gloo a wait blocks until the collective is done; with NCCL it only orders the streams, so
// on a GPU the waits measured here are the host's, not the device's.

#include <torch/csrc/distributed/c10d/Work.hpp>

namespace shardscope::dist {

void waitFor(const c10::intrusive_ptr<c10d::Work>& work);

// Seconds this process has spent in waitFor since it started.
double secondsWaited();

} // namespace shardscope::dist
