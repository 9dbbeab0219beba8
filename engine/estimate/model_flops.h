#pragma once

// The floating-point work of training one token, from the model's shape: what MFU divides by the
// device's peak. Torch-free: the launcher, the estimator and each rank count the same way.
//
// The convention of PaLM (appendix B), Megatron-LM and torchtitan: only matrix multiplications,
// 2 FLOPs per multiply-add; the forward pass costs 2 x (weights of every matmul, the output head
// included, embeddings' lookups not) plus attention's scores and weighted sum, 4 x layers x
// (heads x head_dim) x sequence (the whole sequence: causal kernels skip half, the convention
// counts it all); the backward pass twice the forward. So 6N + 12 L H Q T per token. A weight
// that does not train (LoRA's frozen base) needs no weight gradient: its backward is one forward,
// not two. Activation checkpointing's second forward of the blocks is counted apart (hardware
// FLOPs), not in MFU's model FLOPs.

#include "engine/common/result.h"
#include "engine/recipe/recipe.h"

namespace shardscope::config {

struct FlopsPerToken {
    double forward = 0; // one forward pass
    double model = 0; // forward and backward: what MFU counts
    double recompute = 0; // activation checkpointing's extra forward of the blocks (0 without)
    double hardware() const { return model + recompute; }
};

// `activationCheckpointing`: the run recomputes its blocks in backward. Errors: the recipe's model
// does not resolve (config::resolveArchitecture's message).
Result<FlopsPerToken> flopsPerToken(const Recipe& recipe, bool activationCheckpointing);

} // namespace shardscope::config
