#include "engine/config/machine_probe.h"

#include <filesystem>
#include <fstream>

namespace shardscope::config {

std::vector<std::string> probeGpuNames()
{
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", ec)) {
        std::ifstream info(e.path() / "information");
        std::string line, model = "NVIDIA GPU";
        while (std::getline(info, line))
            if (line.rfind("Model:", 0) == 0) {
                model = line.substr(line.find_first_not_of(" \t", 6));
                break;
            }
        names.push_back(model);
    }
    return names;
}

MachineInfo probeMachine()
{
    MachineInfo m;
    const auto names = probeGpuNames();
    m.gpuCount = static_cast<int>(names.size());
    // Without the CUDA runtime the compute capability is inferred from the model name.
    for (const auto& n : names) {
        const bool hopperOrAda = n.find("H100") != std::string::npos || n.find("H200") != std::string::npos
            || n.find("H800") != std::string::npos || n.find("L40") != std::string::npos || n.find("L4") != std::string::npos
            || n.find("RTX 40") != std::string::npos || n.find("B200") != std::string::npos || n.find("GB200") != std::string::npos;
        const bool ampere = n.find("A100") != std::string::npos || n.find("A10") != std::string::npos
            || n.find("A30") != std::string::npos || n.find("A40") != std::string::npos || n.find("RTX 30") != std::string::npos
            || n.find("A6000") != std::string::npos;
        m.fp8Capable = m.fp8Capable || hopperOrAda;
        m.bf16Capable = m.bf16Capable || hopperOrAda || ampere;
    }
    return m;
}

Hardware probeHardware()
{
    return Hardware{};
}

} // namespace shardscope::config
