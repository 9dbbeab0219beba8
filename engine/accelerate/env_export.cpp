#include "engine/accelerate/env_export.h"

#include "engine/accelerate/ascii_case.h"

#include <algorithm>
#include <cctype>

namespace shardscope::config {

namespace {

class Env {
public:
    void set(const std::string& k, const std::string& v)
    {
        for (auto& e : m_vars)
            if (e.first == k) {
                e.second = v;
                return;
            }
        m_vars.emplace_back(k, v);
    }
    std::vector<std::pair<std::string, std::string>> take() { return std::move(m_vars); }

private:
    std::vector<std::pair<std::string, std::string>> m_vars;
};

// A launcher arg's value: the file's, else Accelerate's CLI default.
Value arg(const AccelerateConfig& c, const char* section, const char* key, const Value& cliDefault)
{
    const Value* v = c.nested(section, key);
    return v && !v->isNull() ? *v : cliDefault;
}

void common(const AccelerateConfig& c, Env& env, const EnvironmentOptions& o)
{
    if (c.boolField("debug"))
        env.set("ACCELERATE_DEBUG_MODE", "true");
    const Value gpu = c.field("gpu_ids");
    if (gpu.isString() && gpu.asString() != "all")
        env.set("CUDA_VISIBLE_DEVICES", gpu.asString());
    const std::string mp = c.mixedPrecision();
    env.set("ACCELERATE_MIXED_PRECISION", mp);
    if (mp == "fp8") {
        // Every fp8 launcher arg that is not None, CLI defaults included; the questionnaire
        // spellings become their own variables (which Accelerate's runtime never reads).
        const Value* fp8 = c.given().find("fp8_config");
        const std::pair<const char*, Value> defaults[] = {
            {"fp8_backend", Value()},
            {"fp8_use_autocast_during_eval", Value(false)},
            {"fp8_margin", Value(0)},
            {"fp8_interval", Value(1)},
            {"fp8_format", Value("HYBRID")},
            {"fp8_amax_history_len", Value(1024)},
            {"fp8_amax_compute_algo", Value("most_recent")},
            {"fp8_override_linear_precision", Value(Value::List{false, false, false})},
            {"fp8_opt_level", Value("O2")},
            {"fp8_enable_fsdp_float8_all_gather", Value(1)},
            {"fp8_pad_inner_dim", Value(1)},
        };
        std::vector<std::pair<std::string, Value>> args;
        for (const auto& [k, v] : defaults)
            args.emplace_back(k, v);
        if (fp8 && fp8->isMap())
            for (const auto& e : fp8->asMap()) {
                if (!e.key.isString())
                    continue;
                std::string k = e.key.asString();
                if (k.rfind("fp8", 0) != 0) // Accelerate's test: startswith("fp8")
                    k = "fp8_" + k;
                auto it = std::find_if(args.begin(), args.end(), [&](const auto& a) { return a.first == k; });
                if (it != args.end())
                    it->second = e.value;
                else
                    args.emplace_back(k, e.value);
            }
        for (const auto& [k, v] : args) {
            if (v.isNull())
                continue;
            if (k == "fp8_override_linear_precision") {
                if (v.isList() && v.asList().size() >= 3) { // Accelerate reads the first three
                    env.set("ACCELERATE_FP8_OVERRIDE_FPROP", v.asList()[0].pyStr());
                    env.set("ACCELERATE_FP8_OVERRIDE_DGRAD", v.asList()[1].pyStr());
                    env.set("ACCELERATE_FP8_OVERRIDE_WGRAD", v.asList()[2].pyStr());
                }
                continue;
            }
            env.set("ACCELERATE_" + asciiUpper(k), v.pyStr());
        }
    }
    if (o.enableCpuAffinity)
        env.set("ACCELERATE_CPU_AFFINITY", "1");
}

// accelerate launch's num_cpu_threads_per_process (_validate_launch_command).
int cpuThreadsPerProcess(const AccelerateConfig& c, const EnvironmentOptions& o)
{
    if (o.inheritedOmpThreads)
        return *o.inheritedOmpThreads;
    const auto nproc = c.intField("num_processes").value_or(1);
    const auto machines = std::max<std::int64_t>(1, c.intField("num_machines").value_or(1));
    if ((c.boolField("use_cpu") || o.cpuFlag) && nproc >= 1 && o.physicalCores > 0) {
        const auto local = std::max<std::int64_t>(nproc / machines, 1);
        const auto threads = o.physicalCores / local;
        if (threads > 1)
            return static_cast<int>(threads);
    }
    return 1;
}

void dynamo(const AccelerateConfig& c, Env& env)
{
    const Value backend = arg(c, "dynamo_config", "dynamo_backend", Value("no"));
    env.set("ACCELERATE_DYNAMO_BACKEND", asciiUpper(backend.pyStr()));
    env.set("ACCELERATE_DYNAMO_MODE", arg(c, "dynamo_config", "dynamo_mode", Value("default")).pyStr());
    env.set("ACCELERATE_DYNAMO_USE_FULLGRAPH", arg(c, "dynamo_config", "dynamo_use_fullgraph", Value(false)).pyStr());
    env.set("ACCELERATE_DYNAMO_USE_DYNAMIC", arg(c, "dynamo_config", "dynamo_use_dynamic", Value(false)).pyStr());
    env.set("ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION",
            arg(c, "dynamo_config", "dynamo_use_regional_compilation", Value(false)).pyStr());
}

void parallelism(const AccelerateConfig& c, Env& env)
{
    const Value* pc = c.given().find("parallelism_config");
    if (!pc || !pc->isMap() || pc->asMap().empty())
        return;
    env.set("ACCELERATE_USE_PARALLELISM_CONFIG", "true");
    auto p = [&](const char* k, const Value& d) { return arg(c, "parallelism_config", k, d); };
    env.set("PARALLELISM_CONFIG_DP_REPLICATE_SIZE", p("parallelism_config_dp_replicate_size", Value(1)).pyStr());
    env.set("PARALLELISM_CONFIG_DP_SHARD_SIZE", p("parallelism_config_dp_shard_size", Value(1)).pyStr());
    env.set("PARALLELISM_CONFIG_TP_SIZE", p("parallelism_config_tp_size", Value(1)).pyStr());
    const Value cp = p("parallelism_config_cp_size", Value(1));
    env.set("PARALLELISM_CONFIG_CP_SIZE", cp.pyStr());
    env.set("PARALLELISM_CONFIG_CP_BACKEND", p("parallelism_config_cp_backend", Value("torch")).pyStr());
    const Value sp = p("parallelism_config_sp_size", Value(1));
    env.set("PARALLELISM_CONFIG_SP_SIZE", sp.pyStr());
    env.set("PARALLELISM_CONFIG_SP_BACKEND", p("parallelism_config_sp_backend", Value("deepspeed")).pyStr());
    if (cp.isInt() && cp.asInt() > 1)
        env.set("PARALLELISM_CONFIG_CP_COMM_STRATEGY", p("parallelism_config_cp_comm_strategy", Value("allgather")).pyStr());
    if (sp.isInt() && sp.asInt() > 1) {
        env.set("PARALLELISM_CONFIG_SP_SEQ_LENGTH", p("parallelism_config_sp_seq_length", Value()).pyStr());
        env.set("PARALLELISM_CONFIG_SP_SEQ_LENGTH_IS_VARIABLE",
                p("parallelism_config_sp_seq_length_is_variable", Value(true)).pyStr());
        env.set("PARALLELISM_CONFIG_SP_ATTN_IMPLEMENTATION",
                p("parallelism_config_sp_attn_implementation", Value("sdpa")).pyStr());
    }
}

void fsdp(const AccelerateConfig& c, Env& env, const EnvironmentOptions& o)
{
    env.set("ACCELERATE_USE_FSDP", "true");
    auto f = [&](const char* k, const Value& d) {
        const Value* v = c.nested("fsdp_config", k);
        if (!v) // a key without the fsdp_ prefix is prefixed by the launcher
            v = c.nested("fsdp_config", std::string(k).substr(5).c_str());
        return v && !v->isNull() ? *v : d;
    };
    env.set("FSDP_VERSION", f("fsdp_version", Value("1")).pyStr());
    Value strategy = f("fsdp_sharding_strategy", Value("FULL_SHARD"));
    const Value raf = f("fsdp_reshard_after_forward", Value("true"));
    // Accelerate exports the CLI default FULL_SHARD when the file has only the v1 strategy in
    // fsdp_reshard_after_forward; Shardscope exports what the user chose (docs/CONFIG.md).
    if (o.honourFsdp1Strategy && !c.nested("fsdp_config", "fsdp_sharding_strategy") && raf.isString()
        && f("fsdp_version", Value(1)).pyStr() == "1" && asciiUpper(raf.asString()) != "TRUE"
        && asciiUpper(raf.asString()) != "FALSE")
        strategy = Value(asciiUpper(raf.asString()));
    env.set("FSDP_SHARDING_STRATEGY", strategy.pyStr());
    env.set("FSDP_RESHARD_AFTER_FORWARD", asciiLower(raf.pyStr()));
    env.set("FSDP_OFFLOAD_PARAMS", asciiLower(f("fsdp_offload_params", Value("false")).pyStr()));
    env.set("FSDP_MIN_NUM_PARAMS", f("fsdp_min_num_params", Value(100000000)).pyStr());
    for (auto [k, var] : {std::pair{"fsdp_auto_wrap_policy", "FSDP_AUTO_WRAP_POLICY"},
                          {"fsdp_transformer_layer_cls_to_wrap", "FSDP_TRANSFORMER_CLS_TO_WRAP"},
                          {"fsdp_backward_prefetch", "FSDP_BACKWARD_PREFETCH"},
                          {"fsdp_state_dict_type", "FSDP_STATE_DICT_TYPE"}}) {
        const Value v = f(k, Value());
        if (!v.isNull())
            env.set(var, v.pyStr());
    }
    env.set("FSDP_FORWARD_PREFETCH", asciiLower(f("fsdp_forward_prefetch", Value("false")).pyStr()));
    env.set("FSDP_USE_ORIG_PARAMS", asciiLower(f("fsdp_use_orig_params", Value("true")).pyStr()));
    env.set("FSDP_CPU_RAM_EFFICIENT_LOADING", asciiLower(f("fsdp_cpu_ram_efficient_loading", Value("true")).pyStr()));
    env.set("FSDP_SYNC_MODULE_STATES", asciiLower(f("fsdp_sync_module_states", Value("true")).pyStr()));
    env.set("FSDP_ACTIVATION_CHECKPOINTING", asciiLower(f("fsdp_activation_checkpointing", Value("false")).pyStr()));
    env.set("FSDP_ACTIVATION_CHECKPOINTING_OFFLOAD",
            asciiLower(f("fsdp_activation_checkpointing_offload", Value("false")).pyStr()));
    if (const Value v = f("fsdp_ignored_modules", Value()); !v.isNull())
        env.set("FSDP_IGNORED_MODULES", v.pyStr());
}

void megatron(const AccelerateConfig& c, Env& env)
{
    env.set("ACCELERATE_USE_MEGATRON_LM", "true");
    auto m = [&](const char* k, const Value& d) { return arg(c, "megatron_lm_config", k, d); };
    env.set("MEGATRON_LM_TP_DEGREE", m("megatron_lm_tp_degree", Value(1)).pyStr());
    env.set("MEGATRON_LM_PP_DEGREE", m("megatron_lm_pp_degree", Value(1)).pyStr());
    env.set("MEGATRON_LM_GRADIENT_CLIPPING", m("megatron_lm_gradient_clipping", Value(1.0)).pyStr());
    env.set("MEGATRON_LM_USE_CUSTOM_FSDP", m("megatron_lm_use_custom_fsdp", Value(false)).pyStr());
    if (const Value* sec = c.given().find("megatron_lm_config"); sec && sec->isMap())
        for (const auto& e : sec->asMap()) {
            if (!e.key.isString() || e.value.isNull())
                continue;
            const std::string name = asciiUpper(e.key.asString());
            if (name != "MEGATRON_LM_TP_DEGREE" && name != "MEGATRON_LM_PP_DEGREE" && name != "MEGATRON_LM_GRADIENT_CLIPPING"
                && name != "MEGATRON_LM_USE_CUSTOM_FSDP")
                env.set(name, e.value.pyStr());
        }
}

} // namespace

LauncherKind launcherFor(const AccelerateConfig& c, bool cpuFlag)
{
    if (c.kind() == ConfigKind::SageMaker)
        return LauncherKind::SageMaker;
    const std::string t = c.distributedType();
    const bool cpu = cpuFlag;
    if (t == "DEEPSPEED" && !cpu)
        return LauncherKind::DeepSpeed;
    if ((t == "FSDP" || t == "MEGATRON_LM" || (t.rfind("MULTI_", 0) == 0 && t != "MULTI_CPU")) && !cpu)
        return LauncherKind::MultiGpu;
    if (t == "XLA" && !cpu)
        return LauncherKind::Tpu;
    return LauncherKind::Simple;
}

std::vector<std::pair<std::string, std::string>> launchEnvironment(const AccelerateConfig& c, const EnvironmentOptions& o)
{
    Env env;
    const LauncherKind kind = launcherFor(c, o.cpuFlag);
    const std::string t = c.distributedType();
    switch (kind) {
    case LauncherKind::Simple: {
        common(c, env, o);
        env.set("ACCELERATE_USE_CPU", c.boolField("use_cpu") || o.cpuFlag ? "True" : "False");
        const auto nproc = c.intField("num_processes").value_or(1);
        const auto machines = c.intField("num_machines").value_or(1);
        if (nproc > 1 || machines > 1) {
            const Value ip = c.field("main_process_ip");
            const Value port = c.field("main_process_port");
            env.set("MASTER_ADDR", ip.isNull() ? "127.0.0.1" : ip.pyStr());
            env.set("MASTER_PORT", port.isNull() ? "29500" : port.pyStr());
        }
        if (c.boolField("use_cpu") || o.cpuFlag) {
            env.set("KMP_AFFINITY", "granularity=fine,compact,1,0");
            env.set("KMP_BLOCKTIME", "1");
        }
        dynamo(c, env);
        env.set("OMP_NUM_THREADS", std::to_string(cpuThreadsPerProcess(c, o)));
        break;
    }
    case LauncherKind::MultiGpu:
        common(c, env, o);
        dynamo(c, env);
        if (t == "FSDP")
            fsdp(c, env, o);
        if (t == "MEGATRON_LM")
            megatron(c, env);
        parallelism(c, env);
        env.set("OMP_NUM_THREADS", std::to_string(cpuThreadsPerProcess(c, o)));
        break;
    case LauncherKind::DeepSpeed: {
        common(c, env, o);
        std::string fields;
        if (const Value* ds = c.given().find("deepspeed_config"); ds && ds->isMap())
            for (const auto& e : ds->asMap())
                if (e.key.isString())
                    fields += (fields.empty() ? "" : ",") + asciiLower(e.key.asString());
        if (!c.field("mixed_precision").isNull())
            fields += (fields.empty() ? "" : ",") + std::string("mixed_precision");
        env.set("ACCELERATE_CONFIG_DS_FIELDS", fields);
        env.set("ACCELERATE_USE_DEEPSPEED", "true");
        auto d = [&](const char* k) { return c.nested("deepspeed_config", k); };
        auto put = [&](const char* var, const char* k, bool lowerCase) {
            if (const Value* v = d(k); v && !v->isNull())
                env.set(var, lowerCase ? asciiLower(v->pyStr()) : v->pyStr());
        };
        put("ACCELERATE_DEEPSPEED_ZERO_STAGE", "zero_stage", false);
        put("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "gradient_accumulation_steps", false);
        put("ACCELERATE_GRADIENT_CLIPPING", "gradient_clipping", true);
        put("ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", "offload_optimizer_device", true);
        put("ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE", "offload_param_device", true);
        put("ACCELERATE_DEEPSPEED_ZERO3_INIT", "zero3_init_flag", true);
        put("ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL", "zero3_save_16bit_model", true);
        put("ACCELERATE_DEEPSPEED_CONFIG_FILE", "deepspeed_config_file", false);
        put("ACCELERATE_DEEPSPEED_MOE_LAYER_CLS_NAMES", "deepspeed_moe_layer_cls_names", false);
        parallelism(c, env);
        // One machine: Accelerate hands the ranks to torchrun, which sets OMP_NUM_THREADS=1 for
        // several local processes when the environment has none.
        const auto machines = std::max<std::int64_t>(1, c.intField("num_machines").value_or(1));
        if (!o.inheritedOmpThreads && machines == 1 && c.intField("num_processes").value_or(1) > 1)
            env.set("OMP_NUM_THREADS", "1");
        break;
    }
    case LauncherKind::Tpu:
        if (c.boolField("debug"))
            env.set("ACCELERATE_DEBUG_MODE", "true");
        if (c.mixedPrecision() == "bf16")
            env.set(c.boolField("downcast_bf16") ? "XLA_DOWNCAST_BF16" : "XLA_USE_BF16", "1");
        break;
    case LauncherKind::SageMaker:
        env.set("ACCELERATE_USE_SAGEMAKER", "true");
        env.set("ACCELERATE_MIXED_PRECISION", c.mixedPrecision());
        dynamo(c, env);
        env.set("ACCELERATE_SAGEMAKER_DISTRIBUTED_TYPE", c.field("distributed_type").pyStr());
        break;
    }
    return env.take();
}

} // namespace shardscope::config
