#pragma once

// Datasets and the distributed sampler. A dataset is a pair of tensors indexed along dim 0; the
// sampler decides which samples each rank sees, with the semantics of PyTorch's
// DistributedSampler (seed + epoch shuffling, padding by wrap-around unless drop_last), so that N
// ranks with batch B see exactly the samples one rank with batch N*B would.

#include "engine/config/recipe.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace shardscope::data {

struct Dataset {
    at::Tensor inputs; // [n, ...]
    at::Tensor targets; // [n, ...]
    std::int64_t tokensPerSample = 1; // what one sample counts for in tokens/s

    std::int64_t size() const { return inputs.defined() ? inputs.size(0) : 0; }
};

struct Split {
    Dataset train;
    Dataset eval;
};

// Synthetic regression with a known optimum: y = x W + noise, x ~ N(0, 1), W ~ N(0, 1/in),
// all drawn from generators seeded with `seed`, so the best achievable MSE is noise^2.
Split makeSyntheticRegression(const config::Recipe& recipe);

// Byte-level language modelling over a text file: sample i is bytes [i*T, i*T + T] of the file
// (input = the first T, target = the last T). Throws std::runtime_error if the file is unreadable
// or shorter than two windows.
Split makeByteText(const config::Recipe& recipe, const std::string& path);

// The default demo text: config::defaultTextPath() (torch-free, the launcher checks it too).
using config::defaultTextPath;

class DistributedSampler {
public:
    DistributedSampler(std::int64_t datasetSize, int rank, int worldSize, bool shuffle, std::uint64_t seed, bool dropLast);
    // This rank's sample indices for one epoch, in order.
    std::vector<std::int64_t> indices(std::int64_t epoch) const;
    std::int64_t samplesPerRank() const { return m_numSamples; }

private:
    std::int64_t m_size;
    int m_rank;
    int m_world;
    bool m_shuffle;
    std::uint64_t m_seed;
    bool m_dropLast;
    std::int64_t m_numSamples;
};

// Batches of a rank's samples, epoch after epoch, endlessly (the runner counts steps).
class BatchIterator {
public:
    BatchIterator(const Dataset& dataset, const DistributedSampler& sampler, std::int64_t batchSize);
    struct Batch {
        at::Tensor inputs;
        at::Tensor targets;
        std::int64_t epoch = 0;
    };
    Batch next();
    // Where the iterator is, for checkpoints: the epoch and the samples of it already consumed.
    std::int64_t epoch() const { return m_epoch; }
    std::int64_t position() const { return static_cast<std::int64_t>(m_position); }
    void restore(std::int64_t epoch, std::int64_t position);

private:
    const Dataset& m_dataset;
    const DistributedSampler& m_sampler;
    std::int64_t m_batchSize;
    std::int64_t m_epoch = 0;
    std::vector<std::int64_t> m_order;
    std::size_t m_position = 0;
};

} // namespace shardscope::data
