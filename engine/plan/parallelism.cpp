#include "engine/plan/parallelism.h"

#include "engine/accelerate/ascii_case.h"
#include "engine/accelerate/deepspeed_json.h"
#include "engine/plan/sharding_options.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

namespace shardscope::config {

namespace {

// A value as the launcher passes it on (its str()); `fallback` when absent or null.
std::string text(const Value* v, const std::string& fallback = {}) { return v && !v->isNull() ? v->pyStr() : fallback; }

// Accelerate's value of a boolean key: `absent` when the file does not set it.
bool flag(const Value* v, bool absent) { return accelerateBool(v).value_or(absent); }

std::vector<std::string> commaList(const std::string& names)
{
    std::vector<std::string> out;
    std::istringstream in(names);
    for (std::string name; std::getline(in, name, ',');) {
        name.erase(0, name.find_first_not_of(' '));
        name.erase(name.find_last_not_of(' ') + 1);
        if (!name.empty())
            out.push_back(name);
    }
    return out;
}

void readFsdp(const AccelerateConfig& c, ParallelismSpec& s)
{
    // A key without the fsdp_ prefix is prefixed by the launcher (env_export does the same).
    auto key = [&](const std::string& k) {
        const Value* v = c.nested("fsdp_config", k);
        return v ? v : c.nested("fsdp_config", k.substr(5));
    };
    s.fsdpVersion = text(key("fsdp_version"), "1") == "2" ? 2 : 1;
    std::string strategy = asciiUpper(text(key("fsdp_sharding_strategy"), ""));
    const Value* reshard = key("fsdp_reshard_after_forward");
    if (s.fsdpVersion == 2) {
        // FSDP2 has no strategy names: reshard_after_forward true is FULL_SHARD, false SHARD_GRAD_OP.
        const bool full = accelerateBool(reshard).value_or(!reshard || asciiUpper(text(reshard)) == "FULL_SHARD");
        strategy = full ? "FULL_SHARD" : "SHARD_GRAD_OP";
    } else if (strategy.empty() && reshard && reshard->isString() && !accelerateBool(reshard).has_value()) {
        // FSDP1 with the strategy's name in fsdp_reshard_after_forward: what the user chose
        // (Accelerate's launcher exports FULL_SHARD there; docs/CONFIG.md, env_export).
        strategy = asciiUpper(reshard->asString());
    }
    if (strategy.empty())
        strategy = "FULL_SHARD";
    // Legacy numeric values (Accelerate < 0.22): 1 FULL_SHARD, 2 SHARD_GRAD_OP, 3 NO_SHARD, ...
    static const char* kByNumber[] = {"", "FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2"};
    if (strategy.size() == 1 && strategy[0] >= '1' && strategy[0] <= '5')
        strategy = kByNumber[strategy[0] - '0'];
    s.fsdpShardingStrategy = strategy;
    s.fsdpAutoWrapPolicy = text(key("fsdp_auto_wrap_policy"), "NO_WRAP");
    if (s.fsdpAutoWrapPolicy == "TRANSFORMER_BASED_WRAP")
        s.fsdpLayerClasses = commaList(text(key("fsdp_transformer_layer_cls_to_wrap"), ""));
    else if (const Value* minimum = key("fsdp_min_num_params");
             s.fsdpAutoWrapPolicy == "SIZE_BASED_WRAP" && minimum && minimum->isInt())
        s.fsdpMinNumParams = minimum->asInt();
    const std::string prefetch = text(key("fsdp_backward_prefetch"), "NO_PREFETCH");
    s.fsdpBackwardPrefetch = prefetch == "BACKWARD_PRE" || prefetch == "BACKWARD_POST" ? prefetch : "NO_PREFETCH";
    s.fsdpStateDictType = text(key("fsdp_state_dict_type"), "FULL_STATE_DICT");
    // A key the file does not set takes `accelerate launch`'s CLI default (reference §2.4):
    // use_orig_params, cpu_ram_efficient_loading and sync_module_states default to true there.
    s.fsdpForwardPrefetch = flag(key("fsdp_forward_prefetch"), false);
    s.fsdpOffloadParams = flag(key("fsdp_offload_params"), false);
    s.fsdpCpuRamEfficientLoading = flag(key("fsdp_cpu_ram_efficient_loading"), true);
    s.fsdpSyncModuleStates = flag(key("fsdp_sync_module_states"), true);
    s.fsdpUseOrigParams = flag(key("fsdp_use_orig_params"), true);
    s.fsdpActivationCheckpointing = flag(key("fsdp_activation_checkpointing"), false);
    s.fsdpActivationCheckpointingOffload = flag(key("fsdp_activation_checkpointing_offload"), false);
}

std::string jsonDevice(const Value* section, const std::string& fallback)
{
    const Value* device = section && section->isMap() ? section->find("device") : nullptr;
    const std::string name = text(device, "");
    return name.empty() || name == "auto" ? fallback : name;
}

void readDeepSpeed(const AccelerateConfig& c, const std::string& baseDir, ParallelismSpec& s, std::vector<Diagnostic>& problems)
{
    auto key = [&](const char* k) { return c.nested("deepspeed_config", k); };
    s.deepSpeed = true;
    std::string stage = text(key("zero_stage"), "2");
    s.offloadOptimizerDevice = text(key("offload_optimizer_device"), "none");
    s.offloadParamDevice = text(key("offload_param_device"), "none");
    auto read = [&](const Value* accumulation, const Value* clipping) {
        if (accumulation && accumulation->isInt())
            s.deepSpeedGradientAccumulationSteps = accumulation->asInt();
        if (clipping && clipping->isInt())
            s.deepSpeedGradientClipping = static_cast<double>(clipping->asInt());
        else if (clipping && clipping->kind() == Value::Kind::Float)
            s.deepSpeedGradientClipping = clipping->asFloat();
    };
    read(key("gradient_accumulation_steps"), key("gradient_clipping"));
    bool init = flag(key("zero3_init_flag"), true);
    bool save16 = flag(key("zero3_save_16bit_model"), false);
    if (const std::string file = text(key("deepspeed_config_file"), "none"); file != "none" && !file.empty()) {
        std::filesystem::path path(file);
        if (path.is_relative() && !baseDir.empty())
            path = std::filesystem::path(baseDir) / path;
        else if (path.is_relative() && !c.source().empty())
            path = std::filesystem::path(c.source()).parent_path() / path;
        auto json = loadDeepSpeedJson(path.string());
        if (!json) {
            problems.push_back({Severity::Error, "deepspeed_config.deepspeed_config_file", json.error().message});
            return;
        }
        read(json->find("gradient_accumulation_steps"), json->find("gradient_clipping"));
        if (const Value* zero = json->find("zero_optimization"); zero && zero->isMap()) {
            if (const Value* st = zero->find("stage"))
                stage = text(st, stage);
            s.offloadOptimizerDevice = jsonDevice(zero->find("offload_optimizer"), s.offloadOptimizerDevice);
            s.offloadParamDevice = jsonDevice(zero->find("offload_param"), s.offloadParamDevice);
            if (const Value* gather = zero->find("stage3_gather_16bit_weights_on_model_save"))
                save16 = flag(gather, save16);
        }
        // Only an explicit true: "auto" is filled from mixed_precision.
        for (const char* dtype : {"fp16", "bf16"})
            if (const Value* section = json->find(dtype); section && section->isMap())
                if (const Value* enabled = section->find("enabled"); enabled && asciiLower(enabled->pyStr()) == "true")
                    s.deepSpeedMixedPrecision = dtype;
    }
    if (stage != "0" && stage != "1" && stage != "2" && stage != "3") {
        problems.push_back({Severity::Error, "deepspeed_config.zero_stage",
                            "deepspeed_config.zero_stage: " + stage + " is not a ZeRO stage; use 0, 1, 2 or 3"});
        return;
    }
    s.zeroStage = stage[0] - '0';
    // zero3_init_flag: DeepSpeed's plugin turns it on for stage 3 when the file does not say.
    s.zero3Init = s.zeroStage == 3 && init;
    s.zero3Save16BitModel = s.zeroStage == 3 && save16;
}

void readMesh(const AccelerateConfig& c, ParallelismSpec& s)
{
    auto size = [&](const char* k) {
        // Only the prefixed key: accelerate launch drops an unprefixed one (validation warns).
        const Value* v = c.nested("parallelism_config", std::string("parallelism_config_") + k);
        // A digit string too: Accelerate's runtime reads the variable with int() (validation warns).
        std::int64_t n = v && v->isInt() ? v->asInt() : 0;
        if (v && v->isString() && !v->asString().empty() && v->asString().size() < 8
            && v->asString().find_first_not_of("0123456789") == std::string::npos)
            n = std::stoll(v->asString());
        return n >= 1 && n <= (1 << 20) ? static_cast<int>(n) : 1;
    };
    s.dpReplicateSize = size("dp_replicate_size");
    s.dpShardSize = size("dp_shard_size");
    s.tpSize = size("tp_size");
    s.cpSize = size("cp_size");
    s.spSize = size("sp_size");
}

} // namespace

ParallelismReading interpretParallelism(const AccelerateConfig& config, const std::string& baseDir)
{
    ParallelismReading reading;
    const std::string type = config.distributedType();
    if (type == "FSDP") {
        readFsdp(config, reading.spec);
    } else if (type == "DEEPSPEED") {
        readDeepSpeed(config, baseDir, reading.spec, reading.problems);
    }
    // accelerate launch passes the mesh on for these launchers (its simple and CPU ones drop it).
    if (type == "FSDP" || type == "DEEPSPEED" || type == "MULTI_GPU")
        readMesh(config, reading.spec);
    return reading;
}

std::string describeMeshGroups(int world, int groupSize, const std::string& inner, const std::string& outer)
{
    if (groupSize < 1 || world % groupSize != 0)
        return {};
    if (world > 64)
        return inner + " groups of " + std::to_string(groupSize) + " consecutive ranks, " + outer + " groups of every "
               + std::to_string(groupSize) + "th rank";
    auto list = [](const std::vector<int>& ranks) {
        std::string text;
        for (int r : ranks)
            text += (text.empty() ? "[" : ", ") + std::to_string(r);
        return text + "]";
    };
    // The same layout as hybridGroupsOf and tensorParallelGroupsOf: consecutive inner groups.
    const int innerGroups = world / groupSize;
    std::string consecutive, strided;
    for (int g = 0; g < std::min(innerGroups, 4); ++g)
        consecutive += " " + list(parallel::hybridGroupsOf(g * groupSize, world, groupSize).shard);
    for (int g = 0; g < std::min(groupSize, 4); ++g)
        strided += " " + list(parallel::hybridGroupsOf(g, world, groupSize).replicate);
    return inner + " groups" + consecutive + (innerGroups > 4 ? " ..." : "") + ", " + outer + " groups" + strided
           + (groupSize > 4 ? " ..." : "");
}

ModelStateLayout stateLayoutOf(const ParallelismSpec& spec, int numProcesses, int numMachines)
{
    ModelStateLayout layout;
    // Under tensor parallelism the data-parallel layout spans one rank of each tensor group.
    layout.tensorParallel = spec.deepSpeed ? 1 : std::max(1, spec.tpSize);
    const int ranks = std::max(1, numProcesses / layout.tensorParallel);
    layout.shardRanks = ranks;
    if (layout.tensorParallel > 1)
        layout.notes.push_back("tensor parallelism: the projections split over tp_size " + std::to_string(layout.tensorParallel)
                               + " ranks, the layout below over the " + std::to_string(ranks) + " data-parallel ones; "
                               + describeMeshGroups(std::max(1, numProcesses), layout.tensorParallel, "tensor", "data"));
    if (spec.fsdpShards()) {
        const std::string& strategy = spec.fsdpShardingStrategy;
        const bool hybrid = strategy.rfind("HYBRID", 0) == 0;
        // As the engine runs them (run_plan.cpp): every strategy shards the parameters; the _ZERO2
        // ones keep each unit unsharded from its forward to its backward.
        layout.zeroStage = 3;
        layout.fullParamsForwardToBackward = !(strategy == "FULL_SHARD" || strategy == "HYBRID_SHARD");
        if (hybrid) {
            layout.shardRanks = std::max(1, ranks / std::max(1, numMachines));
            layout.notes.push_back("hybrid sharding: states sharded within a machine (" + std::to_string(layout.shardRanks)
                                   + " ranks); " + describeMeshGroups(ranks, layout.shardRanks, "shard", "replicate"));
        } else if (spec.dpShardSize > 1 && spec.dpShardSize < ranks) {
            layout.shardRanks = spec.dpShardSize;
            layout.notes.push_back("parallelism_config: states sharded over dp_shard_size " + std::to_string(spec.dpShardSize)
                                   + " ranks; " + describeMeshGroups(ranks, spec.dpShardSize, "shard", "replicate"));
        }
        // CPU offload moves the shards, their gradients and the optimizer step to host memory; under
        // SHARD_GRAD_OP the device still holds the full parameters between forward and backward.
        layout.offloadParams = spec.fsdpOffloadParams;
        layout.offloadGrads = spec.fsdpOffloadParams;
        layout.offloadOptimizer = spec.fsdpOffloadParams;
        layout.activationCheckpointing = spec.fsdpActivationCheckpointing;
        layout.label = "FSDP" + std::to_string(spec.fsdpVersion) + " " + strategy
                       + (spec.fsdpOffloadParams ? " + CPU offload" : "");
        return layout;
    }
    if (spec.zeroStage > 0) {
        const bool offloadOptimizer = spec.offloadOptimizerDevice == "cpu" || spec.offloadOptimizerDevice == "nvme";
        const bool offloadParams = spec.zeroStage == 3 && (spec.offloadParamDevice == "cpu" || spec.offloadParamDevice == "nvme");
        layout.zeroStage = spec.zeroStage;
        layout.offloadOptimizer = offloadOptimizer;
        layout.offloadParams = offloadParams;
        layout.label = "ZeRO-" + std::to_string(spec.zeroStage);
        if (offloadOptimizer)
            layout.label += " + optimizer offload (" + spec.offloadOptimizerDevice + ")";
        if (offloadParams)
            layout.label += " + param offload (" + spec.offloadParamDevice + ")";
        return layout;
    }
    // Replicated: DDP, FSDP's NO_SHARD and ZeRO-0 all run as the engine's DDP, under autocast.
    layout.autocast = true;
    layout.label = !spec.fsdpShardingStrategy.empty() ? "FSDP" + std::to_string(spec.fsdpVersion) + " NO_SHARD (replicated)"
                   : spec.deepSpeed                   ? std::string("ZeRO-0 (replicated)")
                   : ranks > 1                        ? std::string("DDP (replicated)")
                                                      : std::string("single process");
    return layout;
}

std::string mixedPrecisionOf(const AccelerateConfig& config, const ParallelismSpec& spec)
{
    const std::string name = config.mixedPrecision();
    if ((name.empty() || name == "no") && !spec.deepSpeedMixedPrecision.empty())
        return spec.deepSpeedMixedPrecision;
    return name.empty() ? "no" : name;
}

precision::PrecisionMode precisionOf(const AccelerateConfig& config, const ParallelismSpec& spec)
{
    auto mode = precision::parseMode(mixedPrecisionOf(config, spec));
    return mode ? *mode : precision::PrecisionMode::No;
}

} // namespace shardscope::config
