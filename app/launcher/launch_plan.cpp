#include "app/launcher/launch_plan.h"

#include "engine/config/deepspeed_json.h"
#include "engine/config/env_export.h"

#include <filesystem>

namespace shardscope {

namespace {

using config::AccelerateConfig;
using config::Value;

std::string text(const Value* v, const std::string& fallback = {})
{
    if (!v || v->isNull())
        return fallback;
    if (v->kind() == Value::Kind::String)
        return v->asString();
    if (v->kind() == Value::Kind::Int)
        return std::to_string(v->asInt());
    if (v->kind() == Value::Kind::Bool)
        return v->asBool() ? "true" : "false";
    return fallback;
}

bool truthy(const Value* v)
{
    if (!v || v->isNull())
        return false;
    if (v->kind() == Value::Kind::Bool)
        return v->asBool();
    const std::string s = text(v);
    return s == "true" || s == "True" || s == "1";
}

Error unsupported(const std::string& key, const std::string& value, const std::string& fix)
{
    return makeError("config: " + key + ": " + value + " is not supported by Shardscope's engine yet; " + fix);
}

// FSDP: Accelerate's fsdp_config keys to the engine's sharding options.
Result<void> planFsdp(const AccelerateConfig& c, LaunchPlan& plan)
{
    auto key = [&](const char* k) { return c.nested("fsdp_config", k); };
    std::string strategy = text(key("fsdp_sharding_strategy"), "FULL_SHARD");
    // Legacy numeric values (Accelerate < 0.22): 1 FULL_SHARD, 2 SHARD_GRAD_OP, 3 NO_SHARD, ...
    static const char* kByNumber[] = {"", "FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2"};
    if (strategy.size() == 1 && strategy[0] >= '1' && strategy[0] <= '5')
        strategy = kByNumber[strategy[0] - '0'];
    if (text(key("fsdp_version"), "1") == "2") {
        // FSDP2 has no strategy names: reshard_after_forward true is FULL_SHARD, false SHARD_GRAD_OP.
        const Value* reshard = key("fsdp_reshard_after_forward");
        strategy = !reshard || truthy(reshard) || text(reshard) == "FULL_SHARD" ? "FULL_SHARD" : "SHARD_GRAD_OP";
    }
    // A key the file does not set takes `accelerate launch`'s CLI default (reference §2.4):
    // use_orig_params, cpu_ram_efficient_loading and sync_module_states default to true there.
    auto flag = [&](const char* k, bool absent) {
        const Value* v = key(k);
        return v && !v->isNull() ? truthy(v) : absent;
    };
    const bool efficient = flag("fsdp_cpu_ram_efficient_loading", true);
    // Accelerate's launch check (accelerate-config-reference.md §4.4).
    if (efficient && !flag("fsdp_sync_module_states", true))
        return makeError("config: fsdp_config: When using `--fsdp_cpu_ram_efficient_loading` set "
                         "`--fsdp_sync_module_states` to `True`");
    if (strategy == "NO_SHARD") { // DDP-equivalent: the engine's DDP, which neither offloads nor recomputes
        for (const char* k : {"fsdp_offload_params", "fsdp_activation_checkpointing"})
            if (truthy(key(k)))
                return unsupported(std::string("fsdp_config.") + k, "true with NO_SHARD",
                                   "use FULL_SHARD or SHARD_GRAD_OP, or set it to false");
        return {};
    }
    plan.workerArgs.insert(plan.workerArgs.end(), {"--fsdp_sharding_strategy", strategy});
    const std::string policy = text(key("fsdp_auto_wrap_policy"), "NO_WRAP");
    plan.workerArgs.insert(plan.workerArgs.end(), {"--fsdp_auto_wrap_policy", policy});
    if (policy == "TRANSFORMER_BASED_WRAP") {
        const std::string classes = text(key("fsdp_transformer_layer_cls_to_wrap"), "GPTBlock");
        plan.workerArgs.push_back("--fsdp_transformer_layer_cls_to_wrap");
        std::size_t start = 0;
        while (start <= classes.size()) {
            const auto comma = classes.find(',', start);
            std::string name = classes.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
            name.erase(0, name.find_first_not_of(' '));
            name.erase(name.find_last_not_of(' ') + 1);
            if (!name.empty())
                plan.workerArgs.push_back(name);
            if (comma == std::string::npos)
                break;
            start = comma + 1;
        }
    } else if (policy == "SIZE_BASED_WRAP") {
        plan.workerArgs.insert(plan.workerArgs.end(), {"--fsdp_min_num_params", text(key("fsdp_min_num_params"), "100000000")});
    }
    const std::string prefetch = text(key("fsdp_backward_prefetch"), "NO_PREFETCH");
    if (prefetch == "BACKWARD_PRE" || prefetch == "BACKWARD_POST")
        plan.workerArgs.insert(plan.workerArgs.end(), {"--fsdp_backward_prefetch", prefetch});
    if (truthy(key("fsdp_forward_prefetch")))
        plan.workerArgs.push_back("--fsdp_forward_prefetch");
    if (truthy(key("fsdp_offload_params")))
        plan.workerArgs.push_back("--fsdp_offload_params");
    if (efficient)
        plan.workerArgs.push_back("--fsdp_cpu_ram_efficient_loading");
    if (flag("fsdp_use_orig_params", true))
        plan.workerArgs.push_back("--fsdp_use_orig_params");
    if (truthy(key("fsdp_activation_checkpointing")))
        plan.workerArgs.push_back("--fsdp_activation_checkpointing");
    if (truthy(key("fsdp_activation_checkpointing_offload")))
        return unsupported("fsdp_config.fsdp_activation_checkpointing_offload", "true",
                           "the engine recomputes activations but does not offload them; set it to false");
    const std::string stateDict = text(key("fsdp_state_dict_type"), "FULL_STATE_DICT");
    if (stateDict != "FULL_STATE_DICT" && stateDict != "SHARDED_STATE_DICT")
        return unsupported("fsdp_config.fsdp_state_dict_type", stateDict, "use FULL_STATE_DICT or SHARDED_STATE_DICT");
    plan.workerArgs.insert(plan.workerArgs.end(), {"--fsdp_state_dict_type", stateDict});
    return {};
}

// DeepSpeed: the ZeRO stage from deepspeed_config (or its JSON file).
Result<void> planDeepSpeed(const AccelerateConfig& c, LaunchPlan& plan)
{
    auto key = [&](const char* k) { return c.nested("deepspeed_config", k); };
    std::string stage = text(key("zero_stage"), "2");
    std::string offloadOptimizer = text(key("offload_optimizer_device"), "none");
    std::string offloadParam = text(key("offload_param_device"), "none");
    const std::string file = text(key("deepspeed_config_file"), "none");
    // Numbers, not "auto": what DeepSpeed itself will use, over the recipe's values.
    auto number = [](const Value* v) -> std::string {
        if (!v || v->isNull())
            return {};
        if (v->kind() == Value::Kind::Int)
            return std::to_string(v->asInt());
        if (v->kind() == Value::Kind::Float)
            return v->pyStr();
        return {};
    };
    std::string accumulation = number(key("gradient_accumulation_steps"));
    std::string clipping = number(key("gradient_clipping"));
    if (file != "none" && !file.empty()) {
        std::filesystem::path path(file);
        if (path.is_relative() && !c.source().empty())
            path = std::filesystem::path(c.source()).parent_path() / path;
        auto json = config::loadDeepSpeedJson(path.string());
        if (!json)
            return json.error();
        if (auto n = number(json->find("gradient_accumulation_steps")); !n.empty())
            accumulation = n;
        if (auto n = number(json->find("gradient_clipping")); !n.empty())
            clipping = n;
        if (const Value* zero = json->find("zero_optimization")) {
            if (const Value* s = zero->find("stage"))
                stage = text(s, stage);
            if (const Value* o = zero->find("offload_optimizer"); o && o->find("device"))
                offloadOptimizer = text(o->find("device"), "none");
            if (const Value* o = zero->find("offload_param"); o && o->find("device"))
                offloadParam = text(o->find("device"), "none");
        }
    }
    if (offloadOptimizer != "none" && offloadOptimizer != "cpu")
        return unsupported("deepspeed_config.offload_optimizer_device", offloadOptimizer, "use cpu or none");
    if (offloadParam != "none" && offloadParam != "cpu")
        return unsupported("deepspeed_config.offload_param_device", offloadParam, "use cpu or none");
    if (stage == "0")
        return {}; // ZeRO-0 is plain data parallelism
    if (stage != "1" && stage != "2" && stage != "3")
        return makeError("config: deepspeed_config.zero_stage: " + stage + " is not a ZeRO stage; use 0, 1, 2 or 3");
    if (offloadParam == "cpu" && stage != "3")
        return makeError("config: deepspeed_config.offload_param_device: cpu needs zero_stage 3 (parameters are "
                         "partitioned only there); set zero_stage: 3 or offload_param_device: none");
    plan.workerArgs.insert(plan.workerArgs.end(), {"--zero_stage", stage});
    if (offloadOptimizer == "cpu")
        plan.workerArgs.insert(plan.workerArgs.end(), {"--offload_optimizer_device", "cpu"});
    if (offloadParam == "cpu")
        plan.workerArgs.insert(plan.workerArgs.end(), {"--offload_param_device", "cpu"});
    if (!accumulation.empty())
        plan.workerArgs.insert(plan.workerArgs.end(), {"--gradient_accumulation_steps", accumulation});
    if (!clipping.empty())
        plan.workerArgs.insert(plan.workerArgs.end(), {"--max_grad_norm", clipping});
    // zero3_init_flag: DeepSpeed's plugin turns it on for stage 3 when the file does not say.
    const Value* init = key("zero3_init_flag");
    if (stage == "3" && (init && !init->isNull() ? truthy(init) : true))
        plan.workerArgs.push_back("--zero3_init");
    if (stage == "3" && truthy(key("zero3_save_16bit_model")))
        plan.workerArgs.push_back("--zero3_save_16bit_model");
    return {};
}

} // namespace

Result<LaunchPlan> planLaunch(const AccelerateConfig& c, bool hasGpu, const config::EnvironmentOptions& environment)
{
    LaunchPlan plan;
    plan.distributedType = c.distributedType().empty() ? "NO" : c.distributedType();
    plan.numProcesses = static_cast<int>(c.intField("num_processes").value_or(1));
    if (plan.numProcesses < 1)
        return makeError("config: num_processes is " + std::to_string(plan.numProcesses)
                         + "; give --num_processes or set num_processes in the config file");
    plan.numMachines = static_cast<int>(c.intField("num_machines").value_or(1));
    plan.machineRank = static_cast<int>(c.intField("machine_rank").value_or(0));
    if (auto ip = text(c.given().find("main_process_ip")); !ip.empty())
        plan.mainProcessIp = ip;
    plan.mainProcessPort = static_cast<int>(c.intField("main_process_port").value_or(0));
    plan.mixedPrecision = c.mixedPrecision();

    const std::string& type = plan.distributedType;
    bool nccl = false;
    if (type == "NO") {
        if (plan.numProcesses != 1)
            return makeError("config: distributed_type NO runs one process, but num_processes is "
                             + std::to_string(plan.numProcesses) + "; choose MULTI_CPU or MULTI_GPU, or one process");
    } else if (type == "MULTI_CPU") {
    } else if (type == "MULTI_GPU") {
        if (!hasGpu)
            return makeError("config: distributed_type MULTI_GPU needs NVIDIA GPUs and this machine has none; "
                             "use MULTI_CPU to run on the CPU");
        nccl = true;
    } else if (type == "FSDP") {
        if (auto planned = planFsdp(c, plan); !planned)
            return planned.error();
        nccl = hasGpu;
    } else if (type == "DEEPSPEED") {
        if (auto planned = planDeepSpeed(c, plan); !planned)
            return planned.error();
        nccl = hasGpu;
    } else {
        return unsupported("distributed_type", type, "use NO, MULTI_CPU, MULTI_GPU, FSDP or DEEPSPEED");
    }
    if (nccl)
        plan.workerArgs.insert(plan.workerArgs.begin(), {"--backend", "nccl"});

    for (const auto& [name, value] : config::launchEnvironment(c, environment))
        plan.environment.push_back(name + "=" + value);
    if (nccl) {
        if (auto ids = text(c.given().find("gpu_ids")); !ids.empty() && ids != "all")
            plan.environment.push_back("CUDA_VISIBLE_DEVICES=" + ids);
    }
    return plan;
}

} // namespace shardscope
