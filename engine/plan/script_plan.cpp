#include "engine/plan/script_plan.h"

#include <filesystem>

namespace shardscope::config {

namespace {

// The distributed types a script run launches; the others (TPU, XPU, NPU, ...) need hardware and
// launchers this tool does not drive.
bool knownScriptType(const std::string& type)
{
    return type == "NO" || type == "MULTI_CPU" || type == "MULTI_GPU" || type == "FSDP" || type == "DEEPSPEED"
           || type == "MEGATRON_LM";
}

bool isSharding(const std::string& type) { return type == "FSDP" || type == "DEEPSPEED" || type == "MEGATRON_LM"; }

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
    if (c.intField("num_machines").value_or(1) > 1)
        error("num_machines", "a script run over several machines is not supported yet; set num_machines: 1, or run "
                              "`accelerate launch` on each machine yourself");
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
    if (n > 1 && !onCpu && n > in.machine.gpuCount)
        error("num_processes", "num_processes is " + std::to_string(n) + " but this machine has "
                                   + std::to_string(in.machine.gpuCount) + " GPU(s)");
    std::error_code ec;
    if (in.script.empty())
        error("--script", "no script given; name the training script with --script train.py");
    else if (!std::filesystem::is_regular_file(in.script, ec))
        error("--script", "the script " + in.script + " does not exist (or is not a file); check the path");
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
    plan.args = {"-m", "accelerate.commands.accelerate_cli", "launch", "--config_file", in.configPath};
    if (onCpu && plan.numProcesses > 1) {
        // The one CPU path that gives N ranks: torchrun's, asked for by --multi_gpu, with
        // ACCELERATE_USE_CPU making each rank a Gloo CPU process (MULTI_CPU).
        plan.environment.emplace_back("ACCELERATE_USE_CPU=1");
        plan.args.emplace_back("--multi_gpu");
        plan.distributedType = "MULTI_CPU";
    }
    plan.args.insert(plan.args.end(),
                     {"--num_processes", std::to_string(plan.numProcesses), "--mixed_precision", plan.mixedPrecision});
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
