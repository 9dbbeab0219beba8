#pragma once

// Activation checkpointing of one unit: torch.utils.checkpoint's reentrant variant, which
// FSDP's `fsdp_activation_checkpointing` applies to every wrapped unit. The unit runs without
// keeping its activations; in backward it runs again, with gradients on and with the random
// number generators and autocast state of the first run, and its gradients come from
// back-propagating through that recomputation (params' gradients accumulate as usual).

#include "engine/models/forward_hooks.h"

namespace shardscope::parallel {

// body(input), checkpointed. Outside grad mode this is just body(input).
at::Tensor checkpointed(const at::Tensor& input, const models::ForwardHooks::Body& body);

} // namespace shardscope::parallel
