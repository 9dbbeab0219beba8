#pragma once

// A recipe's token data (data.type tokens) opened as the run will train on it: the tokenizer checked
// against the model's vocab_size, the stream of data.path (token files mapped, corpora tokenized),
// every id checked to fit, and the cut into model.block_size sequences with the eval split. The
// ranks (data::makeTokenBlocks) and the recipe editor's preview (data_preview.h) both start here.
// Torch-free; it reads and tokenizes, so it is never run on the GUI thread.

#include "engine/common/result.h"
#include "engine/recipe/recipe.h"

#include <cstdint>
#include <memory>

namespace shardscope::text {
class TokenStream;
}

namespace shardscope::config {

struct TokenData {
    std::shared_ptr<const text::TokenStream> stream;
    std::shared_ptr<const text::Tokenizer> tokenizer; // null when the recipe names none
    std::int64_t sequenceLength = 0; // model.block_size
    // Sequences [0, trainSequences) train and the next evalSequences evaluate (run_clm's
    // group_texts: the remainder of the stream is dropped).
    std::int64_t trainSequences = 0;
    std::int64_t evalSequences = 0;
};

// `threads`: for tokenizing corpora (0: every core). Errors name the file (and line, for a
// corpus), and say how to fix it.
Result<TokenData> openTokenData(const Recipe& recipe, int threads);

} // namespace shardscope::config
