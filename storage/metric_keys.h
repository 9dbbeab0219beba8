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
inline constexpr const char* kTokensPerS = "tokens_per_s"; // all ranks
inline constexpr const char* kMemPeakAllocated = "mem.peak_allocated"; // bytes
inline constexpr const char* kMemRss = "mem.rss"; // bytes
// Other mem.* and comm.* keys follow the same pattern: mem.params, mem.grads, mem.optimizer,
// mem.activations_peak, mem.allocated, mem.reserved, comm.all_reduce, comm.all_gather,
// comm.reduce_scatter, comm.broadcast.

} // namespace shardscope::storage::keys
