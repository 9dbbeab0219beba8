#pragma once

// Text from a trained causal language model: the continuation of a prompt, one token at a time,
// greedy (as transformers' generate with do_sample=False) or sampled with a temperature and a
// top-k cut. Used by `shardscope-worker generate` (the workbench's "Try the model" and `shardscope
// runs generate`) on a run's export. The whole context is run again for each new token (no KV
// cache): the models trained here are small, and the numbers are then exactly the training
// forward's.

#include "engine/models/models.h"
#include "engine/recipe/recipe.h"
#include "engine/text/tokenizer.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope::train {

struct GenerationOptions {
    std::int64_t maxNewTokens = 32;
    double temperature = 0; // 0: greedy (the most likely token each time)
    std::int64_t topK = 0; // sampling: only the k most likely tokens (0: all)
    std::uint64_t seed = 0; // sampling: the same seed gives the same text
    std::int64_t contextLength = 0; // the model's: older tokens are dropped (0: no limit)
    // Run maxNewTokens forwards even past the end-of-sequence token (what follows it is dropped):
    // ranks of a sharded model gather its units together, so each must run as many forwards.
    bool runPastEos = false;
};

struct Generation {
    std::vector<std::int32_t> promptIds; // as the tokenizer encoded the prompt (special tokens added)
    std::vector<std::int32_t> newIds; // the continuation, the end-of-sequence token included when reached
    std::string text; // the continuation, decoded without special tokens
    bool endedAtEos = false; // false: maxNewTokens were generated
};

// `tokenizer` null: the model reads bytes (the GPT of `data: {type: text}`); ids are bytes and
// the text those bytes (not necessarily valid UTF-8). The model is put in eval mode.
Generation generate(models::TrainableModel& model, const text::Tokenizer* tokenizer, std::string_view prompt,
                    const GenerationOptions& options);

// `shardscope-worker generate`: the recipe's model with the weights of the Hugging Face folder
// `weightsDir` (a run's export/), the tokenizer of `tokenizerDir` (empty: bytes), the context cut
// at the recipe's block_size. One JSON object: prompt_ids, ids, text (invalid UTF-8 replaced),
// ended_at_eos. Throws with the reason (no weights, a tokenizer that does not load, ...).
std::string generateJson(const config::Recipe& recipe, const std::string& weightsDir, const std::string& tokenizerDir,
                         std::string_view prompt, GenerationOptions options);

} // namespace shardscope::train
