#include "engine/data/data.h"

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
    std::int64_t evalCount = static_cast<std::int64_t>(static_cast<double>(n) * evalFraction);
    if (evalFraction > 0 && evalCount == 0 && n > 1)
        evalCount = 1;
    const std::int64_t trainCount = n - evalCount;
    Split split;
    split.train = {all.inputs.narrow(0, 0, trainCount), all.targets.narrow(0, 0, trainCount), all.tokensPerSample};
    if (evalCount > 0)
        split.eval = {all.inputs.narrow(0, trainCount, evalCount), all.targets.narrow(0, trainCount, evalCount),
                      all.tokensPerSample};
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
    return splitOff({x, y, 1}, recipe.data.evalFraction);
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
    return splitOff({samples.narrow(1, 0, T).contiguous(), samples.narrow(1, 1, T).contiguous(), T}, recipe.data.evalFraction);
}

DistributedSampler::DistributedSampler(std::int64_t datasetSize, int rank, int worldSize, bool shuffle, std::uint64_t seed,
                                       bool dropLast)
    : m_size(datasetSize), m_rank(rank), m_world(worldSize), m_shuffle(shuffle), m_seed(seed), m_dropLast(dropLast)
{
    // torch.utils.data.DistributedSampler's arithmetic.
    if (m_dropLast && m_size % m_world != 0)
        m_numSamples = (m_size - m_world + m_world - 1) / m_world;
    else
        m_numSamples = (m_size + m_world - 1) / m_world;
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
    std::vector<std::int64_t> all(order.data_ptr<std::int64_t>(), order.data_ptr<std::int64_t>() + m_size);
    const std::int64_t total = m_numSamples * m_world;
    if (!m_dropLast) {
        // Pad by wrapping around, so every rank gets as many samples (Accelerate's even_batches).
        for (std::int64_t i = 0; static_cast<std::int64_t>(all.size()) < total; ++i)
            all.push_back(all[static_cast<std::size_t>(i % m_size)]);
    }
    all.resize(static_cast<std::size_t>(total));
    std::vector<std::int64_t> mine;
    mine.reserve(static_cast<std::size_t>(m_numSamples));
    for (std::int64_t i = m_rank; i < total; i += m_world)
        mine.push_back(all[static_cast<std::size_t>(i)]);
    return mine;
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

void BatchIterator::restore(std::int64_t epoch, std::int64_t position)
{
    m_epoch = epoch;
    m_order = m_sampler.indices(epoch);
    m_position = static_cast<std::size_t>(std::clamp<std::int64_t>(position, 0, static_cast<std::int64_t>(m_order.size())));
}

BatchIterator::Batch BatchIterator::next()
{
    // The last incomplete batch of an epoch is dropped (DataLoader drop_last), so every step has
    // a full batch on every rank.
    if (m_position + static_cast<std::size_t>(m_batchSize) > m_order.size()) {
        ++m_epoch;
        m_order = m_sampler.indices(m_epoch);
        m_position = 0;
    }
    auto index = at::from_blob(m_order.data() + m_position, {m_batchSize}, at::kLong).clone();
    m_position += static_cast<std::size_t>(m_batchSize);
    return {m_dataset.inputs.index_select(0, index), m_dataset.targets.index_select(0, index), m_epoch};
}

} // namespace shardscope::data
