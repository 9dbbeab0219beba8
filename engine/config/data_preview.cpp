#include "engine/config/data_preview.h"

#include "engine/common/sample_order.h"
#include "engine/text/token_stream.h"
#include "engine/text/tokenizer.h"

#include <numeric>
#include <optional>

namespace shardscope::config {

Result<DataPreview> previewTokenData(const Recipe& recipe, int worldSize)
{
    if (recipe.data.type != "tokens")
        return makeError("the data preview shows data.type tokens; this recipe's data.type is " + recipe.data.type,
                         ErrorKind::BadValue);
    if (auto inputs = checkRecipeInputs(recipe); !inputs)
        return inputs.error();
    text::TokenSourceOptions options;
    options.paths = recipe.data.paths;
    options.tokenizer = tokenizerFolder(recipe);
    options.field = recipe.data.field;
    options.tokenDtype = text::parseTokenDtype(recipe.data.tokenDtype);
    auto stream = text::TokenStream::open(options);
    if (!stream)
        return stream.error();

    DataPreview p;
    p.tokens = stream->size();
    for (const auto& part : stream->parts())
        p.documents += part.info().documents;
    p.sequenceLength = recipe.model.blockSize;
    p.tokenizer = options.tokenizer;
    // As data::makeTokenBlocks: the remainder dropped, the last eval_fraction for eval.
    const std::int64_t n = p.tokens / p.sequenceLength;
    if (n < 1)
        return makeError("the data holds " + std::to_string(p.tokens) + " tokens, fewer than one sequence of model.block_size "
                             + std::to_string(p.sequenceLength) + "; add data or lower model.block_size",
                         ErrorKind::BadValue);
    p.evalSequences = evalSplitCount(n, recipe.data.evalFraction);
    p.trainSequences = n - p.evalSequences;
    const bool dropLast = !recipe.data.evenBatches;
    p.batchesPerEpoch = distributedSamplesPerRank(p.trainSequences, worldSize, dropLast) / recipe.perDeviceBatchSize;

    std::optional<std::vector<std::int64_t>> order;
    if (recipe.data.shuffle)
        order = torchRandperm(p.trainSequences, recipe.seed);
    p.shuffled = recipe.data.shuffle && order;
    if (!order) {
        order.emplace(static_cast<std::size_t>(p.trainSequences));
        std::iota(order->begin(), order->end(), 0);
    }
    const auto mine = distributedShare(std::move(*order), 0, worldSize, dropLast);
    std::optional<text::Tokenizer> tokenizer;
    if (!p.tokenizer.empty())
        if (auto loaded = text::Tokenizer::load(p.tokenizer))
            tokenizer.emplace(std::move(*loaded));
    for (std::size_t i = 0; i < mine.size() && static_cast<std::int64_t>(i) < recipe.perDeviceBatchSize; ++i) {
        std::vector<std::int64_t> ids(static_cast<std::size_t>(p.sequenceLength));
        stream->read(mine[i] * p.sequenceLength, p.sequenceLength, ids.data());
        if (tokenizer) {
            std::vector<std::int32_t> narrow(ids.begin(), ids.end());
            p.decoded.push_back(tokenizer->decode(narrow));
        }
        p.sample.push_back(std::move(ids));
    }
    return p;
}

std::string formatDataPreview(const DataPreview& p)
{
    std::string out = std::to_string(p.tokens) + " tokens"
                      + (p.documents > 0 ? " in " + std::to_string(p.documents) + " documents" : std::string()) + ": "
                      + std::to_string(p.trainSequences + p.evalSequences) + " sequences of " + std::to_string(p.sequenceLength)
                      + " (" + std::to_string(p.trainSequences) + " train, " + std::to_string(p.evalSequences) + " eval), "
                      + std::to_string(p.batchesPerEpoch) + " batches per rank per epoch"
                      + (p.tokenizer.empty() ? std::string() : "; tokenizer " + p.tokenizer) + "\n";
    out += p.shuffled ? "rank 0's first batch:\n" : "the stream's first sequences (the run samples them in a seeded order):\n";
    for (std::size_t i = 0; i < p.sample.size(); ++i) {
        if (i < p.decoded.size()) {
            out += "[" + std::to_string(i) + "] " + p.decoded[i] + "\n";
        } else {
            out += "[" + std::to_string(i) + "]";
            for (const auto id : p.sample[i])
                out += " " + std::to_string(id);
            out += "\n";
        }
    }
    return out;
}

} // namespace shardscope::config
