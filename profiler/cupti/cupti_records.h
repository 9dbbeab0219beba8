#pragma once

// Note [CUPTI seam]: the one place that reads CUPTI's activity structs. Built only with CUPTI.
// The structs are versioned; we read the newest this cupti_activity.h defines (Kernel10,
// Memcpy6, Memset4 for CUDA 13.0), which is what the libcupti we link (the one libtorch loads,
// from nvidia-cuda-cupti / nvidia/cu13) hands out.

#include "profiler/cupti/activity_record.h"

#include <cupti.h>

#include <optional>

namespace shardscope::profiler {

// ActivityRecord of a kernel, memcpy or memset record; nullopt for any other kind.
std::optional<ActivityRecord> activityRecordFromCupti(const CUpti_Activity* record);

} // namespace shardscope::profiler
