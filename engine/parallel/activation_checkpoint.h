#pragma once

// Activation checkpointing of one unit, as `fsdp_activation_checkpointing` asks for every wrapped
// unit. Accelerate applies PyTorch's non-reentrant checkpoint wrapper (saved-tensor hooks); this
// is the reentrant variant (torch.utils.checkpoint(use_reentrant=True)), which C++ autograd
// supports directly: the same values, recomputed the same way. The unit runs without
// keeping its activations; in backward it runs again, with gradients on and with the random
// number generators and autocast state of the first run, and its gradients come from
// back-propagating through that recomputation (params' gradients accumulate as usual).

#include "engine/models/forward_hooks.h"

namespace shardscope::parallel {

// body(input), checkpointed. Outside grad mode this is just body(input).
at::Tensor checkpointed(const at::Tensor& input, const models::ForwardHooks::Body& body);

} // namespace shardscope::parallel
