#include "engine/common/sample_order.h"

#include <limits>
#include <numeric>
#include <random>
#include <utility>

namespace shardscope {

std::optional<std::vector<std::int64_t>> torchRandperm(std::int64_t n, std::uint64_t seed)
{
    if (n >= std::numeric_limits<std::uint32_t>::max() / 20)
        return std::nullopt;
    std::vector<std::int64_t> r(static_cast<std::size_t>(n));
    std::iota(r.begin(), r.end(), 0);
    std::mt19937 engine(static_cast<std::uint32_t>(seed));
    for (std::int64_t i = 0; i + 1 < n; ++i) {
        const auto z = static_cast<std::int64_t>(engine() % static_cast<std::uint64_t>(n - i));
        std::swap(r[static_cast<std::size_t>(i)], r[static_cast<std::size_t>(z + i)]);
    }
    return r;
}

std::int64_t evalSplitCount(std::int64_t n, double fraction)
{
    auto count = static_cast<std::int64_t>(static_cast<double>(n) * fraction);
    if (fraction > 0 && count == 0 && n > 1)
        count = 1;
    return count;
}

std::int64_t distributedSamplesPerRank(std::int64_t size, int worldSize, bool dropLast)
{
    // torch.utils.data.DistributedSampler's arithmetic.
    if (dropLast && size % worldSize != 0)
        return (size - worldSize + worldSize - 1) / worldSize;
    return (size + worldSize - 1) / worldSize;
}

std::vector<std::int64_t> distributedShare(std::vector<std::int64_t> order, int rank, int worldSize, bool dropLast)
{
    const auto size = static_cast<std::int64_t>(order.size());
    const std::int64_t total = distributedSamplesPerRank(size, worldSize, dropLast) * worldSize;
    if (!dropLast) {
        // Pad by wrapping around, so every rank gets as many samples (Accelerate's even_batches).
        for (std::int64_t i = 0; static_cast<std::int64_t>(order.size()) < total; ++i)
            order.push_back(order[static_cast<std::size_t>(i % size)]);
    }
    order.resize(static_cast<std::size_t>(total));
    std::vector<std::int64_t> mine;
    mine.reserve(static_cast<std::size_t>(total / worldSize));
    for (std::int64_t i = rank; i < total; i += worldSize)
        mine.push_back(order[static_cast<std::size_t>(i)]);
    return mine;
}

} // namespace shardscope
