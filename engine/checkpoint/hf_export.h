#pragma once

// save_model for the ecosystem: the unwrapped (gathered) weights as safetensors with Hugging
// Face's naming — model.safetensors, or model-0000k-of-0000n.safetensors plus
// model.safetensors.index.json above max_shard_size — in the chosen dtype, and for the GPT model
// a config.json in GPT-2's layout and key names, so GPT2LMHeadModel.from_pretrained loads it.
// And the way back: start a GPT from such a folder.

#include "engine/common/result.h"
#include "engine/recipe/recipe.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace shardscope::checkpoint {

struct ExportOptions {
    c10::ScalarType dtype = c10::ScalarType::Float;
    std::int64_t maxShardBytes = 10LL * 1000 * 1000 * 1000; // Accelerate's default "10GB"
};

// Writes into `dir` (created); returns the bytes written. Throws on I/O errors.
std::int64_t exportModel(const std::string& dir, const std::vector<std::pair<std::string, at::Tensor>>& parameters,
                         const config::ModelRecipe& model, const ExportOptions& options);

// GPT-2 names and layouts (Conv1D weights are [in, out]) from ours, and back.
std::vector<std::pair<std::string, at::Tensor>> toGpt2(const std::vector<std::pair<std::string, at::Tensor>>& ours);
// Reads config.json and the safetensors (single or sharded) of a GPT-2 folder, checks them
// against the recipe's model and returns our parameters by our names.
Result<std::map<std::string, at::Tensor>> loadGpt2(const std::string& dir, const config::ModelRecipe& model);

} // namespace shardscope::checkpoint
