#include "engine/plan/script_plan.h"

#include "engine/recipe/recipe.h"

#include <filesystem>
#include <functional>

namespace shardscope::config {

std::string accelerateLoopbackEntry() { return resourcesFolder() + "/launch/accelerate_loopback.py"; }

namespace {

// The distributed types a script run launches; the others (TPU, XPU, NPU, ...) need hardware and
// launchers this tool does not drive.
bool knownScriptType(const std::string& type)
{
    return type == "NO" || type == "MULTI_CPU" || type == "MULTI_GPU" || type == "FSDP" || type == "DEEPSPEED"
           || type == "MEGATRON_LM";
}

bool isSharding(const std::string& type) { return type == "FSDP" || type == "DEEPSPEED" || type == "MEGATRON_LM"; }

// A string field ("" when absent or not a string).
std::string textField(const AccelerateConfig& c, std::string_view key)
{
    const Value value = c.field(key);
    return value.isString() ? value.asString() : std::string();
}

// Accelerate's multi-machine settings, each honoured (the command gets --num_machines,
// --machine_rank, --main_process_ip/port, --same_network), refused with the reason, or (what
// `accelerate launch` ignores in the file) warned about.
void checkMachines(const AccelerateConfig& c, int machines, int processes,
                   const std::function<void(const std::string&, const std::string&)>& error,
                   const std::function<void(const std::string&, const std::string&)>& warn)
{
    const auto rank = c.intField("machine_rank");
    if (!rank || *rank < 0 || *rank >= machines)
        error("machine_rank", "machine_rank " + (rank ? std::to_string(*rank) : std::string("(unset)")) + " is not in 0.."
                                  + std::to_string(machines - 1) + " for num_machines " + std::to_string(machines)
                                  + "; each machine's launch gives its own (--machine_rank, or --target slurm on each node)");
    if (textField(c, "main_process_ip").empty())
        error("main_process_ip", "a run over " + std::to_string(machines)
                                     + " machines needs machine 0's address (main_process_ip, or --main_process_ip)");
    if (c.intField("main_process_port").value_or(0) <= 0)
        error("main_process_port", "a run over several machines needs one rendezvous port that every machine knows "
                                   "(main_process_port, or --main_process_port)");
    if (processes % machines != 0)
        error("num_processes", "num_processes " + std::to_string(processes) + " is not a multiple of num_machines "
                                   + std::to_string(machines) + " (num_processes counts the ranks of all machines)");
    // The file's rdzv_backend and same_network never reach `accelerate launch` (its --rdzv_backend
    // and --same_network defaults shadow them): the command says --same_network, the static
    // rendezvous at machine 0's address, on every machine.
    const std::string rdzv = textField(c, "rdzv_backend");
    if (!rdzv.empty() && rdzv != "static")
        warn("rdzv_backend", "rdzv_backend " + rdzv
                                 + " in the file is not used by `accelerate launch` (its own --rdzv_backend default wins); "
                                   "the machines meet in the static rendezvous at main_process_ip with their machine_rank "
                                   "(c10d without a machine_rank fails on int(None) in Accelerate 1.15)");
}

// The checks of the launch that are about scripts (validateConfig, which knows the engine, says
// FSDP on the CPU is fine: the engine shards there; Accelerate does not).
void checkScriptLaunch(const ScriptInputs& in, bool onCpu, std::vector<Diagnostic>& problems)
{
    const AccelerateConfig& c = in.config;
    const std::string type = c.distributedType();
    const int n = static_cast<int>(c.intField("num_processes").value_or(1));
    const auto error = [&](const std::string& key, const std::string& message) {
        problems.push_back({Severity::Error, key, message});
    };
    if (!knownScriptType(type))
        error("distributed_type", "distributed_type " + (type.empty() ? std::string("(not a string)") : type)
                                      + " is not one a script run launches; use NO, MULTI_CPU, MULTI_GPU, FSDP or DEEPSPEED");
    const int machines = static_cast<int>(c.intField("num_machines").value_or(1));
    if (machines > 1)
        checkMachines(c, machines, n, error, [&](const std::string& key, const std::string& message) {
            problems.push_back({Severity::Warning, key, message});
        });
    if (type == "MULTI_GPU" && c.boolField("use_cpu"))
        error("use_cpu", "distributed_type MULTI_GPU with use_cpu: true makes `accelerate launch` start " + std::to_string(n)
                             + " independent single-process runs (each a world of one), not one run of " + std::to_string(n)
                             + " ranks; set distributed_type: MULTI_CPU to train on CPU ranks, or use_cpu: false for GPUs");
    else if (type == "MULTI_GPU" && in.machine.gpuCount == 0)
        error("distributed_type", "distributed_type MULTI_GPU needs GPUs but this machine has none; set distributed_type: "
                                  "MULTI_CPU to train on CPU ranks (Gloo), or run where GPUs are");
    if (isSharding(type) && onCpu)
        error("distributed_type",
              "distributed_type " + type + " on the CPU"
                  + (c.boolField("use_cpu") ? std::string(" (use_cpu: true)") : std::string(" (this machine has no GPU)"))
                  + ": Accelerate would train the script unsharded, as MULTI_CPU, without saying so; run it where GPUs "
                    "are, or set distributed_type: MULTI_CPU for plain data parallel on CPU ranks (Shardscope's own "
                    "engine, --recipe, does shard on the CPU)");
    if (type == "NO" && n > 1)
        error("num_processes", "distributed_type NO runs one process, but num_processes is " + std::to_string(n)
                                   + "; use MULTI_CPU or MULTI_GPU for several ranks");
    if (n > 1 && !onCpu && n / std::max(machines, 1) > in.machine.gpuCount)
        error("num_processes", "num_processes is " + std::to_string(n)
                                   + (machines > 1 ? " over " + std::to_string(machines) + " machines" : std::string())
                                   + " but this machine has " + std::to_string(in.machine.gpuCount) + " GPU(s)");
    std::error_code ec;
    if (in.script.empty())
        error("--script", "no script given; name the training script with --script train.py");
    else if (!std::filesystem::is_regular_file(in.script, ec))
        error("--script", "the script " + in.script + " does not exist (or is not a file); check the path");
    if (machines == 1 && !std::filesystem::is_regular_file(accelerateLoopbackEntry(), ec))
        error("--script", "Shardscope's " + accelerateLoopbackEntry()
                              + " is missing, which starts `accelerate launch` on this machine; reinstall Shardscope, or "
                                "point SHARDSCOPE_RESOURCES at its resources folder");
}

} // namespace

std::string shellQuote(const std::string& text)
{
    if (!text.empty()
        && text.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%")
               == std::string::npos)
        return text;
    std::string quoted = "'";
    for (char ch : text)
        quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    return quoted + "'";
}

std::string ScriptPlan::commandLine() const
{
    std::string line;
    for (const auto& variable : environment)
        line += shellQuote(variable) + " ";
    line += shellQuote(python);
    for (const auto& arg : args)
        line += " " + shellQuote(arg);
    return line;
}

PlannedScript planScriptRun(const ScriptInputs& in)
{
    PlannedScript out;
    ValidationOptions options;
    options.forLaunch = true;
    options.baseDir = in.configBaseDir;
    // Machine checks are the script's own (below): the engine's accept FSDP on the CPU.
    out.problems = validateConfig(in.config, options);
    const AccelerateConfig& c = in.config;
    const bool onCpu = in.machine.gpuCount == 0 || c.boolField("use_cpu");
    checkScriptLaunch(in, onCpu, out.problems);
    if (hasErrors(out.problems))
        return out;

    ScriptPlan plan;
    plan.python = in.python;
    plan.numProcesses = static_cast<int>(c.intField("num_processes").value_or(1));
    plan.mixedPrecision = c.mixedPrecision();
    plan.onCpu = onCpu;
    plan.distributedType = c.distributedType();
    plan.numMachines = static_cast<int>(c.intField("num_machines").value_or(1));
    plan.machineRank = static_cast<int>(c.intField("machine_rank").value_or(0));
    if (plan.numMachines == 1) {
        // Listening on loopback only: torchrun's store (accelerate_loopback.py says how), and the
        // ranks' own sockets (Gloo's pairs, NCCL's bootstrap), which otherwise take the address
        // the host name resolves to, often a network one.
        plan.args = {accelerateLoopbackEntry(), "launch", "--config_file", in.configPath};
        plan.environment = {"GLOO_SOCKET_IFNAME=lo", "NCCL_SOCKET_IFNAME=lo"};
    } else {
        plan.args = {"-m", "accelerate.commands.accelerate_cli", "launch", "--config_file", in.configPath};
    }
    if (onCpu && plan.numProcesses > 1) {
        // The one CPU path that gives N ranks: torchrun's, asked for by --multi_gpu, with
        // ACCELERATE_USE_CPU making each rank a Gloo CPU process (MULTI_CPU).
        plan.environment.emplace_back("ACCELERATE_USE_CPU=1");
        plan.args.emplace_back("--multi_gpu");
        plan.distributedType = "MULTI_CPU";
    }
    plan.args.insert(plan.args.end(),
                     {"--num_processes", std::to_string(plan.numProcesses), "--mixed_precision", plan.mixedPrecision});
    if (plan.numMachines > 1)
        plan.args.insert(plan.args.end(), {"--num_machines", std::to_string(plan.numMachines), "--machine_rank",
                                           std::to_string(c.intField("machine_rank").value_or(0)), "--main_process_ip",
                                           textField(c, "main_process_ip"), "--same_network"});
    if (plan.numProcesses > 1) {
        plan.args.insert(plan.args.end(), {"--main_process_port", std::to_string(c.intField("main_process_port").value_or(0))});
        // torchrun prefixes each output line with its rank ("[default0]:") and keeps per-rank files.
        plan.args.insert(plan.args.end(), {"--tee", "3", "--log_dir", in.torchrunLogDir});
    }
    plan.args.push_back(in.script);
    plan.args.insert(plan.args.end(), in.scriptArgs.begin(), in.scriptArgs.end());
    out.plan = std::move(plan);
    return out;
}

} // namespace shardscope::config
