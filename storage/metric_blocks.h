#pragma once

// Note [Metric blocks]: downsampling a million-point series by reading every row costs far more
// than the 50 ms a chart may wait (SQLite steps ~10 M rows/s at best, through an index less).
// So each series also keeps, per block of kBlockSteps consecutive steps, the count, sum, minimum
// and maximum (with the step each extreme was seen at). The writer updates blocks in the same
// transaction as the rows, so they never disagree. A downsampling query whose buckets span at
// least one block reads only blocks (1/32 of the rows) and is still exact: its buckets are whole
// blocks. Narrower buckets read the rows themselves, which are then few.
// Internal to storage/.

#include <cmath>
#include <cstdint>

namespace shardscope::storage {

inline constexpr std::int64_t kBlockSteps = 32;

inline std::int64_t blockOf(std::int64_t step)
{
    // floor division, so a negative step cannot share block 0
    return step >= 0 ? step / kBlockSteps : -((-step + kBlockSteps - 1) / kBlockSteps);
}

struct BlockAccumulator {
    std::int64_t count = 0;
    double sum = 0;
    double minValue = NAN;
    std::int64_t minStep = 0;
    double maxValue = NAN;
    std::int64_t maxStep = 0;

    void add(std::int64_t step, double value)
    {
        ++count;
        if (std::isnan(value))
            return;
        sum += value;
        if (std::isnan(minValue) || value < minValue) {
            minValue = value;
            minStep = step;
        }
        if (std::isnan(maxValue) || value > maxValue) {
            maxValue = value;
            maxStep = step;
        }
    }

    void merge(const BlockAccumulator& other)
    {
        count += other.count;
        sum += other.sum;
        if (!std::isnan(other.minValue) && (std::isnan(minValue) || other.minValue < minValue)) {
            minValue = other.minValue;
            minStep = other.minStep;
        }
        if (!std::isnan(other.maxValue) && (std::isnan(maxValue) || other.maxValue > maxValue)) {
            maxValue = other.maxValue;
            maxStep = other.maxStep;
        }
    }
};

} // namespace shardscope::storage
