#pragma once

// The plan of a script run: a user's own Accelerate (or transformers.Trainer) script started
// through the real `accelerate launch` of a chosen Python environment. It decides the command
// line from the Accelerate config and this machine, and refuses the launches that Accelerate
// would degrade silently on a CPU-only machine:
//   - a MULTI_CPU config (or `--cpu`) starts one non-distributed process unless mpirun is set up;
//     the path that really gives N Gloo ranks is ACCELERATE_USE_CPU=1 with `--multi_gpu`, which
//     goes through torchrun, and that is the one taken;
//   - MULTI_GPU with use_cpu: true spawns N independent single-process runs;
//   - FSDP, DeepSpeed or Megatron-LM on the CPU train unsharded as MULTI_CPU.
// Torch-free and Qt-free, like the run plan.

#include "engine/accelerate/accelerate_config.h"
#include "engine/accelerate/validation.h"

#include <optional>
#include <string>
#include <vector>

namespace shardscope::config {

struct ScriptInputs {
    AccelerateConfig config{ConfigKind::Cluster, Value::emptyMap()}; // the launch flags merged in (applyOverrides)
    std::string configPath; // the file `accelerate launch` reads (the run directory's copy)
    std::string configBaseDir; // resolves a relative deepspeed_config_file
    std::string python; // the interpreter whose accelerate runs the script
    std::string script;
    std::vector<std::string> scriptArgs;
    std::string torchrunLogDir; // torchrun's --log_dir (per-rank stdout/stderr files)
    MachineInfo machine;
};

struct ScriptPlan {
    std::string python;
    // After the interpreter: resources/launch/accelerate_loopback.py launch ... on one machine,
    // -m accelerate.commands.accelerate_cli launch ... over several.
    std::vector<std::string> args;
    std::vector<std::string> environment; // NAME=VALUE added to the launcher's environment
    std::string distributedType; // what the ranks really run as ("MULTI_CPU" on the CPU path)
    std::string mixedPrecision;
    int numProcesses = 1; // over every machine
    int numMachines = 1; // a run over several: this machine's launch of it
    int machineRank = 0;
    bool onCpu = false;
    // The command as a user would type it in a shell (environment first), for the Run page and the
    // run directory.
    std::string commandLine() const;
};

struct PlannedScript {
    std::optional<ScriptPlan> plan; // none when a problem is an error
    std::vector<Diagnostic> problems;
    bool ok() const { return plan.has_value(); }
};

PlannedScript planScriptRun(const ScriptInputs& inputs);

// The file a script run on one machine starts `accelerate launch` through (resources/launch/):
// Accelerate's own CLI with torchrun's rendezvous store bound to 127.0.0.1 only.
std::string accelerateLoopbackEntry();

// `text` quoted for a POSIX shell when it needs it: the command lines Shardscope shows, and the
// batch scripts it writes for a cluster (app/cluster); nothing of a local launch runs through a shell.
std::string shellQuote(const std::string& text);

} // namespace shardscope::config
