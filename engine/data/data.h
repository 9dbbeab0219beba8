#pragma once

// Datasets and the distributed sampler. A dataset is a pair of tensors indexed along dim 0; the
// sampler decides which samples each rank sees, with the semantics of PyTorch's
// DistributedSampler (seed + epoch shuffling, padding by wrap-around unless drop_last), so that N
// ranks with batch B see exactly the samples one rank with batch N*B would.

#include "engine/recipe/recipe.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

namespace shardscope::text {
class TokenStream;
}

namespace shardscope::data {

// Sequences cut from a token stream (data.type tokens), read when a batch is made: block i is ids
// [(first + i) * length, + length) of the stream.
struct TokenBlocks {
    std::shared_ptr<const text::TokenStream> stream;
    std::int64_t first = 0;
    std::int64_t count = 0;
    std::int64_t length = 0;
};

// Samples held as tensors (inputs and targets), or token blocks.
struct Dataset {
    at::Tensor inputs; // [n, ...]
    at::Tensor targets; // [n, ...]
    std::int64_t tokensPerSample = 1; // what one sample counts for in tokens/s
    TokenBlocks blocks; // when inputs is undefined

    std::int64_t size() const { return inputs.defined() ? inputs.size(0) : blocks.count; }
    // Samples indices[0..count) as a batch. Token blocks are [count, length] ids with the labels
    // transformers' causal LM loss uses: the ids shifted left by one, -100 (ignored) at the end.
    std::pair<at::Tensor, at::Tensor> gather(const std::int64_t* indices, std::int64_t count) const;
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

// data.type tokens: the token stream of data.path (token files; corpora tokenized with `threads`
// workers) cut into model.block_size blocks as transformers' group_texts cuts the joined texts
// (the remainder dropped); the last eval_fraction of the blocks is the eval split. Throws
// std::runtime_error, naming the file, for an id at or above model.vocab_size, a tokenizer with
// more ids than the model, or a stream shorter than one block.
Split makeTokenBlocks(const config::Recipe& recipe, int threads);

// "data: 7759 tokens (122 documents) from demo.jsonl, 121 sequences of 64 (109 train, 12 eval)"
std::string describe(const Split& tokenBlocks); // a makeTokenBlocks split

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

// Batches of a rank's samples, epoch after epoch, endlessly (the runner counts steps). For token
// blocks the next batch is read on a background thread while the step runs, so that reading the
// memory-mapped stream is off the step's critical path; position() counts only what next() has
// returned, so a checkpoint never includes a batch read ahead.
class BatchIterator {
public:
    BatchIterator(const Dataset& dataset, const DistributedSampler& sampler, std::int64_t batchSize);
    ~BatchIterator();
    BatchIterator(const BatchIterator&) = delete;
    BatchIterator& operator=(const BatchIterator&) = delete;
    struct Batch {
        at::Tensor inputs;
        at::Tensor targets;
        std::int64_t epoch = 0;
        std::int64_t position = 0; // samples of the epoch this rank consumed before this batch
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
    // The batch being read ahead: the one at m_position of epoch m_epoch, if any.
    std::future<std::pair<at::Tensor, at::Tensor>> m_ahead;
    void readAhead();
    void dropReadAhead();
};

} // namespace shardscope::data
