#include "engine/recipe/data_preview.h"

#include "engine/common/sample_order.h"
#include "engine/recipe/token_data.h"
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
    auto data = openTokenData(recipe, 0);
    if (!data)
        return data.error();
    DataPreview p;
    p.tokens = data->stream->size();
    for (const auto& part : data->stream->parts())
        p.documents += part.info().documents;
    p.sequenceLength = data->sequenceLength;
    p.tokenizer = data->tokenizer ? data->tokenizer->source() : std::string();
    p.trainSequences = data->trainSequences;
    p.evalSequences = data->evalSequences;
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
    for (std::size_t i = 0; i < mine.size() && static_cast<std::int64_t>(i) < recipe.perDeviceBatchSize; ++i) {
        std::vector<std::int64_t> ids(static_cast<std::size_t>(p.sequenceLength));
        data->stream->read(mine[i] * p.sequenceLength, p.sequenceLength, ids.data());
        if (data->tokenizer) {
            std::vector<std::int32_t> narrow(ids.begin(), ids.end());
            p.decoded.push_back(data->tokenizer->decode(narrow));
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
