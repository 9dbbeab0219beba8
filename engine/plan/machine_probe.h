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
// The CPUs this process may use: its affinity mask, and within a SLURM job the CPUs the job step
// was given (SLURM_CPUS_PER_TASK, else SLURM_CPUS_ON_NODE: a cluster without task affinity sets no
// mask, and ranks that took every core of the machine would share it with the other jobs on it).
int cpusOfThisProcess();

} // namespace shardscope::config
