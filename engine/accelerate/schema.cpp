#include "engine/accelerate/schema.h"

#include "engine/common/edit_distance.h"

#include <algorithm>

namespace shardscope::config {

namespace {

using K = Value::Kind;

struct Builder {
    std::vector<KeySpec> specs;
    std::string section;

    KeySpec& add(std::string key, std::vector<K> types, Value def, std::string added, std::string doc,
                 std::vector<std::string> allowed = {})
    {
        KeySpec s;
        s.section = section;
        s.key = std::move(key);
        s.types = std::move(types);
        s.defaultValue = std::move(def);
        s.addedIn = std::move(added);
        s.doc = std::move(doc);
        s.allowed = std::move(allowed);
        specs.push_back(std::move(s));
        return specs.back();
    }
    KeySpec& required(std::string key, std::vector<K> types, std::string added, std::string doc,
                      std::vector<std::string> allowed = {})
    {
        KeySpec& s = add(std::move(key), std::move(types), Value(), std::move(added), std::move(doc), std::move(allowed));
        s.required = true;
        return s;
    }
};

const std::vector<std::string> kStrategies = {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2"};

void addBase(Builder& b, const std::vector<std::string>& distTypes)
{
    b.required("compute_environment", {K::String}, "0.1", "Where training runs", {"LOCAL_MACHINE", "AMAZON_SAGEMAKER"});
    b.required("distributed_type", {K::String}, "0.1", "The distribution paradigm", distTypes);
    b.required("mixed_precision", {K::String, K::Null}, "0.8", "Mixed precision mode", {"no", "fp16", "bf16", "fp8"});
    b.required("use_cpu", {K::Bool}, "0.8", "Train on CPU even when an accelerator is present");
    b.required("debug", {K::Bool}, "0.24", "Check distributed operations for errors (ACCELERATE_DEBUG_MODE)");
}

std::vector<KeySpec> buildSchema()
{
    Builder b;

    // ---- ClusterConfig (LOCAL_MACHINE): 31 fields in declaration order ----
    b.section = std::string(kClusterSection);
    addBase(b, distributedTypes());
    b.add("num_processes", {K::Int}, Value(-1), "0.1", "Total processes over all machines; -1: must be given at launch");
    b.add("machine_rank", {K::Int}, Value(0), "0.1", "Rank of this machine");
    b.add("num_machines", {K::Int}, Value(1), "0.1", "Number of machines");
    b.add("gpu_ids", {K::String}, Value(), "0.13", "Accelerators to use: all, or a comma-separated list of ids");
    b.add("main_process_ip", {K::String}, Value(), "0.1", "Address of the machine of rank 0 (multi-node)");
    b.add("main_process_port", {K::Int}, Value(), "0.1", "Port of the main process (multi-node); 0 picks a free one");
    b.add("rdzv_backend", {K::String}, Value("static"), "0.13", "torchrun rendezvous backend (static, c10d, ...)");
    b.add("same_network", {K::Bool}, Value(false), "0.13", "All machines on the same local network");
    b.add("main_training_function", {K::String}, Value("main"), "0.1", "Function launched on TPU");
    b.add("enable_cpu_affinity", {K::Bool}, Value(false), "0.29", "NUMA-aware CPU affinity (NVIDIA only)");
    b.add("fp8_config", {K::Map}, Value::emptyMap(), "0.34", "FP8 settings (mixed_precision: fp8)");
    b.add("deepspeed_config", {K::Map}, Value::emptyMap(), "0.5", "DeepSpeed settings");
    b.add("fsdp_config", {K::Map}, Value::emptyMap(), "0.8", "FSDP settings");
    b.add("parallelism_config", {K::Map}, Value::emptyMap(), "1.10", "N-D parallelism sizes (FSDP2)");
    b.add("megatron_lm_config", {K::Map}, Value::emptyMap(), "0.14", "Megatron-LM settings");
    b.add("mpirun_config", {K::Map}, Value::emptyMap(), "0.28", "mpirun settings (multi-CPU)");
    b.add("downcast_bf16", {K::Bool, K::String}, Value(false), "0.12",
          "TPU: cast float to bf16 and keep double in fp32 ('no' as written by the questionnaire)");
    b.add("tpu_name", {K::String}, Value(), "0.14", "TPU cluster name");
    b.add("tpu_zone", {K::String}, Value(), "0.14", "TPU cluster zone");
    b.add("tpu_use_cluster", {K::Bool}, Value(false), "0.17", "Use a TPU pod");
    b.add("tpu_use_sudo", {K::Bool, K::String}, Value(false), "0.17", "Run the TPU pod script with sudo (stored raw)");
    b.add("command_file", {K::String}, Value(), "0.14", "TPU: startup script");
    b.add("commands", {K::List}, Value(), "0.14", "TPU: startup commands");
    b.add("tpu_vm", {K::List}, Value(), "0.17", "TPU: compute VM names");
    b.add("tpu_env", {K::List}, Value(), "0.17", "TPU: environment variables for each pod");
    b.add("dynamo_config", {K::Map}, Value::emptyMap(), "0.17", "torch.compile settings");
    // Removed or converted top-level keys still found in old files.
    {
        auto& s = b.add("fp16", {K::Bool}, Value(), "0.1", "Legacy: converted to mixed_precision: fp16");
        s.removedIn = "0.8";
        s.convertedOnLoad = true;
        auto& d = b.add("dynamo_backend", {K::String}, Value(), "0.15", "Legacy: converted to dynamo_config");
        d.removedIn = "0.17";
        d.convertedOnLoad = true;
        b.add("ipex_config", {K::Map}, Value(), "0.20", "Removed: Intel extension settings").removedIn = "1.13";
        b.add("tp_config", {K::Map}, Value(), "1.4", "Removed: tensor-parallel settings").removedIn = "1.7";
    }

    // ---- SageMakerConfig: 21 fields ----
    b.section = std::string(kSageMakerSection);
    addBase(b, sageMakerDistributedTypes());
    b.required("ec2_instance_type", {K::String}, "0.5", "EC2 instance type, e.g. ml.p3.2xlarge");
    b.required("iam_role_name", {K::String}, "0.5", "IAM role for SageMaker training jobs");
    b.add("image_uri", {K::String}, Value(), "0.5", "Custom docker image");
    b.add("profile", {K::String}, Value(), "0.5", "AWS profile");
    b.add("region", {K::String}, Value("us-east-1"), "0.5", "AWS region");
    b.add("num_machines", {K::Int}, Value(1), "0.5", "Number of machines");
    b.add("gpu_ids", {K::String}, Value("all"), "0.13", "Should never be set");
    b.add("base_job_name", {K::String}, Value("accelerate-sagemaker-1"), "0.5", "SageMaker job name prefix");
    b.add("pytorch_version", {K::String}, Value("1.10.2"), "0.5", "SageMaker PyTorch version");
    b.add("transformers_version", {K::String}, Value("4.17.0"), "0.5", "SageMaker transformers version");
    b.add("py_version", {K::String}, Value("py38"), "0.5", "SageMaker Python version");
    b.add("sagemaker_inputs_file", {K::String}, Value(), "0.8", "TSV of input channels");
    b.add("sagemaker_metrics_file", {K::String}, Value(), "0.8", "TSV of metric regexes");
    b.add("additional_args", {K::Map}, Value(), "0.14", "Extra estimator arguments");
    b.add("dynamo_config", {K::Map}, Value::emptyMap(), "0.17", "torch.compile settings");
    b.add("enable_cpu_affinity", {K::Bool}, Value(false), "0.29", "NUMA-aware CPU affinity");

    // ---- deepspeed_config ----
    b.section = "deepspeed_config";
    const std::vector<std::string> devices = {"none", "cpu", "nvme"};
    b.add("deepspeed_config_file", {K::String}, Value("none"), "0.6", "DeepSpeed JSON file; none: build one from these keys");
    b.add("zero_stage", {K::Int}, Value(2), "0.5", "ZeRO stage 0-3");
    b.add("offload_optimizer_device", {K::String}, Value("none"), "0.5", "Where optimizer states live", devices);
    b.add("offload_param_device", {K::String}, Value("none"), "0.6", "Where parameters live (stage 3)", devices);
    b.add("offload_param_nvme_path", {K::String}, Value("none"), "0.14", "NVMe path for parameters");
    b.add("offload_optimizer_nvme_path", {K::String}, Value("none"), "0.14", "NVMe path for optimizer states");
    b.add("gradient_accumulation_steps", {K::Int}, Value("auto"), "0.5", "Gradient accumulation steps");
    b.add("gradient_clipping", {K::Float}, Value("auto"), "0.6", "Gradient clipping value");
    b.add("zero3_save_16bit_model", {K::Bool}, Value(false), "0.6", "Gather 16-bit weights when saving (stage 3)");
    b.add("zero3_init_flag", {K::Bool}, Value(), "0.6", "deepspeed.zero.Init for huge models (stage 3)");
    b.add("deepspeed_moe_layer_cls_names", {K::String}, Value(), "0.29", "MoE layer classes");
    b.add("deepspeed_multinode_launcher", {K::String}, Value("pdsh"), "0.10", "Multi-node launcher",
          {"pdsh", "standard", "openmpi", "mvapich", "mpich", "nossh", "slurm"});
    b.add("deepspeed_hostfile", {K::String}, Value(), "0.10", "Hostfile (hostname slots=N)");
    b.add("deepspeed_exclusion_filter", {K::String}, Value(), "0.10", "--exclude filter");
    b.add("deepspeed_inclusion_filter", {K::String}, Value(), "0.10", "--include filter");

    // ---- fsdp_config ----
    b.section = "fsdp_config";
    b.add("fsdp_version", {K::Int}, Value(1), "1.6", "FSDP 1 or 2 (2 needs torch >= 2.6)");
    b.add("fsdp_reshard_after_forward", {K::Bool, K::String}, Value(true), "1.6",
          "v2: reshard after forward (bool); v1 files hold the sharding strategy name here");
    b.add("fsdp_sharding_strategy", {K::String, K::Int}, Value("FULL_SHARD"), "0.8",
          "FSDP1 sharding strategy (name or 1-5); the one FSDP1 really uses");
    b.add("fsdp_offload_params", {K::Bool}, Value(false), "0.8", "Offload parameters and gradients to CPU");
    b.add("fsdp_auto_wrap_policy", {K::String}, Value("NO_WRAP"), "0.10", "Auto-wrap policy",
          {"TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP"});
    b.add("fsdp_transformer_layer_cls_to_wrap", {K::String}, Value(), "0.10", "Layer classes to wrap (comma list)");
    b.add("fsdp_min_num_params", {K::Int}, Value(100000000), "0.8", "Size-based wrap threshold");
    b.add("fsdp_backward_prefetch", {K::String}, Value(), "0.26", "FSDP1 backward prefetch",
          {"BACKWARD_PRE", "BACKWARD_POST", "NO_PREFETCH"});
    b.add("fsdp_state_dict_type", {K::String}, Value(), "0.12", "Checkpoint state-dict type",
          {"FULL_STATE_DICT", "LOCAL_STATE_DICT", "SHARDED_STATE_DICT"});
    b.add("fsdp_forward_prefetch", {K::Bool}, Value(false), "0.18", "FSDP1 forward prefetch");
    b.add("fsdp_use_orig_params", {K::Bool}, Value(true), "0.18", "FSDP1 use_orig_params");
    b.add("fsdp_cpu_ram_efficient_loading", {K::Bool}, Value(true), "0.24", "Only rank 0 loads pretrained weights");
    b.add("fsdp_sync_module_states", {K::Bool}, Value(true), "0.18", "FSDP1: broadcast module states from rank 0");
    b.add("fsdp_activation_checkpointing", {K::Bool}, Value(false), "0.30", "Activation checkpointing");
    b.add("fsdp_activation_checkpointing_offload", {K::Bool}, Value(false), "1.10",
          "FSDP2: offload checkpointed activations to the CPU (a launcher flag; not asked by the questionnaire)");
    b.add("fsdp_ignored_modules", {K::String}, Value(), "1.8", "Regex of modules FSDP ignores");
    b.add("fsdp_backward_prefetch_policy", {K::String}, Value(), "0.10", "Legacy name, ignored by the launcher").removedIn =
        "0.26";

    // ---- parallelism_config ----
    b.section = "parallelism_config";
    b.add("parallelism_config_dp_replicate_size", {K::Int}, Value(1), "1.10", "HSDP replica groups");
    b.add("parallelism_config_dp_shard_size", {K::Int}, Value(1), "1.10", "FSDP shard group size");
    b.add("parallelism_config_tp_size", {K::Int}, Value(1), "1.10", "Tensor parallel size");
    b.add("parallelism_config_cp_size", {K::Int}, Value(1), "1.10", "Context parallel size (FSDP2)");
    b.add("parallelism_config_cp_comm_strategy", {K::String}, Value("allgather"), "1.10", "CP communication",
          {"allgather", "alltoall"});
    b.add("parallelism_config_cp_backend", {K::String}, Value("torch"), "1.10", "CP backend", {"torch"});
    b.add("parallelism_config_sp_size", {K::Int}, Value(1), "1.12", "DeepSpeed sequence parallel size");
    b.add("parallelism_config_sp_backend", {K::String}, Value("deepspeed"), "1.12", "SP backend", {"deepspeed"});
    b.add("parallelism_config_sp_seq_length", {K::String, K::Int}, Value(), "1.12", "SP sequence length");
    b.add("parallelism_config_sp_seq_length_is_variable", {K::Bool}, Value(true), "1.12", "Variable SP length");
    b.add("parallelism_config_sp_attn_implementation", {K::String}, Value("sdpa"), "1.12", "SP attention kernel");

    // ---- megatron_lm_config ----
    b.section = "megatron_lm_config";
    b.add("megatron_lm_tp_degree", {K::Int}, Value(1), "0.14", "Tensor parallel degree");
    b.add("megatron_lm_sequence_parallelism", {K::Bool}, Value(), "0.14", "Sequence parallelism (tp > 1)");
    b.add("megatron_lm_pp_degree", {K::Int}, Value(1), "0.14", "Pipeline parallel degree");
    b.add("megatron_lm_num_micro_batches", {K::Int}, Value(), "0.14", "Micro-batches (pp > 1)");
    b.add("megatron_lm_recompute_activations", {K::Bool}, Value(), "0.14", "Selective activation recomputation");
    b.add("megatron_lm_use_distributed_optimizer", {K::Bool}, Value(), "0.14", "Distributed optimizer");
    b.add("megatron_lm_gradient_clipping", {K::Float}, Value(1.0), "0.14", "Gradient clipping (0 disables)");
    for (const char* k : {"use_custom_fsdp", "no_load_optim", "eod_mask_loss", "overlap_cpu_optimizer_d2h_h2d", "no_save_optim",
                          "optimizer_cpu_offload", "use_precision_aware_optimizer", "attention_softmax_in_fp32",
                          "calculate_per_token_loss", "use_rotary_position_embeddings"})
        b.add(std::string("megatron_lm_") + k, {K::Bool}, Value(), "1.0", "Megatron-LM launcher flag");
    for (const char* k : {"decoder_last_pipeline_num_layers", "recompute_num_layers", "expert_model_parallel_size",
                          "context_parallel_size", "expert_tensor_parallel_size"})
        b.add(std::string("megatron_lm_") + k, {K::Int}, Value(), "1.0", "Megatron-LM launcher value");
    b.add("megatron_lm_recompute_granularity", {K::String}, Value(), "1.0", "Recompute granularity", {"full", "selective"});
    b.add("megatron_lm_recompute_method", {K::String}, Value(), "1.0", "Recompute method", {"uniform", "block"});
    b.add("megatron_lm_attention_backend", {K::String, K::Bool}, Value(), "1.0", "Attention backend");
    b.add("megatron_lm_attention_dropout", {K::Float}, Value(), "1.0", "Attention dropout");
    b.add("megatron_lm_hidden_dropout", {K::Float}, Value(), "1.0", "Hidden dropout");

    // ---- fp8_config ----
    b.section = "fp8_config";
    b.add("backend", {K::String}, Value(), "0.34", "FP8 backend (upper-case)", {"AO", "TE", "MSAMP"});
    b.add("use_autocast_during_eval", {K::Bool}, Value(false), "0.34", "TE: FP8 autocast in eval");
    b.add("margin", {K::Int}, Value(0), "0.34", "TE: scaling margin");
    b.add("interval", {K::Int}, Value(1), "0.34", "TE: scaling-factor recompute interval");
    b.add("fp8_format", {K::String}, Value("HYBRID"), "0.34", "TE: FP8 format", {"HYBRID", "E4M3", "E5M2"});
    b.add("amax_history_length", {K::Int}, Value(1024), "0.34", "TE: amax history (questionnaire spelling)");
    b.add("amax_compute_algorithm", {K::String}, Value("max"), "0.34", "TE: amax algorithm (questionnaire spelling)",
          {"max", "most_recent"});
    b.add("override_linear_precision", {K::List}, Value(Value::List{false, false, false}), "0.34",
          "TE: [fprop, dgrad, wgrad] in higher precision");
    b.add("optimization_level", {K::String}, Value("O2"), "0.34", "MS-AMP level (questionnaire spelling)", {"O1", "O2"});
    b.add("enable_fsdp_float8_all_gather", {K::Bool}, Value(true), "1.13", "AO: FSDP2 float8 all-gather");
    b.add("pad_inner_dim", {K::Bool}, Value(true), "1.13", "AO: pad inner dimension");
    b.add("amax_history_len", {K::Int}, Value(1024), "0.34", "TE: amax history (runtime spelling)");
    b.add("amax_compute_algo", {K::String}, Value("most_recent"), "0.34", "TE: amax algorithm (runtime spelling)",
          {"max", "most_recent"});
    b.add("opt_level", {K::String}, Value("O2"), "0.34", "MS-AMP level (runtime spelling)", {"O1", "O2"});
    b.add("use_mxfp8_block_scaling", {K::Bool}, Value(false), "1.10", "TE: MXFP8 block scaling");

    // ---- dynamo_config ----
    b.section = "dynamo_config";
    b.add("dynamo_backend", {K::String}, Value("NO"), "0.17", "torch.compile backend (upper-case)", dynamoBackends());
    b.add("dynamo_mode", {K::String}, Value("default"), "0.17", "torch.compile mode",
          {"default", "reduce-overhead", "max-autotune"});
    b.add("dynamo_use_fullgraph", {K::Bool}, Value(false), "0.17", "Full-graph mode");
    b.add("dynamo_use_dynamic", {K::Bool}, Value(false), "0.17", "Dynamic shapes");
    b.add("dynamo_use_regional_compilation", {K::Bool}, Value(false), "1.3", "Regional compilation");

    // ---- mpirun_config ----
    b.section = "mpirun_config";
    b.add("mpirun_hostfile", {K::String}, Value(), "0.28", "mpirun hostfile (~ expanded)");
    b.add("mpirun_ccl", {K::String, K::Int}, Value(), "0.28", "oneCCL worker threads; ignored since 1.13").removedIn = "1.13";

    return std::move(b.specs);
}

} // namespace

const std::vector<KeySpec>& configSchema()
{
    static const std::vector<KeySpec> schema = buildSchema();
    return schema;
}

const KeySpec* findKeySpec(std::string_view section, std::string_view key)
{
    for (const auto& s : configSchema())
        if (s.section == section && s.key == key)
            return &s;
    return nullptr;
}

std::vector<const KeySpec*> currentKeys(std::string_view section)
{
    std::vector<const KeySpec*> out;
    for (const auto& s : configSchema())
        if (s.section == section && s.removedIn.empty())
            out.push_back(&s);
    return out;
}

std::string nearestKey(std::string_view section, std::string_view key)
{
    std::string best;
    std::size_t bestDistance = std::string::npos;
    for (const KeySpec* s : currentKeys(section)) {
        const std::size_t d = editDistance(key, s->key);
        if (d < bestDistance) {
            bestDistance = d;
            best = s->key;
        }
    }
    // Only suggest what is plausibly a typo: at most a third of the name differs.
    if (bestDistance == std::string::npos || bestDistance > std::max<std::size_t>(2, key.size() / 3))
        return {};
    return best;
}

const std::vector<std::string>& distributedTypes()
{
    static const std::vector<std::string> v = {"NO",         "MULTI_CPU",  "MULTI_GPU", "MULTI_NPU",  "MULTI_MLU",
                                               "MULTI_SDAA", "MULTI_MUSA", "MULTI_XPU", "MULTI_HPU",  "MULTI_NEURON",
                                               "DEEPSPEED",  "FSDP",       "XLA",       "MEGATRON_LM"};
    return v;
}

const std::vector<std::string>& sageMakerDistributedTypes()
{
    static const std::vector<std::string> v = {"NO", "DATA_PARALLEL", "MODEL_PARALLEL"};
    return v;
}

const std::vector<std::string>& dynamoBackends()
{
    static const std::vector<std::string> v = {
        "NO",          "EAGER",  "AOT_EAGER", "INDUCTOR", "AOT_TS_NVFUSER",          "NVPRIMS_NVFUSER",     "CUDAGRAPHS",
        "OFI",         "FX2TRT", "ONNXRT",    "TENSORRT", "AOT_TORCHXLA_TRACE_ONCE", "TORCHXLA_TRACE_ONCE", "TVM",
        "HPU_BACKEND", "NEURON"};
    return v;
}

const std::vector<std::string>& fsdpShardingStrategies() { return kStrategies; }

std::string describeKinds(const std::vector<Value::Kind>& kinds)
{
    std::string out;
    for (std::size_t i = 0; i < kinds.size(); ++i) {
        if (i > 0)
            out += (i + 1 == kinds.size()) ? " or " : ", ";
        switch (kinds[i]) {
        case K::Null:
            out += "null";
            break;
        case K::Bool:
            out += "a boolean (true/false)";
            break;
        case K::Int:
            out += "an integer";
            break;
        case K::Float:
            out += "a number";
            break;
        case K::String:
            out += "a string";
            break;
        case K::List:
            out += "a list";
            break;
        case K::Map:
            out += "a mapping";
            break;
        }
    }
    return out;
}

} // namespace shardscope::config
