#pragma once

// What can be learnt about this machine without torch: NVIDIA GPUs from the driver's /proc
// entries (count and model names). Used by `config default`, `config validate`, `env` and
// `launch`, and by the Configure page, which checks a config as the launcher will.

#include "engine/accelerate/questionnaire.h"
#include "engine/accelerate/validation.h"

#include <string>
#include <vector>

namespace shardscope::config {

std::vector<std::string> probeGpuNames();
MachineInfo probeMachine();
Hardware probeHardware();
// Physical cores of this machine, counted as psutil.cpu_count(logical=False) counts them on Linux
// (distinct core ids per package in /proc/cpuinfo); the logical count when that is unreadable.
int physicalCoreCount();

} // namespace shardscope::config
