#pragma once

// How `shardscope tune` runs a trial: the trial's Accelerate config and recipe written into the
// session's folder beside the runs, then `shardscope launch` of them as a run of the history
// (tagged with the session), stopped (SIGINT, then SIGKILL) when the time budget runs out; what it
// measured is read back from its run folder (events and outcome).

#include "app/runs/tuner.h"

#include <filesystem>
#include <optional>
#include <string>

namespace shardscope::runs {

class LaunchTrialRunner : public TrialRunner {
public:
    // `program`: the shardscope executable; `gpu`: how the trials' memory is measured.
    LaunchTrialRunner(std::string program, std::string runsDir, bool gpu);
    TrialResult run(const Trial& trial) override;

private:
    std::string m_program;
    std::string m_runsDir;
    bool m_gpu = false;
};

// What a finished trial's run folder says: its outcome, tokens/s of all ranks over its steps after
// the first two, and the largest per-rank memory of any rank and step (model states on the CPU,
// the allocator's peak on a GPU).
TrialResult readTrialRun(const std::filesystem::path& runDir, config::DataParallelLayout layout, bool gpu);

// The smallest GPU's memory in bytes, as nvidia-smi reports it: the default budget on a GPU machine.
std::optional<double> smallestGpuMemory();

} // namespace shardscope::runs
