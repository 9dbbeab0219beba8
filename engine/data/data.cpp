#include "engine/data/data.h"

#include "engine/common/sample_order.h"
#include "engine/recipe/token_data.h"
#include "engine/text/token_stream.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

namespace shardscope::data {

namespace {

Split splitOff(Dataset all, double evalFraction)
{
    const std::int64_t n = all.size();
    const std::int64_t evalCount = evalSplitCount(n, evalFraction);
    const std::int64_t trainCount = n - evalCount;
    Split split;
    split.train = {all.inputs.narrow(0, 0, trainCount), all.targets.narrow(0, 0, trainCount), all.tokensPerSample, {}};
    if (evalCount > 0)
        split.eval = {
            all.inputs.narrow(0, trainCount, evalCount), all.targets.narrow(0, trainCount, evalCount), all.tokensPerSample, {}};
    return split;
}

} // namespace

Split makeSyntheticRegression(const config::Recipe& recipe)
{
    const auto& m = recipe.model;
    auto gen = at::make_generator<at::CPUGeneratorImpl>(recipe.seed);
    auto x = at::randn({recipe.data.numSamples, m.inputDim}, gen, at::kFloat);
    auto w = at::randn({m.inputDim, m.outputDim}, gen, at::kFloat) / std::sqrt(static_cast<double>(m.inputDim));
    auto y = at::matmul(x, w) + recipe.data.noise * at::randn({recipe.data.numSamples, m.outputDim}, gen, at::kFloat);
    return splitOff({x, y, 1, {}}, recipe.data.evalFraction);
}

Split makeByteText(const config::Recipe& recipe, const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw std::runtime_error("cannot read the text file '" + path + "' (data.path in the recipe)");
    std::stringstream buffer;
    buffer << in.rdbuf();
    const std::string bytes = buffer.str();
    if (auto fits = config::checkTextFitsVocabulary(bytes, recipe, path); !fits)
        throw std::runtime_error(fits.error().message);
    const std::int64_t T = recipe.model.blockSize;
    const std::int64_t n = (static_cast<std::int64_t>(bytes.size()) - 1) / T;
    if (n < 2)
        throw std::runtime_error("the text file '" + path + "' has " + std::to_string(bytes.size()) + " bytes; it needs at least "
                                 + std::to_string(2 * T + 1) + " for block_size " + std::to_string(T));
    auto all = at::empty({static_cast<std::int64_t>(bytes.size())}, at::kLong);
    auto* p = all.data_ptr<std::int64_t>();
    for (std::size_t i = 0; i < bytes.size(); ++i)
        p[i] = static_cast<unsigned char>(bytes[i]);
    auto windows = at::arange(n, at::kLong).unsqueeze(1) * T + at::arange(T + 1, at::kLong).unsqueeze(0);
    auto samples = all.index({windows}); // [n, T + 1]
    return splitOff({samples.narrow(1, 0, T).contiguous(), samples.narrow(1, 1, T).contiguous(), T, {}},
                    recipe.data.evalFraction);
}

std::pair<at::Tensor, at::Tensor> Dataset::gather(const std::int64_t* indices, std::int64_t count) const
{
    if (inputs.defined()) {
        auto index = at::from_blob(const_cast<std::int64_t*>(indices), {count}, at::kLong).clone();
        return {inputs.index_select(0, index), targets.index_select(0, index)};
    }
    const std::int64_t T = blocks.length;
    auto in = at::empty({count, T}, at::kLong);
    auto out = at::empty({count, T}, at::kLong);
    auto* x = in.data_ptr<std::int64_t>();
    auto* y = out.data_ptr<std::int64_t>();
    for (std::int64_t i = 0; i < count; ++i, x += T, y += T) {
        blocks.stream->read((blocks.first + indices[i]) * T, T, x);
        std::copy(x + 1, x + T, y);
        y[T - 1] = -100; // transformers' causal LM loss: nothing to predict after the last id
    }
    return {in, out};
}

Split makeTokenBlocks(const config::Recipe& recipe, int threads)
{
    auto data = config::openTokenData(recipe, threads);
    if (!data)
        throw std::runtime_error(data.error().message);
    const std::int64_t T = data->sequenceLength;
    Split split;
    split.train.blocks = {data->stream, 0, data->trainSequences, T};
    split.train.tokensPerSample = T;
    split.eval.blocks = {data->stream, data->trainSequences, data->evalSequences, T};
    split.eval.tokensPerSample = T;
    return split;
}

std::string describe(const Split& split)
{
    const auto& blocks = split.train.blocks;
    std::int64_t documents = 0;
    std::string files;
    for (const auto& part : blocks.stream->parts()) {
        documents += part.info().documents;
        files += (files.empty() ? "" : ", ") + std::filesystem::path(part.path()).filename().string();
    }
    return "data: " + std::to_string(blocks.stream->size()) + " tokens"
           + (documents > 0 ? " (" + std::to_string(documents) + " documents)" : std::string()) + " from " + files + ", "
           + std::to_string(split.train.size() + split.eval.size()) + " sequences of " + std::to_string(blocks.length) + " ("
           + std::to_string(split.train.size()) + " train, " + std::to_string(split.eval.size()) + " eval)";
}

DistributedSampler::DistributedSampler(std::int64_t datasetSize, int rank, int worldSize, bool shuffle, std::uint64_t seed,
                                       bool dropLast)
    : m_size(datasetSize), m_rank(rank), m_world(worldSize), m_shuffle(shuffle), m_seed(seed), m_dropLast(dropLast),
      m_numSamples(distributedSamplesPerRank(datasetSize, worldSize, dropLast))
{
}

std::vector<std::int64_t> DistributedSampler::indices(std::int64_t epoch) const
{
    at::Tensor order;
    if (m_shuffle) {
        auto gen = at::make_generator<at::CPUGeneratorImpl>(m_seed + static_cast<std::uint64_t>(epoch));
        order = at::randperm(m_size, gen, at::kLong);
    } else {
        order = at::arange(m_size, at::kLong);
    }
    return distributedShare({order.data_ptr<std::int64_t>(), order.data_ptr<std::int64_t>() + m_size}, m_rank, m_world,
                            m_dropLast);
}

BatchIterator::BatchIterator(const Dataset& dataset, const DistributedSampler& sampler, std::int64_t batchSize)
    : m_dataset(dataset), m_sampler(sampler), m_batchSize(batchSize)
{
    if (sampler.samplesPerRank() < batchSize)
        throw std::runtime_error("each rank gets " + std::to_string(sampler.samplesPerRank())
                                 + " samples per epoch, fewer than training.per_device_batch_size (" + std::to_string(batchSize)
                                 + "); lower the batch size or use more data");
    m_order = sampler.indices(0);
}

BatchIterator::~BatchIterator() { dropReadAhead(); }

void BatchIterator::dropReadAhead()
{
    if (m_ahead.valid())
        m_ahead.wait();
    m_ahead = {};
}

void BatchIterator::readAhead()
{
    // Only token blocks read anything (tensor datasets are already in memory), and only within the
    // epoch: the first batch of the next one is read when it is asked for.
    if (m_dataset.inputs.defined() || m_position + static_cast<std::size_t>(m_batchSize) > m_order.size())
        return;
    m_ahead = std::async(
        std::launch::async,
        [this, indices = std::vector<std::int64_t>(m_order.begin() + static_cast<std::ptrdiff_t>(m_position),
                                                   m_order.begin() + static_cast<std::ptrdiff_t>(m_position) + m_batchSize)] {
            return m_dataset.gather(indices.data(), static_cast<std::int64_t>(indices.size()));
        });
}

void BatchIterator::restore(std::int64_t epoch, std::int64_t position)
{
    dropReadAhead();
    m_epoch = epoch;
    m_order = m_sampler.indices(epoch);
    m_position = static_cast<std::size_t>(std::clamp<std::int64_t>(position, 0, static_cast<std::int64_t>(m_order.size())));
}

BatchIterator::Batch BatchIterator::next()
{
    // The last incomplete batch of an epoch is dropped (DataLoader drop_last), so every step has
    // a full batch on every rank.
    if (m_position + static_cast<std::size_t>(m_batchSize) > m_order.size()) {
        dropReadAhead();
        ++m_epoch;
        m_order = m_sampler.indices(m_epoch);
        m_position = 0;
    }
    auto [inputs, targets] = m_ahead.valid() ? m_ahead.get() : m_dataset.gather(m_order.data() + m_position, m_batchSize);
    const auto position = static_cast<std::int64_t>(m_position);
    m_position += static_cast<std::size_t>(m_batchSize);
    readAhead();
    return {inputs, targets, m_epoch, position};
}

} // namespace shardscope::data
