#pragma once

// The order torch.utils.data.DistributedSampler gives each rank, torch-free, so that what a run
// will sample can be shown before it starts (the recipe editor's sample batch) without libtorch.
// The engine's sampler (engine/data) shares distributedShare and draws its permutation with
// at::randperm; tst_token_data checks that torchRandperm draws the same one.

#include <cstdint>
#include <optional>
#include <vector>

namespace shardscope {

// torch.randperm(n, generator=torch.Generator().manual_seed(seed)) on the CPU: ATen's Fisher-Yates
// over mt19937 (seeded with the seed's low 32 bits), `random() % (n - i)`. Empty past n of
// 2^32 / 20, where ATen switches to 64-bit draws.
std::optional<std::vector<std::int64_t>> torchRandperm(std::int64_t n, std::uint64_t seed);

// DistributedSampler's share of `order` (all the dataset's indices, shuffled or not) for `rank`:
// padded by wrapping around to a multiple of `worldSize` (or cut to one, when dropLast), then every
// worldSize-th index from `rank`.
std::vector<std::int64_t> distributedShare(std::vector<std::int64_t> order, int rank, int worldSize, bool dropLast);

// How many of n samples a split of `fraction` takes for eval (the last ones): at least one when any
// is asked for and n > 1.
std::int64_t evalSplitCount(std::int64_t n, double fraction);

// num_samples of DistributedSampler: how many indices each rank gets per epoch.
std::int64_t distributedSamplesPerRank(std::int64_t size, int worldSize, bool dropLast);

} // namespace shardscope
