#include "engine/recipe/token_data.h"

#include "engine/common/sample_order.h"
#include "engine/text/token_stream.h"

namespace shardscope::config {

Result<TokenData> openTokenData(const Recipe& recipe, int threads)
{
    TokenData data;
    auto tokenizer = loadDataTokenizer(recipe);
    if (!tokenizer)
        return tokenizer.error();
    data.tokenizer = *tokenizer;
    text::TokenSourceOptions options;
    options.paths = recipe.data.paths;
    options.tokenizer = data.tokenizer;
    options.field = recipe.data.field;
    options.tokenDtype = text::parseTokenDtype(recipe.data.tokenDtype);
    options.threads = threads;
    auto stream = text::TokenStream::open(options);
    if (!stream)
        return stream.error();
    const std::int64_t vocab = recipe.model.vocabSize;
    if (const auto highest = stream->highestId(); stream->size() > 0 && highest.id >= vocab)
        return makeError(highest.path + " holds the token id " + std::to_string(highest.id) + " (at position "
                             + std::to_string(highest.position) + "), but the model's vocab_size is " + std::to_string(vocab)
                             + "; tokenize with the model's own tokenizer, or train a model with vocab_size "
                             + std::to_string(static_cast<std::int64_t>(highest.id) + 1) + " or more",
                         ErrorKind::Conflict);
    data.sequenceLength = recipe.model.blockSize;
    const std::int64_t n = stream->size() / data.sequenceLength;
    if (n < 1)
        return makeError("the data (data.path) holds " + std::to_string(stream->size())
                             + " tokens, fewer than one sequence of model.block_size " + std::to_string(data.sequenceLength)
                             + "; add data or lower model.block_size",
                         ErrorKind::BadValue);
    data.evalSequences = evalSplitCount(n, recipe.data.evalFraction);
    data.trainSequences = n - data.evalSequences;
    data.stream = std::make_shared<const text::TokenStream>(std::move(*stream));
    return data;
}

} // namespace shardscope::config
