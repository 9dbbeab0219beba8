#pragma once

// What a recipe's token data (data.type tokens) will be, before launch: the stream's size, how it
// packs into sequences and splits, and the first batch rank 0 will train on, decoded. Torch-free
// (the sampler's order is torchRandperm's), for the recipe editor; it reads and tokenizes the
// data, so callers run it off the GUI thread.

#include "engine/common/result.h"
#include "engine/recipe/recipe.h"

#include <cstdint>
#include <string>
#include <vector>

namespace shardscope::config {

struct DataPreview {
    std::int64_t tokens = 0;
    std::int64_t documents = 0; // 0 when the token files do not say
    std::int64_t sequenceLength = 0;
    std::int64_t trainSequences = 0;
    std::int64_t evalSequences = 0;
    std::int64_t batchesPerEpoch = 0; // per rank
    std::string tokenizer; // the folder; empty when none is named
    bool shuffled = true; // false: the sample is the stream's first sequences (order not reproducible here)
    std::vector<std::vector<std::int64_t>> sample; // rank 0's first batch (ids)
    std::vector<std::string> decoded; // each sample decoded, when there is a tokenizer
};

// `recipe` as the launcher would load it (model.vocab_size resolved for Hugging Face families);
// `worldSize`: the ranks the run will have. Errors are the ranks' (and checkRecipeInputs').
Result<DataPreview> previewTokenData(const Recipe& recipe, int worldSize);

// A few lines for the recipe editor: the statistics, then the decoded samples.
std::string formatDataPreview(const DataPreview& preview);

} // namespace shardscope::config
