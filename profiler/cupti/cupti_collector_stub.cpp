// The collector of a build without CUPTI: every start fails with a message, so the engine takes
// the host-span path (Note [One CUPTI subscriber] in cupti_collector.h).

#include "profiler/cupti/cupti_collector.h"

namespace shardscope::profiler {

bool CuptiCollector::compiledIn() { return false; }

Result<std::unique_ptr<CuptiCollector>> CuptiCollector::start(const CuptiOptions&)
{
    return makeError("CUPTI collector unavailable: this Shardscope was built without CUPTI (no CUDA torch or no "
                     "cupti.h at configure time); recording host spans only. Rebuild with a CUDA torch and "
                     "SHARDSCOPE_WITH_CUPTI=ON for device traces");
}

CuptiCollector::~CuptiCollector() = default;

Result<std::vector<ActivityRecord>> CuptiCollector::stop()
{
    return makeError("CUPTI collector unavailable: this build has no CUPTI");
}

std::uint64_t CuptiCollector::droppedRecords() const { return 0; }

} // namespace shardscope::profiler
