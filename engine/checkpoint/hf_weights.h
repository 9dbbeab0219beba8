#pragma once

// The weights of a Hugging Face model folder: model.safetensors, or the shards that
// model.safetensors.index.json names, checked against the parameters a model expects before
// anything trains. Every refusal names the folder, the file or the key, and the fix.

#include "engine/common/result.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace shardscope::checkpoint {

// Every tensor of the folder's safetensors, by its key (as stored: any dtype).
Result<std::map<std::string, at::Tensor>> readHfTensors(const std::string& dir);

struct ExpectedTensor {
    std::string name;
    std::vector<std::int64_t> shape;
};

struct HfWeights {
    std::map<std::string, at::Tensor> tensors; // the expected ones, in fp32
    std::vector<std::string> unused; // keys of the folder no expected tensor takes (a log line, not an error)
};

// The expected tensors from `dir`: a missing key or a shape other than the expected one is an
// error. `ignorable` keys (lm_head.weight of a tied model, old checkpoints' rotary_emb.inv_freq)
// are dropped without being reported as unused.
Result<HfWeights> loadHfWeights(const std::string& dir, const std::vector<ExpectedTensor>& expected,
                                const std::vector<std::string>& ignorableSuffixes = {});

} // namespace shardscope::checkpoint
