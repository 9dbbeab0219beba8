#include "engine/plan/run_plan.h"

#include "engine/common/edit_distance.h"
#include "engine/common/number_text.h"

#include "engine/common/dist_env.h"
#include "engine/accelerate/deepspeed_json.h"
#include "engine/recipe/hf_config_keys.h"
#include "engine/recipe/model_architecture.h"
#include "engine/accelerate/yaml_io.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <sstream>
#include <type_traits>

namespace shardscope::config {

namespace {

// The engine's options: what the config asks (its parallelism as interpretParallelism reads it),
// then what the engine flags say over it. buildRunPlan turns them into the typed plan.
struct EngineChoices : ParallelismSpec {
    std::string backend; // empty: from the distributed type and the machine
    std::string mixedPrecision;
    std::int64_t gradientAccumulationSteps = 0; // 0: the recipe's
    double maxGradNorm = -1; // below 0: the recipe's
    std::int64_t maxSteps = 0;
    std::int64_t profileStartStep = -1;
    std::int64_t profileSteps = 0;
    int threads = 0;
    FaultInjection faults;
};

// One engine flag: its name, what it takes, where it goes. Declarative, so that --help, the
// parser and the error for an unknown flag all read the same list.
struct EngineFlag {
    const char* name;
    const char* help;
    std::function<std::string(EngineChoices&, const std::vector<std::string>&)> set; // "" or what is wrong
    bool takesValue = true;
    bool takesList = false;
};

std::string oneOf(const std::string& value, const std::vector<const char*>& allowed, std::string& out)
{
    std::string names;
    for (const char* a : allowed) {
        if (value == a) {
            out = value;
            return {};
        }
        names += (names.empty() ? "" : ", ") + std::string(a);
    }
    return "'" + value + "' is not one of " + names;
}

// A flag's number between two bounds; the message says what was wrong and what is taken ("'2.5'
// is not a whole number", not "not a number"; a count past int64 is out of range, not "not a number").
// A flag's number between two bounds (engine/common/number_text.h says what is wrong: "'2.5' is not a
// whole number", a count past int64 out of range).
template <typename T>
std::string number(const std::string& text, T& out, T minimum, T maximum)
{
    std::ostringstream range;
    range << "from " << minimum << " to " << maximum;
    double approximate = 0;
    if (auto problem = numberTextProblem(
            text, {static_cast<double>(minimum), true, static_cast<double>(maximum), std::is_integral_v<T>}, range.str(),
            &approximate);
        !problem.empty())
        return problem;
    std::istringstream in(text);
    T value{};
    in >> value; // exact for a whole number past 2^53; "1e3" stops at the e and is taken as the double
    out = in && in.eof() && value >= minimum && value <= maximum ? value : static_cast<T>(approximate);
    return {};
}

constexpr std::int64_t kSteps = std::int64_t{1} << 40;

// A file the run will create: one that exists is the user's, never overwritten.
std::string newFile(const std::string& path, const char* flag, std::string& out)
{
    std::error_code ec;
    if (std::filesystem::exists(path, ec))
        return "'" + path + "' exists; " + flag + " writes a new file: remove it or give another path";
    out = path;
    return {};
}

// "MODULE:STEP": a module's name and a step from 1.
std::string moduleAndStep(const std::string& text, std::string& module, std::int64_t& step)
{
    const auto colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0)
        return "'" + text + "' is not MODULE:STEP (e.g. h.1:3)";
    module = text.substr(0, colon);
    if (auto problem = number<std::int64_t>(text.substr(colon + 1), step, 1, kSteps); !problem.empty())
        return "step " + problem;
    return {};
}

// "RANK:SEQ", both counted from 0 and 1.
std::string rankAndSeq(const std::string& text, int& rank, std::int64_t& seq)
{
    const auto colon = text.find(':');
    if (colon == std::string::npos)
        return "'" + text + "' is not RANK:SEQ (e.g. 1:40)";
    if (auto problem = number<int>(text.substr(0, colon), rank, 0, 1 << 20); !problem.empty())
        return "rank " + problem;
    if (auto problem = number<std::int64_t>(text.substr(colon + 1), seq, 1, kSteps); !problem.empty())
        return "sequence number " + problem;
    return {};
}

const std::vector<EngineFlag>& engineFlags()
{
    using V = const std::vector<std::string>&;
    // The choices are copied into the setter (an initializer_list would not outlive this call).
    auto choice = [](std::string EngineChoices::*field, std::initializer_list<const char*> names) {
        return
            [field, allowed = std::vector<const char*>(names)](EngineChoices& c, V v) { return oneOf(v[0], allowed, c.*field); };
    };
    auto flag = [](bool EngineChoices::*field) {
        return [field](EngineChoices& c, V) { return (c.*field = true, std::string()); };
    };
    auto step = [](std::int64_t& (*field)(EngineChoices&), std::int64_t minimum) {
        return [field, minimum](EngineChoices& c, V v) { return number<std::int64_t>(v[0], field(c), minimum, kSteps); };
    };
    static const std::vector<EngineFlag> kFlags = {
        {"backend", "c10d backend: gloo (CPU) or nccl (CUDA)", choice(&EngineChoices::backend, {"gloo", "nccl"})},
        {"mixed_precision", "no, fp16, bf16, bf16-pure or fp8",
         choice(&EngineChoices::mixedPrecision, {"no", "fp16", "bf16", "bf16-pure", "fp8"})},
        {"max_steps", "the recipe's training.max_steps", step([](EngineChoices& c) -> std::int64_t& { return c.maxSteps; }, 1)},
        {"zero_stage", "DeepSpeed ZeRO stage 1, 2 or 3 (0: DDP)",
         [](EngineChoices& c, V v) { return number<int>(v[0], c.zeroStage, 0, 3); }},
        {"fsdp_sharding_strategy", "FSDP: FULL_SHARD, SHARD_GRAD_OP, HYBRID_SHARD, HYBRID_SHARD_ZERO2 or NO_SHARD (DDP)",
         choice(&EngineChoices::fsdpShardingStrategy,
                {"FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2", "NO_SHARD"})},
        {"fsdp_auto_wrap_policy", "TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP or NO_WRAP",
         choice(&EngineChoices::fsdpAutoWrapPolicy, {"TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP"})},
        {"fsdp_transformer_layer_cls_to_wrap", "classes that become units",
         [](EngineChoices& c, V v) { return (c.fsdpLayerClasses = v, std::string()); }, true, true},
        {"fsdp_min_num_params", "SIZE_BASED_WRAP threshold",
         [](EngineChoices& c, V v) { return number<std::int64_t>(v[0], c.fsdpMinNumParams, 0, kSteps); }},
        {"fsdp_backward_prefetch", "BACKWARD_PRE, BACKWARD_POST or NO_PREFETCH",
         choice(&EngineChoices::fsdpBackwardPrefetch, {"BACKWARD_PRE", "BACKWARD_POST", "NO_PREFETCH"})},
        {"fsdp_forward_prefetch", "prefetch the next unit in forward", flag(&EngineChoices::fsdpForwardPrefetch), false},
        {"fsdp_use_orig_params", "the optimizer sees each original parameter", flag(&EngineChoices::fsdpUseOrigParams), false},
        {"fsdp_activation_checkpointing", "recompute each wrapped unit's forward in backward",
         flag(&EngineChoices::fsdpActivationCheckpointing), false},
        {"fsdp_offload_params", "shards, their gradients and the optimizer step in host memory",
         flag(&EngineChoices::fsdpOffloadParams), false},
        {"fsdp_cpu_ram_efficient_loading", "only rank 0 loads the weights; the others receive their shards",
         flag(&EngineChoices::fsdpCpuRamEfficientLoading), false},
        {"fsdp_state_dict_type", "FULL_STATE_DICT or SHARDED_STATE_DICT",
         choice(&EngineChoices::fsdpStateDictType, {"FULL_STATE_DICT", "SHARDED_STATE_DICT"})},
        {"offload_optimizer_device", "DeepSpeed: none or cpu", choice(&EngineChoices::offloadOptimizerDevice, {"none", "cpu"})},
        {"offload_param_device", "DeepSpeed ZeRO-3: none or cpu", choice(&EngineChoices::offloadParamDevice, {"none", "cpu"})},
        {"zero3_init", "DeepSpeed zero3_init_flag: ranks receive their partitions", flag(&EngineChoices::zero3Init), false},
        {"zero3_save_16bit_model", "DeepSpeed: save_model writes 16-bit weights", flag(&EngineChoices::zero3Save16BitModel),
         false},
        {"gradient_accumulation_steps", "the recipe's training.gradient_accumulation_steps",
         step([](EngineChoices& c) -> std::int64_t& { return c.gradientAccumulationSteps; }, 1)},
        {"max_grad_norm", "the recipe's training.max_grad_norm (0: none)",
         [](EngineChoices& c, V v) { return number<double>(v[0], c.maxGradNorm, 0.0, 1e30); }},
        {"threads", "intra-op threads per rank (default: OMP_NUM_THREADS when set, else cores / local ranks)",
         [](EngineChoices& c, V v) { return number<int>(v[0], c.threads, 1, 4096); }},
        {"profile_start_step", "first profiled step (wins over the recipe)",
         step([](EngineChoices& c) -> std::int64_t& { return c.profileStartStep; }, 0)},
        {"profile_steps", "profiled steps", step([](EngineChoices& c) -> std::int64_t& { return c.profileSteps; }, 0)},
        {"dump-params", "rank 0 writes the final parameters here (safetensors; a new file)",
         [](EngineChoices& c, V v) { return newFile(v[0], "--dump-params", c.faults.dumpParamsPath); }},
        {"dump-initial", "rank 0 writes the initial parameters here (safetensors; a new file)",
         [](EngineChoices& c, V v) { return newFile(v[0], "--dump-initial", c.faults.dumpInitialPath); }},
        {"inject-nonfinite-grad", "fault injection: a NaN in a synchronised gradient at this step",
         step([](EngineChoices& c) -> std::int64_t& { return c.faults.injectNonfiniteGradAtStep; }, 1)},
        {"fill-disk-at-step", "fault injection: from this step, files beyond 64 KiB cannot be written",
         step([](EngineChoices& c) -> std::int64_t& { return c.faults.fillDiskAtStep; }, 1)},
        {"fill-disk-rank", "fault injection: --fill-disk-at-step fills only this rank's disk",
         [](EngineChoices& c, V v) { return number<int>(v[0], c.faults.fillDiskRank, 0, 1 << 20); }},
        {"slow-rank", "fault injection: this rank sleeps --slow-forward-ms after each forward pass",
         [](EngineChoices& c, V v) { return number<int>(v[0], c.faults.slowRank, 0, 1 << 20); }},
        {"slow-forward-ms", "fault injection: the sleep of --slow-rank, in milliseconds",
         [](EngineChoices& c, V v) { return number<int>(v[0], c.faults.slowForwardMs, 0, 600000); }},
        {"spike-at-step", "fault injection: the batches of this step are spoilt, its loss spikes",
         step([](EngineChoices& c) -> std::int64_t& { return c.faults.spikeAtStep; }, 1)},
        {"nonfinite-output", "fault injection: MODULE:STEP, a NaN in this module's output at this step (e.g. h.1:3)",
         [](EngineChoices& c, V v) {
             return moduleAndStep(v[0], c.faults.nonfiniteOutputModule, c.faults.nonfiniteOutputAtStep);
         }},
        {"diagnostics-ab", "benchmark: steps cycle through the diagnostics off, on, recorder alone, NaN probe alone",
         [](EngineChoices& c, V) { return (c.faults.diagnosticsAb = true, std::string()); }, false},
        {"oom-at-step", "fault injection: every rank runs out of memory in this step's forward",
         step([](EngineChoices& c) -> std::int64_t& { return c.faults.outOfMemoryAtStep; }, 1)},
        {"skip-collective", "fault injection: RANK:SEQ, this rank never issues collective SEQ of the default group",
         [](EngineChoices& c, V v) { return rankAndSeq(v[0], c.faults.skipCollectiveRank, c.faults.skipCollectiveSeq); }},
        {"spin-rank", "fault injection: RANK:STEP, this rank spins (busy, in no collective) from this step's forward on",
         [](EngineChoices& c, V v) { return rankAndSeq(v[0], c.faults.spinRank, c.faults.spinAtStep); }},
        {"crash-in-checkpoint", "fault injection: rank 0 dies while writing the checkpoint of this step",
         step([](EngineChoices& c) -> std::int64_t& { return c.faults.crashInCheckpointAtStep; }, 1)},
    };
    return kFlags;
}

void parseEngineFlags(const std::vector<std::string>& args, EngineChoices& choices, std::vector<Diagnostic>& problems)
{
    auto problem = [&](const std::string& flag, const std::string& message) {
        problems.push_back({Severity::Error, flag, "engine flag " + flag + ": " + message});
    };
    for (std::size_t i = 0; i < args.size(); ++i) {
        std::string arg = args[i];
        if (arg.rfind("--", 0) != 0) {
            problem(arg, "expected a flag such as --zero_stage (the arguments after -- are the engine's flags)");
            continue;
        }
        std::vector<std::string> values;
        bool inlineValue = false;
        if (const auto eq = arg.find('='); eq != std::string::npos) {
            values.push_back(arg.substr(eq + 1));
            arg.resize(eq);
            inlineValue = true;
        }
        const std::string name = arg.substr(2);
        const auto& flags = engineFlags();
        const auto found = std::find_if(flags.begin(), flags.end(), [&](const EngineFlag& f) { return name == f.name; });
        if (found == flags.end()) {
            const auto nearest = std::min_element(flags.begin(), flags.end(), [&](const EngineFlag& a, const EngineFlag& b) {
                return editDistance(name, a.name) < editDistance(name, b.name);
            });
            problem(arg, "unknown; did you mean --" + std::string(nearest->name) + "? (shardscope launch --help lists them)");
            continue;
        }
        if (!found->takesValue) {
            if (inlineValue)
                problem(arg, "takes no value");
            else
                found->set(choices, {});
            continue;
        }
        while (!inlineValue && i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) {
            values.push_back(args[++i]);
            if (!found->takesList)
                break;
        }
        if (values.empty()) {
            problem(arg, "needs a value");
            continue;
        }
        if (const std::string wrong = found->set(choices, values); !wrong.empty())
            problem(arg, wrong);
    }
}

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

Diagnostic unsupported(const std::string& key, const std::string& value, const std::string& fix)
{
    return {Severity::Error, key, key + ": " + value + " is not supported by Shardscope's engine yet; " + fix};
}

// FSDP: what of Accelerate's fsdp_config and parallelism_config this engine cannot run.
void refuseFsdp(const ParallelismSpec& s, std::vector<Diagnostic>& problems)
{
    // Accelerate's launch check (accelerate-config-reference.md §4.4).
    if (s.fsdpCpuRamEfficientLoading && !s.fsdpSyncModuleStates)
        problems.push_back(
            {Severity::Error, "fsdp_config.fsdp_sync_module_states",
             "fsdp_config: When using `--fsdp_cpu_ram_efficient_loading` set `--fsdp_sync_module_states` to `True`"});
    if (!s.fsdpShards()) { // NO_SHARD: the engine's DDP, which neither offloads nor recomputes
        if (s.fsdpOffloadParams)
            problems.push_back(unsupported("fsdp_config.fsdp_offload_params", "true with NO_SHARD",
                                           "use FULL_SHARD or SHARD_GRAD_OP, or set it to false"));
        if (s.fsdpActivationCheckpointing)
            problems.push_back(unsupported("fsdp_config.fsdp_activation_checkpointing", "true with NO_SHARD",
                                           "use FULL_SHARD or SHARD_GRAD_OP, or set it to false"));
        return;
    }
    if (s.fsdpActivationCheckpointingOffload)
        problems.push_back(unsupported("fsdp_config.fsdp_activation_checkpointing_offload", "true",
                                       "the engine recomputes activations but does not offload them; set it to false"));
    if (s.fsdpStateDictType != "FULL_STATE_DICT" && s.fsdpStateDictType != "SHARDED_STATE_DICT")
        problems.push_back(
            unsupported("fsdp_config.fsdp_state_dict_type", s.fsdpStateDictType, "use FULL_STATE_DICT or SHARDED_STATE_DICT"));
}

// parallelism_config, which accelerate launch passes on for MULTI_GPU, FSDP and DeepSpeed: what of
// the mesh this engine runs. FSDP2: the data-parallel dimensions (dp_shard groups of consecutive
// ranks, replicated dp_replicate times, as Accelerate's mesh builds them), or dp_shard x tp (2D).
// MULTI_GPU (DDP): one data-parallel dimension, or tp alone. DeepSpeed (ZeRO over every rank): one
// data-parallel dimension. The rest is refused, never ignored.
void refuseMesh(const std::string& type, const ParallelismSpec& s, std::vector<Diagnostic>& problems)
{
    const auto key = [](const char* name) { return std::string("parallelism_config.parallelism_config_") + name; };
    for (auto [name, size] : {std::pair{"cp_size", s.cpSize}, {"sp_size", s.spSize}})
        if (size > 1)
            problems.push_back(unsupported(key(name), std::to_string(size),
                                           "this engine runs the data-parallel dimensions (dp_replicate_size, "
                                           "dp_shard_size) and tp_size; set it to 1"));
    if (s.tpSize > 1 && type == "DEEPSPEED")
        problems.push_back(unsupported(key("tp_size"), std::to_string(s.tpSize) + " with DeepSpeed",
                                       "this engine splits tensors under distributed_type FSDP (fsdp_version 2, with "
                                       "dp_shard_size) or MULTI_GPU; set tp_size: 1 for DeepSpeed"));
    else if (s.tpSize > 1 && s.dpReplicateSize > 1)
        problems.push_back(unsupported(
            key("tp_size"), std::to_string(s.tpSize) + " with dp_replicate_size " + std::to_string(s.dpReplicateSize),
            type == "MULTI_GPU"
                ? "Accelerate's runtime skips DDP when tp_size > 1, so its replicas would train apart; use distributed_type "
                  "FSDP (fsdp_version 2) with dp_shard_size, or set dp_replicate_size: 1"
                : "this engine combines tensor parallelism with dp_shard_size only (2D), not with replicas (3D); set "
                  "dp_replicate_size: 1"));
    if (type == "MULTI_GPU" && s.dpShardSize > 1)
        problems.push_back(unsupported(key("dp_shard_size"), std::to_string(s.dpShardSize) + " with distributed_type MULTI_GPU",
                                       "MULTI_GPU runs as DDP, which replicates; to shard, use distributed_type FSDP with "
                                       "fsdp_config.fsdp_version: 2, or set dp_shard_size: 1"));
    if (type == "DEEPSPEED" && s.dpShardSize > 1 && s.dpReplicateSize > 1)
        problems.push_back(unsupported(key("dp_shard_size"),
                                       std::to_string(s.dpShardSize) + " x dp_replicate_size " + std::to_string(s.dpReplicateSize)
                                           + " with DeepSpeed",
                                       "this engine's ZeRO shards over every rank, as DeepSpeed does; for hybrid sharding "
                                       "use distributed_type FSDP with fsdp_version 2, or set dp_replicate_size: 1"));
}

// tp_size: what of a run tensor parallelism cannot split (yet), refused with the reason.
void planTensorParallel(const PlanInputs& in, const EngineChoices& e, RunPlan& plan, std::vector<Diagnostic>& problems)
{
    if (e.tpSize <= 1 || e.deepSpeed) // DeepSpeed's is refused by refuseMesh
        return;
    plan.tensorParallelSize = e.tpSize;
    const std::string key = "parallelism_config.parallelism_config_tp_size";
    const std::string size = std::to_string(e.tpSize);
    const std::string& model = plan.recipe.model.type;
    if (in.recipe && (model == "gpt" || model == "mlp" || model == "gpt2"))
        problems.push_back(unsupported(key, size + " with model type " + model,
                                       "tensor parallelism splits the Llama, Mistral and Qwen2 decoders (transformers has "
                                       "a tp plan for those); set tp_size: 1 for this model"));
    // A decoder's heads and features split evenly or not at all (read from the recipe's keys or
    // the pretrained folder's config.json, where the launcher reads files).
    if (in.recipe && isHfFamilyType(model) && (in.readRecipeFiles || plan.recipe.model.pretrained.empty())) {
        if (auto a = resolveArchitecture(plan.recipe.model, in.recipeSource);
            a && a->family == DecoderFamily::Gpt2 && model != "gpt2")
            problems.push_back(unsupported(key, size + " with a GPT-2 model",
                                           "tensor parallelism splits the Llama, Mistral and Qwen2 decoders (transformers "
                                           "has a tp plan for those); set tp_size: 1 for this model"));
        else if (a)
            for (auto [what, count] : {std::pair{"num_attention_heads", a->numAttentionHeads},
                                       {"num_key_value_heads", a->numKeyValueHeads},
                                       {"intermediate_size", a->intermediateSize}})
                if (count % e.tpSize != 0)
                    problems.push_back(unsupported(key, size + " with the model's " + what + " " + std::to_string(count),
                                                   std::string("each rank of a tensor group takes an equal share of the ") + what
                                                       + "; choose a tp_size that divides it"));
    }
    if (plan.recipe.model.lora.enabled)
        problems.push_back(unsupported(key, size + " with model.lora",
                                       "the adapters would have to be split with their projections, which this engine "
                                       "does not do; set tp_size: 1 for LoRA"));
    if (plan.precision == precision::PrecisionMode::Fp8)
        problems.push_back(unsupported(key, size + " with mixed_precision fp8",
                                       "the fp8 layers' scales would have to span the split weights; use bf16 with tp_size"));
    if (plan.sharding && plan.sharding->activationCheckpointing)
        problems.push_back(unsupported(key, size + " with fsdp_activation_checkpointing",
                                       "recomputing split layers is not implemented in this engine; set "
                                       "fsdp_activation_checkpointing: false"));
    // The gradients' norm tells split parameters from whole ones by name: one optimizer parameter
    // per model parameter, as FSDP2 has anyway.
    if (plan.sharding)
        plan.sharding->useOrigParams = true;
}

// DeepSpeed: what of the ZeRO options this engine cannot run.
void refuseDeepSpeed(const ParallelismSpec& s, std::vector<Diagnostic>& problems)
{
    if (s.offloadOptimizerDevice != "none" && s.offloadOptimizerDevice != "cpu")
        problems.push_back(unsupported("deepspeed_config.offload_optimizer_device", s.offloadOptimizerDevice, "use cpu or none"));
    if (s.offloadParamDevice != "none" && s.offloadParamDevice != "cpu")
        problems.push_back(unsupported("deepspeed_config.offload_param_device", s.offloadParamDevice, "use cpu or none"));
    else if (s.offloadParamDevice == "cpu" && s.zeroStage != 3)
        problems.push_back({Severity::Error, "deepspeed_config.offload_param_device",
                            "deepspeed_config.offload_param_device: cpu needs zero_stage 3 (parameters are partitioned only "
                            "there); set zero_stage: 3 or offload_param_device: none"});
}

// The launch's shape and Accelerate's environment from the config.
void planShape(const PlanInputs& in, RunPlan& plan, EngineChoices& engine, std::vector<Diagnostic>& problems)
{
    if (!in.config) {
        plan.numProcesses = in.numProcesses;
        plan.numMachines = std::max(1, in.numMachines);
        plan.machineRank = in.machineRank;
        plan.mainProcessIp = in.mainProcessIp;
        plan.mainProcessPort = in.mainProcessPort;
        plan.distributedType = in.numProcesses > 1 ? "MULTI_CPU" : "NO";
        return;
    }
    // As accelerate launch reads the file's spellings (validation warns about them).
    const AccelerateConfig c = normalizeConfig(*in.config);
    plan.distributedType = c.distributedType().empty() ? "NO" : c.distributedType();
    plan.numProcesses = static_cast<int>(c.intField("num_processes").value_or(1));
    if (plan.numProcesses < 1)
        problems.push_back({Severity::Error, "num_processes",
                            "num_processes is " + std::to_string(plan.numProcesses)
                                + "; give --num_processes or set num_processes in the config file"});
    plan.numMachines = std::max(1, static_cast<int>(c.intField("num_machines").value_or(1)));
    plan.machineRank = static_cast<int>(c.intField("machine_rank").value_or(0));
    if (auto ip = text(c.given().find("main_process_ip")); !ip.empty())
        plan.mainProcessIp = ip;
    plan.mainProcessPort = static_cast<int>(c.intField("main_process_port").value_or(0));
    // The one reading of the parallelism keys; what this engine cannot run is refused below.
    ParallelismReading reading = interpretParallelism(c, in.configBaseDir);
    problems.insert(problems.end(), reading.problems.begin(), reading.problems.end());
    static_cast<ParallelismSpec&>(engine) = reading.spec;
    engine.mixedPrecision = mixedPrecisionOf(c, reading.spec);
    // What DeepSpeed itself will use, over the recipe's values (ZeRO-0 is plain DDP).
    if (reading.ok() && engine.zeroStage > 0) {
        engine.gradientAccumulationSteps = engine.deepSpeedGradientAccumulationSteps.value_or(0);
        engine.maxGradNorm = engine.deepSpeedGradientClipping.value_or(-1.0);
    }

    const std::string& type = plan.distributedType;
    const bool hasGpu = in.machine.gpuCount > 0;
    if (type == "NO") {
        if (plan.numProcesses > 1)
            problems.push_back({Severity::Error, "num_processes",
                                "distributed_type NO runs one process, but num_processes is " + std::to_string(plan.numProcesses)
                                    + "; choose MULTI_CPU or MULTI_GPU, or one process"});
    } else if (type == "MULTI_CPU") {
    } else if (type == "MULTI_GPU" && !hasGpu && c.boolField("use_cpu")) {
        // As the FSDP and DeepSpeed configs with use_cpu: DDP (and tp) on the CPU engine (Gloo);
        // Accelerate runs it as MULTI_CPU with the config's parallelism_config (validation warns).
        refuseMesh(type, engine, problems);
    } else if (type == "MULTI_GPU") {
        refuseMesh(type, engine, problems);
        if (!hasGpu)
            problems.push_back({Severity::Error, "distributed_type",
                                "distributed_type MULTI_GPU needs NVIDIA GPUs and this machine has none; use MULTI_CPU to run "
                                "on the CPU"});
        engine.backend = "nccl";
    } else if (type == "FSDP") {
        refuseFsdp(engine, problems);
        refuseMesh(type, engine, problems);
        engine.backend = hasGpu ? "nccl" : "";
    } else if (type == "DEEPSPEED") {
        refuseDeepSpeed(engine, problems);
        refuseMesh(type, engine, problems);
        engine.backend = hasGpu ? "nccl" : "";
    } else {
        problems.push_back(unsupported("distributed_type", type, "use NO, MULTI_CPU, MULTI_GPU, FSDP or DEEPSPEED"));
    }
    for (const auto& [name, value] : launchEnvironment(c, in.environment))
        plan.environment.push_back(name + "=" + value);
    if (engine.backend == "nccl")
        if (auto ids = text(c.given().find("gpu_ids")); !ids.empty() && ids != "all")
            plan.environment.push_back("CUDA_VISIBLE_DEVICES=" + ids);
}

// FSDP's or ZeRO's choices as the sharded wrapper's options (parallel/sharded.h).
std::optional<parallel::ShardingOptions> shardingOf(const EngineChoices& e, int numProcesses, int localProcesses)
{
    parallel::ShardingOptions sharding;
    sharding.backwardPrefetch = e.fsdpBackwardPrefetch != "NO_PREFETCH";
    sharding.forwardPrefetch = e.fsdpForwardPrefetch;
    sharding.activationCheckpointing = e.fsdpActivationCheckpointing;
    if (!e.fsdpShardingStrategy.empty() && e.fsdpShardingStrategy != "NO_SHARD") {
        const std::string& strategy = e.fsdpShardingStrategy;
        sharding.reshardAfterForward = strategy == "FULL_SHARD" || strategy == "HYBRID_SHARD";
        if (strategy == "HYBRID_SHARD" || strategy == "HYBRID_SHARD_ZERO2")
            sharding.hybridGroupSize = localProcesses; // shard within this machine
        else if (e.dpShardSize > 1 && e.dpShardSize * e.tpSize < numProcesses)
            sharding.hybridGroupSize = e.dpShardSize; // parallelism_config's HSDP: dp_shard groups, replicated
        sharding.offloadToHost = e.fsdpOffloadParams;
        sharding.rankZeroLoadsWeights = e.fsdpCpuRamEfficientLoading;
        sharding.wrapPolicy = parallel::wrapPolicyNamed(e.fsdpAutoWrapPolicy);
        sharding.transformerLayerClasses = e.fsdpLayerClasses;
        sharding.minNumParams = e.fsdpMinNumParams;
        sharding.useOrigParams = e.fsdpUseOrigParams;
        return sharding;
    }
    if (e.zeroStage == 0)
        return std::nullopt;
    sharding.zeroStage = e.zeroStage;
    sharding.reshardRootAfterForward = true; // DeepSpeed releases every parameter after use
    sharding.useOrigParams = true; // DeepSpeed partitions per parameter group
    sharding.offloadToHost = e.offloadOptimizerDevice == "cpu" || e.offloadParamDevice == "cpu";
    // zero.Init: no rank builds the whole model for itself; the nearest here is rank 0's weights,
    // each other rank receiving only its partition.
    sharding.rankZeroLoadsWeights = e.zero3Init;
    return sharding;
}

// The recipe as it will run, checked as a rank would check it.
void planRecipe(const PlanInputs& in, const EngineChoices& e, RunPlan& plan, std::vector<Diagnostic>& problems)
{
    Recipe& r = plan.recipe;
    r = *in.recipe;
    std::string changed;
    auto note = [&](const std::string& what) { changed += (changed.empty() ? " with " : ", ") + what; };
    if (in.maxSteps > 0) {
        r.maxSteps = in.maxSteps;
        note("--max_steps " + std::to_string(in.maxSteps));
    }
    if (e.maxSteps > 0) {
        r.maxSteps = e.maxSteps;
        note("engine flag --max_steps " + std::to_string(e.maxSteps));
    }
    if (e.gradientAccumulationSteps > 0) {
        r.gradientAccumulationSteps = e.gradientAccumulationSteps;
        note("gradient_accumulation_steps " + std::to_string(e.gradientAccumulationSteps));
    }
    if (e.maxGradNorm >= 0) {
        r.maxGradNorm = e.maxGradNorm;
        note("max_grad_norm " + pythonFloatRepr(e.maxGradNorm));
    }
    // stage3_gather_16bit_weights_on_model_save: the 16-bit weights of a 16-bit run (an fp32 run
    // saves fp32, as DeepSpeed saves the module's own dtype).
    if (e.zero3Save16BitModel && plan.precision == precision::PrecisionMode::Fp16)
        r.exportModel.dtype = "float16";
    else if (e.zero3Save16BitModel && plan.precision != precision::PrecisionMode::No)
        r.exportModel.dtype = "bfloat16";
    if (!changed.empty())
        if (auto checked = parseRecipe(recipeToYaml(r), in.recipeSource + changed); !checked)
            problems.push_back({Severity::Error, "recipe", checked.error().message});
    if (plan.sharding && !plan.sharding->useOrigParams && !r.optimizer.noWeightDecay.empty())
        problems.push_back({Severity::Error, "fsdp_config.fsdp_use_orig_params",
                            "recipe: optimizer.no_weight_decay needs per-parameter optimizer groups, and sharded units "
                            "give the optimizer one flat shard each; set fsdp_use_orig_params: true in fsdp_config "
                            "(DeepSpeed always keeps parameter groups)"});
    // A Hugging Face model is refused here, before any rank starts, for anything the engine does
    // not implement (unsupportedFeatures), with its data checked against its vocabulary.
    if (in.readRecipeFiles) {
        if (!isHfFamilyType(r.model.type)) {
            if (auto inputs = checkRecipeInputs(r); !inputs)
                problems.push_back({Severity::Error, "recipe", in.recipeSource + ": " + inputs.error().message});
        } else if (auto architecture = checkArchitecture(r, in.recipeSource); !architecture) {
            problems.push_back({Severity::Error, "recipe", architecture.error().message});
        }
    }
    // Profiling: --profile's window after warm-up (steps 3 to 7, or the whole run when shorter),
    // or the recipe's; the engine flags win over both.
    plan.profileStartStep = r.profileStartStep;
    plan.profileSteps = r.profileSteps;
    if (in.profile) {
        plan.profileStartStep = std::min<std::int64_t>(3, r.maxSteps);
        plan.profileSteps = std::min<std::int64_t>(5, r.maxSteps - plan.profileStartStep + 1);
    }
    if (e.profileStartStep >= 0) {
        plan.profileStartStep = e.profileStartStep;
        plan.profileSteps = e.profileSteps;
    }
}

// mixed_precision fp8: its recipe from Accelerate's fp8 variables, and what this engine cannot
// combine with it.
void planFloat8(const PlanInputs& in, RunPlan& plan, std::vector<Diagnostic>& problems)
{
    if (plan.precision != precision::PrecisionMode::Fp8)
        return;
    plan.fp8 = float8OptionsFrom(plan.environment, problems);
    if (plan.recipe.model.lora.enabled)
        problems.push_back({Severity::Error, "recipe",
                            "mixed_precision fp8 with model.lora is not implemented in this engine (the adapters' "
                            "linear layers would change which layers are first and last); use bf16 for LoRA"});
    const bool checkpointing = plan.sharding && plan.sharding->activationCheckpointing;
    if (checkpointing && plan.fp8.scaling == Float8Options::Scaling::Delayed)
        problems.push_back({Severity::Error, "fsdp_config.fsdp_activation_checkpointing",
                            "delayed fp8 scaling (fp8_config.backend TE) with activation checkpointing is not implemented "
                            "in this engine: the recomputed forward would record its amaxes twice; use backend AO "
                            "(tensorwise scaling) or turn activation checkpointing off"});
    // torchao's fp8 all-gather is FSDP's (stage 3: the weights are gathered for every forward).
    if (plan.sharding && plan.distributedType == "FSDP" && plan.sharding->zeroStage == 3
        && plan.fp8.scaling == Float8Options::Scaling::Tensorwise)
        plan.sharding->float8AllGather = plan.fp8.fsdpFloat8AllGather;
    // Without a config, nothing else says so (validation does for a config on the CPU).
    if (!in.config && in.machine.gpuCount == 0)
        problems.push_back({Severity::Warning, "mixed_precision",
                            "mixed_precision fp8 on the CPU runs emulated (torch._scaled_mm without fp8 hardware): "
                            "the numbers of an fp8 run without its speed (slower than bf16); for tests and comparisons"});
}

} // namespace

std::string stateDictTypeName(StateDictType type)
{
    return type == StateDictType::Sharded ? "SHARDED_STATE_DICT" : "FULL_STATE_DICT";
}

std::string engineFlagHelp()
{
    std::string help;
    int testOnly = 0;
    for (const auto& f : engineFlags()) {
        // The reliability tests' faults are not for users: counted, not listed.
        if (std::string_view(f.help).rfind("fault injection:", 0) == 0) {
            ++testOnly;
            continue;
        }
        help += "  --" + std::string(f.name) + (f.takesValue ? (f.takesList ? " NAME..." : " VALUE") : "") + "  " + f.help + "\n";
    }
    if (testOnly > 0)
        help += "  (and " + std::to_string(testOnly)
                + " fault-injection flags for Shardscope's own tests: docs/RELIABILITY.md)\n";
    return help;
}

PlanResult buildRunPlan(const PlanInputs& in)
{
    PlanResult result;
    auto& problems = result.problems;
    RunPlan plan;
    plan.runDir = in.runDir;
    EngineChoices engine;
    if (in.config) {
        ValidationOptions validation;
        validation.forLaunch = true;
        validation.machine = in.machine;
        validation.baseDir = in.configBaseDir;
        problems = validateConfig(*in.config, validation);
    }
    planShape(in, plan, engine, problems);
    if (!in.mixedPrecision.empty())
        engine.mixedPrecision = in.mixedPrecision;
    parseEngineFlags(in.engineFlags, engine, problems);

    if (plan.numMachines == 1 && !isLoopbackHost(plan.mainProcessIp))
        problems.push_back({Severity::Error, "main_process_ip",
                            "main_process_ip " + plan.mainProcessIp
                                + " would open the rendezvous store, which has no authentication, to the network for a run "
                                  "on this machine alone; leave it unset (127.0.0.1), or set num_machines for a job over "
                                  "several machines"});
    if (plan.numProcesses >= 1 && plan.numProcesses % plan.numMachines != 0)
        problems.push_back({Severity::Error, "num_processes",
                            "num_processes " + std::to_string(plan.numProcesses) + " is not a multiple of num_machines "
                                + std::to_string(plan.numMachines)
                                + "; num_processes counts the ranks of all machines together"});
    if (auto mode = precision::parseMode(engine.mixedPrecision.empty() ? "no" : engine.mixedPrecision); mode)
        plan.precision = *mode;
    else
        problems.push_back({Severity::Error, "mixed_precision", mode.error().message});
    plan.backend = engine.backend == "nccl" ? dist::BackendKind::Nccl : dist::BackendKind::Gloo;
    if (plan.backend == dist::BackendKind::Nccl && in.machine.gpuCount == 0 && plan.distributedType != "MULTI_GPU")
        problems.push_back(
            {Severity::Error, "--backend", "the nccl backend needs NVIDIA GPUs and this machine has none; use --backend gloo"});
    plan.sharding = shardingOf(engine, plan.numProcesses, plan.localProcesses());
    plan.stateLayout = stateLayoutOf(engine, plan.numProcesses, plan.numMachines);
    plan.stateDictType = engine.fsdpStateDictType == "SHARDED_STATE_DICT" && plan.sharding ? StateDictType::Sharded
                                                                                           : StateDictType::Full;
    plan.threads = engine.threads > 0 ? engine.threads : std::min(in.environment.inheritedOmpThreads.value_or(0), 4096);
    plan.faults = engine.faults;
    if (in.recipe)
        planRecipe(in, engine, plan, problems);
    planFloat8(in, plan, problems);
    planTensorParallel(in, engine, plan, problems);
    // Accelerate's checks (validateConfig) and the planner's can name the same key; one error per
    // key is enough, the first being the more specific.
    std::vector<Diagnostic> unique;
    for (auto& d : problems) {
        const bool repeated = d.severity == Severity::Error
                              && std::any_of(unique.begin(), unique.end(), [&](const Diagnostic& u) {
                                     return u.severity == Severity::Error && u.keyPath == d.keyPath;
                                 });
        if (!repeated)
            unique.push_back(std::move(d));
    }
    problems = std::move(unique);
    if (!hasErrors(problems))
        result.plan = std::move(plan);
    return result;
}

// --- plan.json -------------------------------------------------------------------------------

namespace {

using nlohmann::json;

json shardingToJson(const parallel::ShardingOptions& s)
{
    const char* policy = s.wrapPolicy == parallel::WrapPolicy::SizeBased ? "SIZE_BASED_WRAP"
                         : s.wrapPolicy == parallel::WrapPolicy::NoWrap  ? "NO_WRAP"
                                                                         : "TRANSFORMER_BASED_WRAP";
    return {{"zero_stage", s.zeroStage},
            {"reshard_after_forward", s.reshardAfterForward},
            {"reshard_root_after_forward", s.reshardRootAfterForward},
            {"wrap_policy", policy},
            {"transformer_layer_classes", s.transformerLayerClasses},
            {"min_num_params", s.minNumParams},
            {"backward_prefetch", s.backwardPrefetch},
            {"forward_prefetch", s.forwardPrefetch},
            {"use_orig_params", s.useOrigParams},
            {"activation_checkpointing", s.activationCheckpointing},
            {"offload_to_host", s.offloadToHost},
            {"rank_zero_loads_weights", s.rankZeroLoadsWeights},
            {"hybrid_group_size", s.hybridGroupSize},
            {"float8_all_gather", s.float8AllGather}};
}

// Reads fields with their types checked; the first wrong one is the error, naming it.
class FieldReader {
public:
    FieldReader(const json& object, std::string where) : m_object(object), m_where(std::move(where)) { }

    template <typename T>
    void read(const char* name, T& out)
    {
        if (!m_error.empty())
            return;
        const auto it = m_object.find(name);
        if (it == m_object.end()) {
            m_error = m_where + name + " is missing";
            return;
        }
        try {
            out = it->template get<T>();
        } catch (const json::exception&) {
            m_error = m_where + name + " has the wrong type (" + it->type_name() + ")";
        }
    }
    // A field later versions added: plan.json files from before it are still read.
    template <typename T>
    void readIfPresent(const char* name, T& out)
    {
        if (m_object.contains(name))
            read(name, out);
    }
    const json* object(const char* name)
    {
        const auto it = m_object.find(name);
        if (m_error.empty() && (it == m_object.end() || !(it->is_object() || it->is_null())))
            m_error = m_where + name + " is missing or not an object";
        return m_error.empty() && it->is_object() ? &*it : nullptr;
    }
    void fail(const std::string& message)
    {
        if (m_error.empty())
            m_error = m_where + message;
    }
    const std::string& error() const { return m_error; }

private:
    const json& m_object;
    std::string m_where;
    std::string m_error;
};

Result<Float8Options> float8FromJson(const json& object, const std::string& source)
{
    Float8Options o;
    FieldReader f(object, source + ": fp8.");
    std::string scaling;
    f.read("scaling", scaling);
    f.read("amax_history_len", o.amaxHistoryLen);
    f.read("amax_compute_max", o.amaxComputeMax);
    f.read("margin", o.margin);
    f.read("interval", o.interval);
    f.read("in_eval", o.inEval);
    f.read("fsdp_float8_all_gather", o.fsdpFloat8AllGather);
    if (f.error().empty() && scaling != "tensorwise" && scaling != "delayed")
        f.fail("scaling '" + scaling + "' is not tensorwise or delayed");
    if (f.error().empty() && (o.amaxHistoryLen < 1 || o.interval < 1 || o.margin < 0))
        f.fail("amax_history_len and interval must be at least 1, margin at least 0");
    if (!f.error().empty())
        return makeError(f.error());
    o.scaling = scaling == "delayed" ? Float8Options::Scaling::Delayed : Float8Options::Scaling::Tensorwise;
    return o;
}

} // namespace

std::string planToJson(const RunPlan& p)
{
    json j = {{"format", RunPlan::kFormatVersion},
              {"num_processes", p.numProcesses},
              {"num_machines", p.numMachines},
              {"machine_rank", p.machineRank},
              {"main_process_ip", p.mainProcessIp},
              {"main_process_port", p.mainProcessPort},
              {"distributed_type", p.distributedType},
              {"environment", p.environment},
              {"run_dir", p.runDir},
              // The recipe as it runs, in its own YAML (one schema, one parser).
              {"recipe", recipeToYaml(p.recipe)},
              {"backend", dist::backendName(p.backend)},
              {"mixed_precision", std::string(precision::modeName(p.precision))},
              {"fp8",
               {{"scaling", p.fp8.scaling == Float8Options::Scaling::Delayed ? "delayed" : "tensorwise"},
                {"amax_history_len", p.fp8.amaxHistoryLen},
                {"amax_compute_max", p.fp8.amaxComputeMax},
                {"margin", p.fp8.margin},
                {"interval", p.fp8.interval},
                {"in_eval", p.fp8.inEval},
                {"fsdp_float8_all_gather", p.fp8.fsdpFloat8AllGather}}},
              {"sharding", p.sharding ? shardingToJson(*p.sharding) : json(nullptr)},
              {"state_layout",
               {{"zero_stage", p.stateLayout.zeroStage},
                {"shard_ranks", p.stateLayout.shardRanks},
                {"full_params_forward_to_backward", p.stateLayout.fullParamsForwardToBackward},
                {"tensor_parallel", p.stateLayout.tensorParallel},
                {"offload_optimizer", p.stateLayout.offloadOptimizer},
                {"offload_params", p.stateLayout.offloadParams},
                {"offload_grads", p.stateLayout.offloadGrads},
                {"activation_checkpointing", p.stateLayout.activationCheckpointing},
                {"autocast", p.stateLayout.autocast},
                {"label", p.stateLayout.label},
                {"notes", p.stateLayout.notes}}},
              {"state_dict_type", stateDictTypeName(p.stateDictType)},
              {"tensor_parallel_size", p.tensorParallelSize},
              {"resume_from", p.resumeFrom},
              {"checkpoints_dir", p.checkpointsDir},
              {"machine_peaks_file", p.machinePeaksFile},
              {"profile_start_step", p.profileStartStep},
              {"profile_steps", p.profileSteps},
              {"threads", p.threads},
              {"faults",
               {{"crash_in_checkpoint_at_step", p.faults.crashInCheckpointAtStep},
                {"inject_nonfinite_grad_at_step", p.faults.injectNonfiniteGradAtStep},
                {"fill_disk_at_step", p.faults.fillDiskAtStep},
                {"fill_disk_rank", p.faults.fillDiskRank},
                {"slow_rank", p.faults.slowRank},
                {"slow_forward_ms", p.faults.slowForwardMs},
                {"spike_at_step", p.faults.spikeAtStep},
                {"skip_collective_rank", p.faults.skipCollectiveRank},
                {"skip_collective_seq", p.faults.skipCollectiveSeq},
                {"spin_rank", p.faults.spinRank},
                {"spin_at_step", p.faults.spinAtStep},
                {"nonfinite_output_module", p.faults.nonfiniteOutputModule},
                {"nonfinite_output_at_step", p.faults.nonfiniteOutputAtStep},
                {"out_of_memory_at_step", p.faults.outOfMemoryAtStep},
                {"diagnostics_ab", p.faults.diagnosticsAb},
                {"dump_params", p.faults.dumpParamsPath},
                {"dump_initial", p.faults.dumpInitialPath}}}};
    return j.dump(2) + "\n";
}

namespace {

// The plan's fault injection (tests only), from its "faults" object.
Result<void> faultsFromJson(const json& faults, const std::string& source, FaultInjection& out)
{
    FieldReader f(faults, source + ": faults.");
    f.read("crash_in_checkpoint_at_step", out.crashInCheckpointAtStep);
    f.read("inject_nonfinite_grad_at_step", out.injectNonfiniteGradAtStep);
    f.read("fill_disk_at_step", out.fillDiskAtStep);
    f.read("fill_disk_rank", out.fillDiskRank);
    f.read("slow_rank", out.slowRank);
    f.read("slow_forward_ms", out.slowForwardMs);
    f.read("spike_at_step", out.spikeAtStep);
    f.read("skip_collective_rank", out.skipCollectiveRank);
    f.read("skip_collective_seq", out.skipCollectiveSeq);
    f.read("spin_rank", out.spinRank);
    f.read("spin_at_step", out.spinAtStep);
    f.read("nonfinite_output_module", out.nonfiniteOutputModule);
    f.read("nonfinite_output_at_step", out.nonfiniteOutputAtStep);
    f.read("out_of_memory_at_step", out.outOfMemoryAtStep);
    f.read("diagnostics_ab", out.diagnosticsAb);
    f.read("dump_params", out.dumpParamsPath);
    f.read("dump_initial", out.dumpInitialPath);
    if (!f.error().empty())
        return makeError(f.error());
    return {};
}

} // namespace

MeshDescription describeMesh(const RunPlan& plan)
{
    MeshDescription mesh;
    const int world = plan.numProcesses;
    const int tp = plan.tensorParallelSize;
    const int hybrid = plan.sharding ? plan.sharding->hybridGroupSize : 0;
    const auto n = [](int v) { return std::to_string(v); };
    if (tp > 1 && world % tp == 0) {
        const int data = world / tp;
        const std::string dataDim = plan.sharding ? "dp_shard" : "dp_replicate";
        mesh.summary = (data > 1 ? dataDim + " " + n(data) + " x " : "") + "tp " + n(tp) + ": "
                       + describeMeshGroups(world, tp, "tensor", "data");
        for (int r = 0; r < world; ++r)
            mesh.ranks.push_back("rank " + n(r) + ": tensor group " + n(r / tp) + " (its rank " + n(r % tp)
                                 + "), data-parallel rank " + n(r / tp) + " of " + n(data));
    } else if (hybrid > 0 && hybrid < world && world % hybrid == 0) {
        mesh.summary = "dp_replicate " + n(world / hybrid) + " x dp_shard " + n(hybrid) + ": "
                       + describeMeshGroups(world, hybrid, "shard", "replicate");
        for (int r = 0; r < world; ++r)
            mesh.ranks.push_back("rank " + n(r) + ": replica " + n(r / hybrid) + ", shard " + n(r % hybrid) + " of " + n(hybrid));
    }
    return mesh;
}

Result<RunPlan> planFromJson(const std::string& text, const std::string& source)
{
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        return makeError(source + ": not a JSON object (a run plan is written by shardscope launch)");
    RunPlan p;
    FieldReader fields(j, source + ": ");
    int format = 0;
    fields.read("format", format);
    if (fields.error().empty() && format != RunPlan::kFormatVersion)
        return makeError(source + ": run plan format " + std::to_string(format) + ", but this worker reads format "
                         + std::to_string(RunPlan::kFormatVersion) + "; launch it with the shardscope of this worker");
    fields.read("num_processes", p.numProcesses);
    fields.read("num_machines", p.numMachines);
    fields.read("machine_rank", p.machineRank);
    fields.read("main_process_ip", p.mainProcessIp);
    fields.read("main_process_port", p.mainProcessPort);
    fields.read("distributed_type", p.distributedType);
    fields.read("environment", p.environment);
    fields.read("run_dir", p.runDir);
    std::string recipe, backend, precisionName, stateDict;
    fields.read("recipe", recipe);
    fields.read("backend", backend);
    fields.read("mixed_precision", precisionName);
    fields.read("state_dict_type", stateDict);
    fields.readIfPresent("tensor_parallel_size", p.tensorParallelSize); // since 2026-12-07
    fields.read("resume_from", p.resumeFrom);
    fields.read("checkpoints_dir", p.checkpointsDir);
    fields.read("machine_peaks_file", p.machinePeaksFile);
    fields.read("profile_start_step", p.profileStartStep);
    fields.read("profile_steps", p.profileSteps);
    fields.read("threads", p.threads);
    if (const json* faults = fields.object("faults"))
        if (auto read = faultsFromJson(*faults, source, p.faults); !read)
            return read.error();
    if (const json* fp8 = fields.object("fp8")) {
        auto options = float8FromJson(*fp8, source);
        if (!options)
            return options.error();
        p.fp8 = *options;
    }
    if (const json* layout = fields.object("state_layout")) {
        ModelStateLayout& l = p.stateLayout;
        FieldReader f(*layout, source + ": state_layout.");
        f.read("zero_stage", l.zeroStage);
        f.read("shard_ranks", l.shardRanks);
        f.readIfPresent("full_params_forward_to_backward", l.fullParamsForwardToBackward); // since 2026-12-07
        f.readIfPresent("tensor_parallel", l.tensorParallel);
        f.read("offload_optimizer", l.offloadOptimizer);
        f.read("offload_params", l.offloadParams);
        f.read("offload_grads", l.offloadGrads);
        f.read("activation_checkpointing", l.activationCheckpointing);
        f.read("autocast", l.autocast);
        f.read("label", l.label);
        f.read("notes", l.notes);
        if (f.error().empty() && (l.zeroStage < 0 || l.zeroStage > 3 || l.shardRanks < 1))
            f.fail("zero_stage must be 0 to 3 and shard_ranks at least 1");
        if (!f.error().empty())
            return makeError(f.error());
    }
    if (const json* sharding = fields.object("sharding")) {
        parallel::ShardingOptions s;
        FieldReader f(*sharding, source + ": sharding.");
        std::string policy;
        f.read("zero_stage", s.zeroStage);
        f.read("reshard_after_forward", s.reshardAfterForward);
        f.read("reshard_root_after_forward", s.reshardRootAfterForward);
        f.read("wrap_policy", policy);
        f.read("transformer_layer_classes", s.transformerLayerClasses);
        f.read("min_num_params", s.minNumParams);
        f.read("backward_prefetch", s.backwardPrefetch);
        f.read("forward_prefetch", s.forwardPrefetch);
        f.read("use_orig_params", s.useOrigParams);
        f.read("activation_checkpointing", s.activationCheckpointing);
        f.read("offload_to_host", s.offloadToHost);
        f.read("rank_zero_loads_weights", s.rankZeroLoadsWeights);
        f.read("hybrid_group_size", s.hybridGroupSize);
        f.readIfPresent("float8_all_gather", s.float8AllGather);
        if (f.error().empty() && policy != "TRANSFORMER_BASED_WRAP" && policy != "SIZE_BASED_WRAP" && policy != "NO_WRAP")
            f.fail("wrap_policy '" + policy + "' is not TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP or NO_WRAP");
        if (f.error().empty() && (s.zeroStage < 1 || s.zeroStage > 3))
            f.fail("zero_stage " + std::to_string(s.zeroStage) + " is not 1, 2 or 3");
        if (!f.error().empty())
            return makeError(f.error());
        s.wrapPolicy = parallel::wrapPolicyNamed(policy);
        p.sharding = s;
    }
    if (!fields.error().empty())
        return makeError(fields.error());
    auto backendKind = dist::parseBackendName(backend);
    if (!backendKind)
        return makeError(source + ": backend '" + backend + "' is not gloo or nccl");
    p.backend = *backendKind;
    auto mode = precision::parseMode(precisionName);
    if (!mode)
        return makeError(source + ": " + mode.error().message);
    p.precision = *mode;
    if (stateDict != "FULL_STATE_DICT" && stateDict != "SHARDED_STATE_DICT")
        return makeError(source + ": state_dict_type '" + stateDict + "' is not FULL_STATE_DICT or SHARDED_STATE_DICT");
    p.stateDictType = stateDict == "SHARDED_STATE_DICT" ? StateDictType::Sharded : StateDictType::Full;
    if (p.tensorParallelSize < 1 || p.numProcesses % p.tensorParallelSize != 0)
        return makeError(source + ": tensor_parallel_size " + std::to_string(p.tensorParallelSize)
                         + " does not divide num_processes " + std::to_string(p.numProcesses));
    if (p.numProcesses < 1 || p.numMachines < 1 || p.numProcesses % p.numMachines != 0)
        return makeError(source + ": num_processes " + std::to_string(p.numProcesses) + " over num_machines "
                         + std::to_string(p.numMachines) + " is not a whole number of ranks per machine");
    auto parsed = parseRecipe(recipe, source + " (recipe)");
    if (!parsed)
        return parsed.error();
    p.recipe = *parsed;
    return p;
}

Result<RunPlan> loadPlan(const std::string& path)
{
    auto text = readTextFile(path);
    if (!text)
        return text.error();
    return planFromJson(*text, path);
}

} // namespace shardscope::config
