#include "engine/common/host_allocator.h"

#include <cstdlib>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace shardscope {

bool keepFreedHostMemoryForReuse()
{
#if defined(__GLIBC__)
    if (std::getenv("MALLOC_MMAP_THRESHOLD_") || std::getenv("MALLOC_TRIM_THRESHOLD_") || std::getenv("GLIBC_TUNABLES"))
        return false;
    constexpr int kMmapThreshold = 256 << 20;
    constexpr int kTrimThreshold = 1 << 30;
    return mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 && mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1;
#else
    return false;
#endif
}

} // namespace shardscope
