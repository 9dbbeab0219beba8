#pragma once

// The metric keys a `step` event becomes, one row each (see ../shared/DESIGN.md, "Event
// fields"): the event's field names, nested objects joined with a dot. The launcher writes these;
// the comparison and the CLI read them back by the same names.

namespace shardscope::storage::keys {

inline constexpr const char* kLoss = "loss";
inline constexpr const char* kLocalLoss = "local_loss";
inline constexpr const char* kLr = "lr";
inline constexpr const char* kGradNorm = "grad_norm";
inline constexpr const char* kLossScale = "loss_scale";
inline constexpr const char* kSkipped = "skipped"; // 1 when the optimizer step was skipped
inline constexpr const char* kTokens = "tokens";
inline constexpr const char* kSamples = "samples";
inline constexpr const char* kStepTime = "step_time"; // seconds
// The parts of step_time: waiting for batches, blocked in collectives, the optimizer step, and
// the rest, compute (what tells a straggler from the ranks waiting for it).
inline constexpr const char* kDataTime = "data_time";
inline constexpr const char* kWaitTime = "wait_time";
inline constexpr const char* kOptimizerTime = "optimizer_time";
inline constexpr const char* kComputeTime = "compute_time";
// Written when the launcher flags a rank as a straggler: its compute time over the others', at the
// step that ended the window.
inline constexpr const char* kStraggler = "straggler";
// Written when the launcher reports a loss spike: the loss of that step (rank 0).
inline constexpr const char* kLossSpike = "loss_spike";
inline constexpr const char* kLossSpikeEpoch = "loss_spike.epoch"; // where its data was: the epoch
inline constexpr const char* kLossSpikeBatch = "loss_spike.batch"; // and the batch within it (StepEvent::batch)
inline constexpr const char* kTokensPerS = "tokens_per_s"; // all ranks
inline constexpr const char* kFlops = "flops"; // model FLOP/s of the rank (steps that know their model's FLOPs)
inline constexpr const char* kMfu = "mfu"; // flops over the device's peak, in [0, 1] (where a peak is known)
inline constexpr const char* kMemPeakAllocated = "mem.peak_allocated"; // bytes
inline constexpr const char* kMemRss = "mem.rss"; // bytes
// What the rank held at the end of each phase of the step (CUDA: allocated; CPU: resident set).
inline constexpr const char* kMemAfterForward = "mem.after_forward"; // bytes
inline constexpr const char* kMemAfterBackward = "mem.after_backward"; // bytes
inline constexpr const char* kMemAfterOptimizer = "mem.after_optimizer"; // bytes
// The model states (engine ranks; protocol::MemoryStats): what the layout keeps, and the peak in
// the step with what is held for a moment (gathered units, unsharded gradients, DDP's buckets).
inline constexpr const char* kMemParams = "mem.params"; // bytes
inline constexpr const char* kMemGrads = "mem.grads"; // bytes
inline constexpr const char* kMemOptimizer = "mem.optimizer"; // bytes
inline constexpr const char* kMemPeakParams = "mem.peak_params"; // bytes
inline constexpr const char* kMemPeakGrads = "mem.peak_grads"; // bytes
// Other mem.* and comm.* keys follow the same pattern: mem.activations_peak, mem.allocated, mem.reserved, comm.all_reduce, comm.all_gather,
// comm.reduce_scatter, comm.broadcast.

} // namespace shardscope::storage::keys
