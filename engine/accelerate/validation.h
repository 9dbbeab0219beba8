#pragma once

// Checks of a config before launch: the meaning of `accelerate launch`'s own checks (same
// errors and warnings, with the key, the value and the fix in every message), plus impossible
// combinations Accelerate lets through (fp8 without a capable GPU, more processes than listed
// GPUs, contradictory FSDP/DeepSpeed options). What is wrong in the file is an error; what only
// this machine cannot run is a warning for `config validate` and an error at launch.

#include "engine/accelerate/accelerate_config.h"

#include <optional>
#include <string>
#include <vector>

namespace shardscope::config {

enum class Severity { Error, Warning };

struct Diagnostic {
    Severity severity = Severity::Error;
    std::string keyPath; // "fsdp_config.fsdp_sync_module_states"
    std::string message; // what, where, how to fix
};

struct MachineInfo {
    int gpuCount = 0;
    bool fp8Capable = false; // compute capability >= 8.9 (Ada/Hopper)
    bool bf16Capable = false;
    std::vector<std::string> gpuNames; // as the driver names them, e.g. "NVIDIA A100-SXM4-80GB"
};

// `accelerate launch` flags that override the file (CLI flags win; reference §4.2).
struct LaunchOverrides {
    std::optional<int> numProcesses;
    std::optional<int> numMachines;
    std::optional<int> machineRank;
    std::optional<std::string> mainProcessIp;
    std::optional<int> mainProcessPort;
    std::optional<std::string> mixedPrecision;
    std::optional<std::string> gpuIds;
    std::optional<std::string> dynamoBackend;
    bool cpu = false;
    bool debug = false;
};

struct ValidationOptions {
    bool forLaunch = false;
    std::optional<MachineInfo> machine; // unknown: no machine checks
    std::string baseDir; // resolves a relative deepspeed_config_file
};

// What accelerate launch itself makes of the file's spellings before using them: mixed_precision
// lower-cased, dynamo_backend upper-cased, a digit-string zero_stage as its number, fsdp_config and
// dynamo_config keys written without their prefix under the prefixed name (a later duplicate
// wins, as the launcher copies them in order). Validation warns about each of these.
AccelerateConfig normalizeConfig(const AccelerateConfig& config);

// The config as `accelerate launch` sees it after the flags are merged (flags win over the file),
// normalised as above.
AccelerateConfig applyOverrides(const AccelerateConfig& config, const LaunchOverrides& overrides);

std::vector<Diagnostic> validateConfig(const AccelerateConfig& config, const ValidationOptions& options = {});
bool hasErrors(const std::vector<Diagnostic>& diagnostics);
std::string formatDiagnostic(const AccelerateConfig& config, const Diagnostic& d); // "file:line:col: error: ..."

// A fix the workbench applies with one click beside a diagnostic: these top-level keys set so.
struct ConfigFix {
    std::string label; // "run on CPU ranks: set use_cpu: true"
    std::vector<std::pair<std::string, Value>> set;
};
// The fix for one of validateConfig's diagnostics of `config` on `machine`, where one simple
// change makes the config run there; none otherwise. Today: a GPU distribution on a machine
// without GPUs (what `accelerate config` leads to for FSDP there) runs on CPU ranks instead.
std::optional<ConfigFix> fixFor(const Diagnostic& d, const AccelerateConfig& config, const MachineInfo& machine);

} // namespace shardscope::config
