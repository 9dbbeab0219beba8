#pragma once

// What the CLI can learn about this machine without torch: NVIDIA GPUs from the driver's /proc
// entries (count and model names). Used for `config default`, `config validate` and `env`.

#include "engine/config/questionnaire.h"
#include "engine/config/validation.h"

#include <string>
#include <vector>

namespace shardscope::cli {

std::vector<std::string> probeGpuNames();
config::MachineInfo probeMachine();
config::Hardware probeHardware();

} // namespace shardscope::cli
