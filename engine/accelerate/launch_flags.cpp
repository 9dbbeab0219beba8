#include "engine/accelerate/launch_flags.h"

#include "engine/accelerate/ascii_case.h"
#include "engine/accelerate/questionnaire.h"

#include <algorithm>

namespace shardscope::config {

namespace {

using K = FlagValueKind;
using U = LaunchFlagUse;

AccelerateLaunchFlag native(const char* name, K kind, const char* what) { return {name, kind, U::Native, "", "", what}; }
AccelerateLaunchFlag key(const char* name, K kind, const char* section, const char* configKey)
{
    const std::string where = std::string(*section ? section + std::string(".") : "") + configKey;
    return {name, kind, U::ConfigKey, section, configKey, "the config's `" + where + "`, over the file's"};
}
AccelerateLaunchFlag noted(const char* name, K kind, const char* what) { return {name, kind, U::Noted, "", "", what}; }
AccelerateLaunchFlag refused(const char* name, K kind, const char* what) { return {name, kind, U::Refused, "", "", what}; }

constexpr const char* kTpu = "TPUs are not supported by Shardscope; run on GPUs or CPUs";
constexpr const char* kLogs = "accepted; each rank's output is kept in the run folder's logs/ (and shown on the Run page), "
                              "as Shardscope's launcher starts the ranks itself";

std::vector<AccelerateLaunchFlag> makeFlags()
{
    return {
        native("config_file", K::Text, "the same: the Accelerate config file"),
        noted("quiet", K::None, "accepted; Shardscope's launcher prints only its own progress lines"),
        refused("module", K::None,
                "Shardscope runs a script file: give the module's file instead (python -m pkg.train is pkg/train.py)"),
        refused("no_python", K::None,
                "Shardscope runs Python scripts through accelerate launch; start other programs with accelerate launch"),
        key("debug", K::None, "", "debug"),
        key("cpu", K::None, "", "use_cpu"),
        key("multi_gpu", K::None, "", "distributed_type"),
        refused("tpu", K::None, kTpu),
        native("mixed_precision", K::Text, "the same (and bf16-pure, the engine's own mode)"),
        native("num_processes", K::Int, "the same: ranks over every machine"),
        native("num_machines", K::Int, "the same"),
        noted("num_cpu_threads_per_process", K::Int,
              "sets OMP_NUM_THREADS for the ranks, as Accelerate does (the engine's intra-op threads)"),
        refused("enable_cpu_affinity", K::None,
                "Shardscope's launcher sets no CPU affinity (Accelerate's runtime does so on NVIDIA GPUs only); for a "
                "script, set ACCELERATE_CPU_AFFINITY=1 in the environment"),
        key("dynamo_backend", K::Text, "dynamo_config", "dynamo_backend"),
        key("dynamo_mode", K::Text, "dynamo_config", "dynamo_mode"),
        key("dynamo_use_fullgraph", K::None, "dynamo_config", "dynamo_use_fullgraph"),
        key("dynamo_use_dynamic", K::None, "dynamo_config", "dynamo_use_dynamic"),
        key("dynamo_use_regional_compilation", K::None, "dynamo_config", "dynamo_use_regional_compilation"),
        key("use_deepspeed", K::None, "", "distributed_type"),
        key("use_fsdp", K::None, "", "distributed_type"),
        noted("use_parallelism_config", K::None,
              "the --parallelism_config_* flags are used (Accelerate's rule: only with --use_fsdp --fsdp_version 2)"),
        refused("use_megatron_lm", K::None, "Megatron-LM is not supported by Shardscope's engine; use FSDP or DeepSpeed"),
        key("gpu_ids", K::Text, "", "gpu_ids"),
        key("same_network", K::None, "", "same_network"),
        native("machine_rank", K::Int, "the same"),
        native("main_process_ip", K::Text, "the same"),
        native("main_process_port", K::Int, "the same"),
        noted("tee", K::Text, kLogs),
        noted("log_dir", K::Text, kLogs),
        noted("role", K::Text, "accepted; torchrun's role name, which Shardscope's ranks do not have"),
        noted("rdzv_backend", K::Text,
              "accepted; Shardscope's launchers meet through machine 0's launcher (--rendezvous_timeout), whatever "
              "the backend, and a script over several machines gets the static rendezvous"),
        noted("rdzv_conf", K::Text,
              "accepted; torchrun's rendezvous settings: Shardscope's launcher has its own rendezvous "
              "(--rendezvous_timeout)"),
        noted("max_restarts", K::Int,
              "0 is accepted; more is refused: Shardscope does not restart failed ranks; go on with the run by "
              "--continue_run (a SLURM job requeues and resumes itself)"),
        noted("monitor_interval", K::Text, "accepted; Shardscope's launcher watches its ranks' heartbeats (--heartbeat_timeout)"),
        refused("tpu_cluster", K::None, kTpu),
        refused("no_tpu_cluster", K::None, kTpu),
        refused("tpu_use_sudo", K::None, kTpu),
        refused("vm", K::Text, kTpu),
        refused("env", K::Text, kTpu),
        key("main_training_function", K::Text, "", "main_training_function"),
        noted("downcast_bf16", K::None, "accepted; TPU only, so no effect here, as in Accelerate on GPUs and CPUs"),
        key("deepspeed_config_file", K::Path, "deepspeed_config", "deepspeed_config_file"),
        key("zero_stage", K::Int, "deepspeed_config", "zero_stage"),
        key("offload_optimizer_device", K::Text, "deepspeed_config", "offload_optimizer_device"),
        key("offload_param_device", K::Text, "deepspeed_config", "offload_param_device"),
        key("offload_optimizer_nvme_path", K::Path, "deepspeed_config", "offload_optimizer_nvme_path"),
        key("offload_param_nvme_path", K::Path, "deepspeed_config", "offload_param_nvme_path"),
        key("gradient_accumulation_steps", K::Int, "deepspeed_config", "gradient_accumulation_steps"),
        key("gradient_clipping", K::Float, "deepspeed_config", "gradient_clipping"),
        key("zero3_init_flag", K::Bool, "deepspeed_config", "zero3_init_flag"),
        key("zero3_save_16bit_model", K::Bool, "deepspeed_config", "zero3_save_16bit_model"),
        key("deepspeed_hostfile", K::Path, "deepspeed_config", "deepspeed_hostfile"),
        key("deepspeed_exclusion_filter", K::Text, "deepspeed_config", "deepspeed_exclusion_filter"),
        key("deepspeed_inclusion_filter", K::Text, "deepspeed_config", "deepspeed_inclusion_filter"),
        key("deepspeed_multinode_launcher", K::Text, "deepspeed_config", "deepspeed_multinode_launcher"),
        key("deepspeed_moe_layer_cls_names", K::Text, "deepspeed_config", "deepspeed_moe_layer_cls_names"),
        key("fsdp_version", K::Int, "fsdp_config", "fsdp_version"),
        key("fsdp_offload_params", K::Bool, "fsdp_config", "fsdp_offload_params"),
        key("fsdp_min_num_params", K::Int, "fsdp_config", "fsdp_min_num_params"),
        key("fsdp_sharding_strategy", K::Text, "fsdp_config", "fsdp_sharding_strategy"),
        key("fsdp_reshard_after_forward", K::Bool, "fsdp_config", "fsdp_reshard_after_forward"),
        key("fsdp_auto_wrap_policy", K::Text, "fsdp_config", "fsdp_auto_wrap_policy"),
        key("fsdp_transformer_layer_cls_to_wrap", K::Text, "fsdp_config", "fsdp_transformer_layer_cls_to_wrap"),
        key("fsdp_backward_prefetch", K::Text, "fsdp_config", "fsdp_backward_prefetch"),
        key("fsdp_state_dict_type", K::Text, "fsdp_config", "fsdp_state_dict_type"),
        key("fsdp_forward_prefetch", K::Bool, "fsdp_config", "fsdp_forward_prefetch"),
        key("fsdp_use_orig_params", K::Bool, "fsdp_config", "fsdp_use_orig_params"),
        key("fsdp_cpu_ram_efficient_loading", K::Bool, "fsdp_config", "fsdp_cpu_ram_efficient_loading"),
        key("fsdp_sync_module_states", K::Bool, "fsdp_config", "fsdp_sync_module_states"),
        key("fsdp_activation_checkpointing", K::Bool, "fsdp_config", "fsdp_activation_checkpointing"),
        key("fsdp_activation_checkpointing_offload", K::Bool, "fsdp_config", "fsdp_activation_checkpointing_offload"),
        refused("megatron_lm_", K::Text, "Megatron-LM is not supported by Shardscope's engine; use FSDP or DeepSpeed"),
        key("fp8_backend", K::Text, "fp8_config", "backend"),
        key("fp8_use_autocast_during_eval", K::None, "fp8_config", "use_autocast_during_eval"),
        key("fp8_margin", K::Int, "fp8_config", "margin"),
        key("fp8_interval", K::Int, "fp8_config", "interval"),
        key("fp8_format", K::Text, "fp8_config", "fp8_format"),
        key("fp8_amax_history_len", K::Int, "fp8_config", "amax_history_len"),
        key("fp8_amax_compute_algo", K::Text, "fp8_config", "amax_compute_algo"),
        key("fp8_override_linear_precision", K::BoolList, "fp8_config", "override_linear_precision"),
        key("fp8_opt_level", K::Text, "fp8_config", "opt_level"),
        key("fp8_enable_fsdp_float8_all_gather", K::Bool, "fp8_config", "enable_fsdp_float8_all_gather"),
        key("fp8_pad_inner_dim", K::Bool, "fp8_config", "pad_inner_dim"),
        refused("aws_", K::Text, "SageMaker is not supported by Shardscope; launch on this machine or on SLURM"),
        key("mpirun_hostfile", K::Path, "mpirun_config", "mpirun_hostfile"),
        key("parallelism_config_dp_replicate_size", K::Int, "parallelism_config", "parallelism_config_dp_replicate_size"),
        key("parallelism_config_dp_shard_size", K::Int, "parallelism_config", "parallelism_config_dp_shard_size"),
        key("parallelism_config_tp_size", K::Int, "parallelism_config", "parallelism_config_tp_size"),
        key("parallelism_config_cp_size", K::Int, "parallelism_config", "parallelism_config_cp_size"),
        key("parallelism_config_cp_backend", K::Text, "parallelism_config", "parallelism_config_cp_backend"),
        key("parallelism_config_cp_comm_strategy", K::Text, "parallelism_config", "parallelism_config_cp_comm_strategy"),
        key("parallelism_config_sp_size", K::Int, "parallelism_config", "parallelism_config_sp_size"),
        key("parallelism_config_sp_backend", K::Text, "parallelism_config", "parallelism_config_sp_backend"),
        key("parallelism_config_sp_seq_length", K::Int, "parallelism_config", "parallelism_config_sp_seq_length"),
        key("parallelism_config_sp_seq_length_is_variable", K::Bool, "parallelism_config",
            "parallelism_config_sp_seq_length_is_variable"),
        key("parallelism_config_sp_attn_implementation", K::Text, "parallelism_config",
            "parallelism_config_sp_attn_implementation"),
    };
}

// The flag's value as accelerate launch hands it on: numbers and booleans as such where they read
// as one (the text otherwise, which validation then reports with the key).
Value valueOf(const AccelerateLaunchFlag& flag, const std::optional<std::string>& given)
{
    if (flag.value == K::None)
        return Value(true);
    const std::string text = given.value_or("");
    switch (flag.value) {
    case K::Int:
        if (auto n = pythonInt(text))
            return Value(*n);
        break;
    case K::Float:
        if (auto x = pythonFloat(text))
            return Value(*x);
        break;
    case K::Bool:
        if (const Value v(text); accelerateBool(&v))
            return Value(*accelerateBool(&v));
        break;
    case K::BoolList: { // Accelerate: "true,false,false", each item by str_to_bool, which gives 1 or 0
        Value::List items;
        std::size_t start = 0;
        for (std::size_t comma; start <= text.size(); start = comma + 1) {
            comma = std::min(text.find(',', start), text.size());
            const Value item(text.substr(start, comma - start));
            items.push_back(accelerateBool(&item) ? Value(*accelerateBool(&item) ? 1 : 0) : item);
        }
        return Value(std::move(items));
    }
    default:
        break;
    }
    return Value(text);
}

void setKey(AccelerateConfig& config, const AccelerateLaunchFlag& flag, Value value)
{
    if (flag.name == "multi_gpu" || flag.name == "use_fsdp" || flag.name == "use_deepspeed")
        value = Value(flag.name == "multi_gpu" ? "MULTI_GPU" : flag.name == "use_fsdp" ? "FSDP" : "DEEPSPEED");
    // The file's spelling: the flags take lower case. accelerate launch exports --fp8_backend's as
    // given, which its runtime's FP8BackendType("te") then refuses; upper case runs.
    else if ((flag.name == "fp8_backend" || flag.name == "dynamo_backend") && value.isString())
        value = Value(asciiUpper(value.asString()));
    if (flag.section.empty()) {
        config.setField(flag.key, std::move(value));
        return;
    }
    Value section = config.field(flag.section);
    if (!section.isMap())
        section = Value::emptyMap();
    section.set(flag.key, std::move(value));
    config.setField(flag.section, std::move(section));
}

bool given(const std::vector<GivenLaunchFlag>& flags, std::string_view name, const char* value = nullptr)
{
    return std::any_of(flags.begin(), flags.end(), [&](const GivenLaunchFlag& f) {
        const AccelerateLaunchFlag* known = findAccelerateLaunchFlag(f.name);
        return known && known->name == name && (!value || f.value.value_or("") == value);
    });
}

// Accelerate's own checks on the flags (made before the config file is read), and the uses the
// table cannot say alone.
void checkFlags(const AccelerateConfig& file, const std::vector<GivenLaunchFlag>& flags, std::vector<Diagnostic>& problems)
{
    int types = 0;
    for (const char* t : {"cpu", "multi_gpu", "tpu", "use_deepspeed", "use_fsdp"})
        types += given(flags, t) ? 1 : 0;
    if (types > 1)
        problems.push_back({Severity::Error, "--use_fsdp",
                            "You can only use one of `--cpu`, `--multi_gpu`, `--tpu`, `--use_deepspeed`, `--use_fsdp` at a "
                            "time (accelerate launch refuses it too); keep one"});
    // Accelerate's check is `not args.use_fsdp or args.fsdp_version == 1`, and the flag's version is
    // text ("1" == 1 is false): --use_fsdp is what it asks for. FSDP1 is refused by validation.
    if (given(flags, "use_parallelism_config") && !given(flags, "use_fsdp"))
        problems.push_back({Severity::Error, "--use_parallelism_config",
                            "You cannot use `--use_parallelism_config` without `--use_fsdp` and `--fsdp_version=2` "
                            "(accelerate launch's rule on flags); add --use_fsdp, or put the sizes in the config's "
                            "parallelism_config"});
    const Value section = file.field("parallelism_config");
    for (const auto& f : flags)
        if (const AccelerateLaunchFlag* known = findAccelerateLaunchFlag(f.name);
            known && known->section == "parallelism_config" && !given(flags, "use_parallelism_config")
            && !(section.isMap() && !section.asMap().empty())) {
            problems.push_back({Severity::Error, "--" + known->name,
                                "--" + known->name
                                    + " is used by accelerate launch only with --use_parallelism_config (or a "
                                      "parallelism_config section in the config file); add --use_parallelism_config"});
            break;
        }
    for (const auto& f : flags)
        if (const AccelerateLaunchFlag* known = findAccelerateLaunchFlag(f.name); known && known->name == "max_restarts") {
            const auto restarts = pythonInt(f.value.value_or(""));
            if (!restarts || *restarts != 0)
                problems.push_back(
                    {Severity::Error, "--max_restarts", "--max_restarts " + f.value.value_or("") + ": " + known->what});
        }
}

} // namespace

const std::vector<AccelerateLaunchFlag>& accelerateLaunchFlags()
{
    static const std::vector<AccelerateLaunchFlag> flags = makeFlags();
    return flags;
}

namespace {

// "--fsdp-version" as "fsdp_version".
std::string bareName(std::string_view name)
{
    const auto start = name.find_first_not_of('-');
    std::string bare(start == std::string_view::npos ? std::string_view() : name.substr(start));
    std::replace(bare.begin(), bare.end(), '-', '_');
    return bare;
}

} // namespace

const AccelerateLaunchFlag* findAccelerateLaunchFlag(std::string_view name)
{
    std::string bare = bareName(name);
    // Accelerate's short options.
    if (bare == "q")
        bare = "quiet";
    else if (bare == "m")
        bare = "module";
    else if (bare == "t")
        bare = "tee";
    for (const auto& flag : accelerateLaunchFlags()) {
        const bool prefix = flag.name.back() == '_'; // megatron_lm_, aws_: every flag of the group
        if (prefix ? bare.rfind(flag.name, 0) == 0 && bare.size() > flag.name.size() : bare == flag.name)
            return &flag;
    }
    return nullptr;
}

AccelerateConfig applyLaunchFlags(const AccelerateConfig& config, const std::vector<GivenLaunchFlag>& flags,
                                  std::vector<Diagnostic>& problems)
{
    // The file as accelerate launch reads it first (unprefixed keys named, a later duplicate
    // winning), so that a flag replaces the key that would have counted.
    AccelerateConfig merged = normalizeConfig(config);
    for (const auto& f : flags) {
        const AccelerateLaunchFlag* flag = findAccelerateLaunchFlag(f.name);
        if (!flag) {
            problems.push_back({Severity::Error, f.name, f.name + " is not a flag of accelerate launch"});
            continue;
        }
        const std::string shown = "--" + bareName(f.name);
        if (flag->value == K::None && f.value) { // argparse: "ignored explicit argument"
            problems.push_back({Severity::Error, shown, shown + " takes no value (it is a switch); give " + shown + " alone"});
            continue;
        }
        if (flag->use == LaunchFlagUse::Refused)
            problems.push_back({Severity::Error, shown, shown + " is not supported: " + flag->what});
        else if (flag->use == LaunchFlagUse::ConfigKey)
            setKey(merged, *flag, valueOf(*flag, f.value));
    }
    checkFlags(config, flags, problems);
    return normalizeConfig(merged);
}

} // namespace shardscope::config
