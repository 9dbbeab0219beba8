#pragma once

// The optimizer's state as a FULL_STATE_DICT: every state tensor of every trainable parameter, in
// full and by the parameter's name, whatever the world size and sharding, so that a checkpoint
// written on N ranks resumes on M (checkpoint/optimizer.safetensors). Keys:
//   AdamW  "exp_avg/<name>", "exp_avg_sq/<name>", and "step" (one int64: every parameter's count)
//   SGD    "momentum_buffer/<name>" (with momentum; plain SGD has no state)
// Empty when the optimizer has taken no step yet.

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace torch::optim {
class Optimizer;
}

namespace shardscope::train {

class Accelerator;

// A collective when the model is sharded: every rank calls it; rank 0 gets the whole state, the
// others an empty list.
std::vector<std::pair<std::string, at::Tensor>> fullOptimizerState(Accelerator& acc, torch::optim::Optimizer& optimizer);

// Sets this rank's part of `state` (from fullOptimizerState, possibly at another world size) as
// the optimizer's state. Throws naming a missing or misshaped tensor.
void loadFullOptimizerState(Accelerator& acc, torch::optim::Optimizer& optimizer, const std::map<std::string, at::Tensor>& state);

} // namespace shardscope::train
