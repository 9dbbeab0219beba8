#include "engine/plan/machine_probe.h"

#include <sched.h>

#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <thread>

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
    m.gpuNames = names;
    // Without the CUDA runtime the compute capability is inferred from the model name.
    for (const auto& n : names) {
        const bool hopperOrAda = n.find("H100") != std::string::npos || n.find("H200") != std::string::npos
                                 || n.find("H800") != std::string::npos || n.find("L40") != std::string::npos
                                 || n.find("L4") != std::string::npos || n.find("RTX 40") != std::string::npos
                                 || n.find("B200") != std::string::npos || n.find("GB200") != std::string::npos;
        const bool ampere = n.find("A100") != std::string::npos || n.find("A10") != std::string::npos
                            || n.find("A30") != std::string::npos || n.find("A40") != std::string::npos
                            || n.find("RTX 30") != std::string::npos || n.find("A6000") != std::string::npos;
        m.fp8Capable = m.fp8Capable || hopperOrAda;
        m.bf16Capable = m.bf16Capable || hopperOrAda || ampere;
    }
    return m;
}

Hardware probeHardware() { return Hardware{}; }

int physicalCoreCount()
{
    std::ifstream in("/proc/cpuinfo");
    std::set<std::pair<std::string, std::string>> cores;
    std::string line, package = "0";
    while (std::getline(in, line)) {
        const auto colon = line.find(':');
        if (colon == std::string::npos)
            continue;
        std::string key = line.substr(0, colon);
        key.erase(key.find_last_not_of(" \t") + 1);
        const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : std::string();
        if (key == "physical id")
            package = value;
        else if (key == "core id")
            cores.emplace(package, value);
    }
    if (!cores.empty())
        return static_cast<int>(cores.size());
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int cpusOfThisProcess()
{
    int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    cpu_set_t mask;
    CPU_ZERO(&mask);
    if (::sched_getaffinity(0, sizeof mask, &mask) == 0 && CPU_COUNT(&mask) > 0)
        cpus = CPU_COUNT(&mask);
    if (!std::getenv("SLURM_JOB_ID"))
        return cpus;
    for (const char* name : {"SLURM_CPUS_PER_TASK", "SLURM_CPUS_ON_NODE"}) {
        const char* given = std::getenv(name);
        char* end = nullptr;
        const long n = given ? std::strtol(given, &end, 10) : 0;
        if (given && end != given && *end == '\0' && n > 0)
            return std::min(cpus, static_cast<int>(std::min<long>(n, 1 << 20)));
    }
    return cpus;
}

} // namespace shardscope::config
