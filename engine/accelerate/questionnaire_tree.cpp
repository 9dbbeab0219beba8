// The questionnaire's tree, as data: every question of `accelerate config` (Accelerate's
// commands/config/cluster.py and config_utils.py), in its order, with its prompt, default,
// choices, the condition under which it is asked and the config key it sets. The driver that
// walks it (QuestionnaireSession) and Python's converters are in questionnaire.cpp.

#include "engine/accelerate/accelerate_config.h"
#include "engine/accelerate/questionnaire.h"
#include "engine/accelerate/questionnaire_answers.h"

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace shardscope::config {

// ---- the tree --------------------------------------------------------------------------------

namespace {

using namespace answers;

const char* const kYesNoError = "Please enter yes or no.";
const char* const kIntError = "Please enter an integer.";

std::vector<Choice> labels(std::initializer_list<const char*> names)
{
    std::vector<Choice> out;
    for (const char* n : names)
        out.push_back({n, Value(n)});
    return out;
}

Value splitComma(const Value& v)
{
    Value::List out;
    const std::string s = v.isString() ? v.asString() : std::string();
    std::size_t start = 0;
    while (true) {
        const auto comma = s.find(',', start);
        out.emplace_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (comma == std::string::npos)
            break;
        start = comma + 1;
    }
    return Value(std::move(out));
}

std::vector<Question> buildTree()
{
    std::vector<Question> t;
    auto q = [&](std::string id, QuestionKind kind, std::string prompt) -> Question& {
        Question x;
        x.id = std::move(id);
        x.kind = kind;
        x.prompt = std::move(prompt);
        t.push_back(std::move(x));
        return t.back();
    };
    auto yn = [&](std::string id, std::string prompt, bool def, Question::Predicate when, std::string key = {},
                  const char* error = kYesNoError) -> Question& {
        Question& x = q(std::move(id), QuestionKind::YesNo, std::move(prompt));
        x.defaultValue = Value(def);
        x.when = std::move(when);
        x.configKey = std::move(key);
        x.errorMessage = error ? error : "";
        return x;
    };
    auto choice = [&](std::string id, std::string prompt, std::vector<Choice> choices, int def, Question::Predicate when,
                      std::string key = {}) -> Question& {
        Question& x = q(std::move(id), QuestionKind::Choice, std::move(prompt));
        x.choices = std::move(choices);
        x.defaultChoice = def;
        x.when = std::move(when);
        x.configKey = std::move(key);
        return x;
    };
    auto num = [&](std::string id, QuestionKind kind, std::string prompt, Value def, Question::Predicate when,
                   std::string key = {}, const char* error = nullptr) -> Question& {
        Question& x = q(std::move(id), kind, std::move(prompt));
        x.defaultValue = std::move(def);
        x.when = std::move(when);
        x.configKey = std::move(key);
        x.errorMessage = error ? error : "";
        return x;
    };
    auto text = [&](std::string id, std::string prompt, Value def, Question::Predicate when, std::string key = {}) -> Question& {
        return num(std::move(id), QuestionKind::Text, std::move(prompt), std::move(def), std::move(when), std::move(key));
    };
    using A = const Answers&;
    using H = const Hardware&;

    choice("compute_environment", "In which compute environment are you running?",
           {{"This machine", Value("LOCAL_MACHINE")}, {"AWS (Amazon SageMaker)", Value("AMAZON_SAGEMAKER")}}, 0, nullptr,
           "compute_environment")
        .abortIf = [](A a) {
        return a.str("compute_environment") == "AMAZON_SAGEMAKER"
                   ? std::string("The SageMaker questionnaire is not part of Shardscope (runs are local); write a "
                                 "SageMaker config with `accelerate config` or by hand (docs/CONFIG.md).")
                   : std::string();
    };

    // Q1
    choice("distributed_type", "Which type of machine are you using?",
           {{"No distributed training", Value("NO")},
            {"multi-CPU", Value("MULTI_CPU")},
            {"multi-XPU", Value("MULTI_XPU")},
            {"multi-HPU", Value("MULTI_HPU")},
            {"multi-GPU", Value("MULTI_GPU")},
            {"multi-NPU", Value("MULTI_NPU")},
            {"multi-MLU", Value("MULTI_MLU")},
            {"multi-SDAA", Value("MULTI_SDAA")},
            {"multi-MUSA", Value("MULTI_MUSA")},
            {"multi-NEURON", Value("MULTI_NEURON")},
            {"TPU", Value("XLA")}},
           0, [](A a, H) { return local(a); });

    // A: multi-node
    auto multi = [](A a, H) { return local(a) && isMulti(machine(a)); };
    auto multiNode = [](A a, H) { return local(a) && isMulti(machine(a)) && a.integer("num_machines", 1) > 1; };
    num("num_machines", QuestionKind::Int,
        "How many different machines will you use (use more than 1 for multi-node training)? [1]: ", Value(1), multi,
        "num_machines");
    {
        Question& r = choice("machine_rank", "What is the rank of this machine?", {}, 0, multiNode, "machine_rank");
        r.dynamicChoices = [](A a) {
            std::vector<Choice> out;
            for (std::int64_t i = 0; i < a.integer("num_machines", 1); ++i)
                out.push_back({std::to_string(i), Value(i)});
            return out;
        };
    }
    text("main_process_ip", "What is the IP address of the machine that will host the main process? ", Value(), multiNode,
         "main_process_ip");
    num("main_process_port", QuestionKind::Int, "What is the port you will use to communicate with the main process? ", Value(),
        multiNode, "main_process_port");
    yn("same_network",
       "Are all the machines on the same local network? Answer `no` if nodes are on the cloud and/or on different "
       "network hosts [YES/no]: ",
       true, multiNode, "same_network");
    text(
        "rdzv_backend", "What rendezvous backend will you use? ('static', 'c10d', ...): ", Value("static"),
        [](A a, H) { return local(a) && isMulti(machine(a)) && a.integer("num_machines", 1) > 1 && !a.yes("same_network"); },
        "rdzv_backend");
    yn("debug",
       "Should distributed operations be checked while running for errors? This can avoid timeout issues but will be "
       "slower. [yes/NO]: ",
       false, multi, "debug");

    // B: CPU, mpirun
    yn("use_cpu",
       "Do you want to run your training on CPU only (even if a GPU / Apple Silicon / Ascend NPU device is available)? "
       "[yes/NO]:",
       false, [](A a, H) { return local(a) && machine(a) == "NO"; });
    yn("use_mpirun", "Do you want accelerate to launch mpirun? [yes/NO]: ", false,
       [](A a, H) { return local(a) && machine(a) == "MULTI_CPU"; });
    text(
        "mpirun_hostfile", "Please enter the path to the hostfile to use with mpirun [~/hostfile]: ", Value("~/hostfile"),
        [](A a, H) { return local(a) && machine(a) == "MULTI_CPU" && a.yes("use_mpirun"); }, "mpirun_config.mpirun_hostfile")
        .transform = [](const Value& v) {
        std::string s = v.isString() ? v.asString() : std::string();
        s = pythonStrip(s);
        return Value(expandUser(s));
    };

    // C: dynamo
    yn("use_dynamo", "Do you wish to optimize your script with torch dynamo?[yes/NO]:", false, [](A a, H) { return local(a); });
    {
        std::vector<Choice> backends;
        for (const char* b : {"EAGER", "AOT_EAGER", "INDUCTOR", "AOT_TS_NVFUSER", "NVPRIMS_NVFUSER", "CUDAGRAPHS", "OFI",
                              "FX2TRT", "ONNXRT", "TENSORRT", "AOT_TORCHXLA_TRACE_ONCE", "TORHCHXLA_TRACE_ONCE", "TVM"}) {
            std::string label = b;
            std::transform(label.begin(), label.end(), label.begin(), [](unsigned char c) { return std::tolower(c); });
            // The label keeps Accelerate's typo; the value is the backend the user meant (Accelerate
            // raises on this entry; see docs/CONFIG.md, "Accelerate's known bugs").
            const std::string value = std::string(b) == "TORHCHXLA_TRACE_ONCE" ? "TORCHXLA_TRACE_ONCE" : b;
            backends.push_back({label, Value(value)});
        }
        choice(
            "dynamo_backend", "Which dynamo backend would you like to use?", backends, 2,
            [](A a, H) { return local(a) && a.yes("use_dynamo"); }, "dynamo_config.dynamo_backend");
    }
    auto dynCustom = [](A a, H) { return local(a) && a.yes("use_dynamo") && a.yes("dynamo_custom"); };
    yn("dynamo_custom", "Do you want to customize the defaults sent to torch.compile? [yes/NO]: ", false,
       [](A a, H) { return local(a) && a.yes("use_dynamo"); });
    choice("dynamo_mode", "Which mode do you want to use?", labels({"default", "reduce-overhead", "max-autotune"}), 0, dynCustom,
           "dynamo_config.dynamo_mode");
    yn("dynamo_use_fullgraph",
       "Do you want the fullgraph mode or it is ok to break model into several subgraphs? [yes/NO]: ", false, dynCustom,
       "dynamo_config.dynamo_use_fullgraph");
    yn("dynamo_use_dynamic", "Do you want to enable dynamic shape tracing? [yes/NO]: ", false, dynCustom,
       "dynamo_config.dynamo_use_dynamic");
    yn("dynamo_use_regional_compilation", "Do you want to enable regional compilation? [yes/NO]: ", false, dynCustom,
       "dynamo_config.dynamo_use_regional_compilation");

    // D: DeepSpeed
    yn("use_deepspeed", "Do you want to use DeepSpeed? [yes/NO]: ", false, [](A a, H hw) {
        return local(a)
               && in(machine(a), {"MULTI_GPU", "MULTI_XPU", "MULTI_HPU", "MULTI_NPU", "MULTI_MLU", "MULTI_SDAA", "MULTI_MUSA",
                                  "MULTI_NEURON", "NO"})
               && !useMps(a, hw);
    }).abortIf = [](A a) {
        return a.yes("use_deepspeed") && machine(a) == "MULTI_NEURON"
                   ? std::string("DeepSpeed is not supported on Neuron devices.")
                   : std::string();
    };
    yn("use_deepspeed_config_file", "Do you want to specify a json file to a DeepSpeed config? [yes/NO]: ", false,
       [](A a, H) { return ds(a); });
    text(
        "deepspeed_config_file", "Please enter the path to the json DeepSpeed config file: ", Value("none"),
        [](A a, H) { return ds(a) && a.yes("use_deepspeed_config_file"); }, "deepspeed_config.deepspeed_config_file");
    {
        std::vector<Choice> stages;
        stages.reserve(4);
        for (int s = 0; s < 4; ++s)
            stages.push_back({std::to_string(s), Value(s)});
        choice(
            "zero_stage", "What should be your DeepSpeed's ZeRO optimization stage?", stages, 2,
            [](A a, H) { return dsBuilt(a); }, "deepspeed_config.zero_stage");
    }
    auto stage2 = [](A a, H) { return dsBuilt(a) && a.integer("zero_stage", 0) >= 2; };
    choice("offload_optimizer_device", "Where to offload optimizer states?", labels({"none", "cpu", "nvme"}), 0, stage2,
           "deepspeed_config.offload_optimizer_device");
    choice("offload_param_device", "Where to offload parameters?", labels({"none", "cpu", "nvme"}), 0, stage2,
           "deepspeed_config.offload_param_device");
    text(
        "offload_param_nvme_path", "Nvme Path to offload parameters?", Value("/nvme"),
        [](A a, H) { return dsBuilt(a) && a.integer("zero_stage", 0) >= 2 && a.str("offload_param_device") == "nvme"; },
        "deepspeed_config.offload_param_nvme_path");
    text(
        "offload_optimizer_nvme_path", "Nvme Path to offload optimizer states?", Value("/nvme"),
        [](A a, H) { return dsBuilt(a) && a.integer("zero_stage", 0) >= 2 && a.str("offload_optimizer_device") == "nvme"; },
        "deepspeed_config.offload_optimizer_nvme_path");
    num(
        "gradient_accumulation_steps", QuestionKind::Int,
        "How many gradient accumulation steps you're passing in your script? [1]: ", Value(1), [](A a, H) { return dsBuilt(a); },
        "deepspeed_config.gradient_accumulation_steps");
    yn("use_gradient_clipping", "Do you want to use gradient clipping? [yes/NO]: ", false, [](A a, H) { return dsBuilt(a); });
    num(
        "gradient_clipping", QuestionKind::Float, "What is the gradient clipping value? [1.0]: ", Value(1.0),
        [](A a, H) { return dsBuilt(a) && a.yes("use_gradient_clipping"); }, "deepspeed_config.gradient_clipping");
    yn(
        "zero3_save_16bit_model", "Do you want to save 16-bit model weights when using ZeRO Stage-3? [yes/NO]: ", false,
        [](A a, H) { return dsBuilt(a) && a.integer("zero_stage", 0) == 3; }, "deepspeed_config.zero3_save_16bit_model");
    yn(
        "zero3_init_flag",
        "Do you want to enable `deepspeed.zero.Init` when using ZeRO Stage-3 for constructing massive models? [yes/NO]: ", false,
        [](A a, H) { return ds(a); }, "deepspeed_config.zero3_init_flag");
    yn("use_moe", "Do you want to enable Mixture-of-Experts training (MoE)? [yes/NO]: ", false, [](A a, H) { return ds(a); });
    text(
        "deepspeed_moe_layer_cls_names",
        "Specify the comma-separated list of transformers MoE layer class names (case-sensitive), e.g :  "
        "`MixtralSparseMoeBlock`, `Qwen2MoeSparseMoeBlock`, `JetMoEAttention,JetMoEBlock` ... : ",
        Value(), [](A a, H) { return ds(a) && a.yes("use_moe"); }, "deepspeed_config.deepspeed_moe_layer_cls_names");
    auto dsMultiNode = [](A a, H) { return ds(a) && a.integer("num_machines", 1) > 1; };
    choice("deepspeed_multinode_launcher", "Which Type of launcher do you want to use?",
           labels({"pdsh", "standard", "openmpi", "mvapich", "mpich", "nossh", "slurm"}), 0, dsMultiNode,
           "deepspeed_config.deepspeed_multinode_launcher");
    auto dsHostfile = [](A a, H) {
        return ds(a) && a.integer("num_machines", 1) > 1 && a.str("deepspeed_multinode_launcher") != "standard";
    };
    text("deepspeed_hostfile",
         "DeepSpeed configures multi-node compute resources with hostfile. Each row is of the format `hostname "
         "slots=[num_gpus]`, e.g., `localhost slots=2`; for more information please refer official "
         "[documentation](https://www.deepspeed.ai/getting-started/#resource-configuration-multi-node). Please specify "
         "the location of hostfile: ",
         Value(), dsHostfile, "deepspeed_config.deepspeed_hostfile");
    yn("use_exclusion_filter", "Do you want to specify exclusion filter string? [yes/NO]: ", false, dsHostfile);
    text(
        "deepspeed_exclusion_filter", "DeepSpeed exclusion filter string: ", Value(),
        [dsHostfile](A a, H h) { return dsHostfile(a, h) && a.yes("use_exclusion_filter"); },
        "deepspeed_config.deepspeed_exclusion_filter");
    yn("use_inclusion_filter", "Do you want to specify inclusion filter string? [yes/NO]: ", false, dsHostfile);
    text(
        "deepspeed_inclusion_filter", "DeepSpeed inclusion filter string: ", Value(),
        [dsHostfile](A a, H h) { return dsHostfile(a, h) && a.yes("use_inclusion_filter"); },
        "deepspeed_config.deepspeed_inclusion_filter");

    // E: FSDP
    yn("use_fsdp", "Do you want to use FullyShardedDataParallel? [yes/NO]: ", false, [](A a, H) {
        return local(a) && !a.yes("use_deepspeed") && isMulti(machine(a)) && machine(a) != "MULTI_CPU";
    }).abortIf = [](A a) {
        return a.yes("use_fsdp") && machine(a) == "MULTI_NEURON"
                   ? std::string("FSDP is not currently supported on Neuron devices.")
                   : std::string();
    };
    choice(
        "fsdp_version", "What should be your FSDP version? [2]: ", {{"1", Value(1)}, {"2", Value(2)}}, 1,
        [](A a, H) { return fsdp(a); }, "fsdp_config.fsdp_version");
    {
        std::vector<Choice> strategies;
        for (const char* s : {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2"})
            strategies.push_back({s, Value(s)});
        // Accelerate stores the FSDP1 strategy under fsdp_reshard_after_forward (reference §5.2).
        choice(
            "fsdp_sharding_strategy", "What should be your sharding strategy?", strategies, 0, [](A a, H) { return fsdp1(a); },
            "fsdp_config.fsdp_reshard_after_forward");
    }
    yn(
        "fsdp_reshard_after_forward", "Do you want to enable resharding after forward? [YES/no]: ", true,
        [](A a, H) { return fsdp2(a); }, "fsdp_config.fsdp_reshard_after_forward");
    yn(
        "fsdp_offload_params", "Do you want to offload parameters and gradients to CPU? [yes/NO]: ", false,
        [](A a, H) { return fsdp(a); }, "fsdp_config.fsdp_offload_params");
    choice(
        "fsdp_auto_wrap_policy", "What should be your auto wrap policy?",
        labels({"TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP"}), 0, [](A a, H) { return fsdp(a); },
        "fsdp_config.fsdp_auto_wrap_policy");
    yn("use_no_split_modules",
       "Do you want to use the model's `_no_split_modules` to wrap. Only applicable for \xF0\x9F\xA4\x97 Transformers [yes/NO]: ",
       false, [](A a, H) { return fsdp(a) && a.str("fsdp_auto_wrap_policy") == "TRANSFORMER_BASED_WRAP"; });
    text(
        "fsdp_transformer_layer_cls_to_wrap",
        "Specify the comma-separated list of transformer layer class names (case-sensitive) to wrap ,e.g, :`BertLayer`, "
        "`GPTJBlock`, `T5Block`, `BertLayer,BertEmbeddings,BertSelfOutput` ...? : ",
        Value(),
        [](A a, H) {
            return fsdp(a) && a.str("fsdp_auto_wrap_policy") == "TRANSFORMER_BASED_WRAP" && !a.yes("use_no_split_modules");
        },
        "fsdp_config.fsdp_transformer_layer_cls_to_wrap");
    num(
        "fsdp_min_num_params", QuestionKind::Int,
        "What should be your FSDP's minimum number of parameters for Default Auto Wrapping Policy? [1e8]: ", Value(100000000),
        [](A a, H) { return fsdp(a) && a.str("fsdp_auto_wrap_policy") == "SIZE_BASED_WRAP"; }, "fsdp_config.fsdp_min_num_params");
    choice(
        "fsdp_backward_prefetch", "What should be your FSDP's backward prefetch policy?",
        labels({"BACKWARD_PRE", "BACKWARD_POST", "NO_PREFETCH"}), 0, [](A a, H) { return fsdp1(a); },
        "fsdp_config.fsdp_backward_prefetch");
    {
        Question& sd = choice(
            "fsdp_state_dict_type", "What should be your FSDP's state dict type?", {}, 0, [](A a, H) { return fsdp(a); },
            "fsdp_config.fsdp_state_dict_type");
        sd.dynamicChoices = [](A a) {
            return a.integer("fsdp_version", 0) == 1 ? labels({"FULL_STATE_DICT", "LOCAL_STATE_DICT", "SHARDED_STATE_DICT"})
                                                     : labels({"SHARDED_STATE_DICT", "FULL_STATE_DICT"});
        };
    }
    yn(
        "fsdp_forward_prefetch", "Do you want to enable FSDP's forward prefetch policy? [yes/NO]: ", false,
        [](A a, H) { return fsdp1(a); }, "fsdp_config.fsdp_forward_prefetch");
    yn(
        "fsdp_use_orig_params", "Do you want to enable FSDP's `use_orig_params` feature? [YES/no]: ", true,
        [](A a, H) { return fsdp1(a); }, "fsdp_config.fsdp_use_orig_params");
    yn(
        "fsdp_cpu_ram_efficient_loading",
        "Do you want to enable CPU RAM efficient model loading? Only applicable for \xF0\x9F\xA4\x97 Transformers models. "
        "[YES/no]: ",
        true, [](A a, H) { return fsdp(a); }, "fsdp_config.fsdp_cpu_ram_efficient_loading");
    yn(
        "fsdp_sync_module_states",
        "Do you want each individually wrapped FSDP unit to broadcast module parameters from rank 0 at the start? [YES/no]: ",
        true, [](A a, H) { return fsdp1(a) && !a.yes("fsdp_cpu_ram_efficient_loading"); }, "fsdp_config.fsdp_sync_module_states");
    yn(
        "fsdp_activation_checkpointing", "Do you want to enable FSDP activation checkpointing? [yes/NO]: ", false,
        [](A a, H) { return fsdp(a); }, "fsdp_config.fsdp_activation_checkpointing");

    // F: parallelism config (FSDP2)
    yn("use_parallelism_config", "Do you want to use the parallelism config? [yes/NO]: ", false, [](A a, H) { return fsdp2(a); });
    auto pc = [](A a, H) { return fsdp2(a) && a.yes("use_parallelism_config"); };
    num("parallelism_config_dp_replicate_size", QuestionKind::Int, "What is the data parallelism replicate size? [1]: ", Value(1),
        pc, "parallelism_config.parallelism_config_dp_replicate_size", kIntError);
    num("parallelism_config_dp_shard_size", QuestionKind::Int, "What is the FSDP shard size? [1]: ", Value(1), pc,
        "parallelism_config.parallelism_config_dp_shard_size", kIntError);
    num("parallelism_config_tp_size", QuestionKind::Int, "What is the tensor parallelism size? [1]: ", Value(1), pc,
        "parallelism_config.parallelism_config_tp_size", kIntError);
    num("parallelism_config_cp_size", QuestionKind::Int, "What is the context parallelism size? [1]: ", Value(1), pc,
        "parallelism_config.parallelism_config_cp_size", kIntError);
    choice(
        "parallelism_config_cp_comm_strategy", "What is the compute parallelism communication strategy?",
        labels({"allgather", "alltoall"}), 0,
        [pc](A a, H h) { return pc(a, h) && a.integer("parallelism_config_cp_size", 1) > 1; },
        "parallelism_config.parallelism_config_cp_comm_strategy");

    // G: Megatron-LM
    yn("use_megatron_lm", "Do you want to use Megatron-LM ? [yes/NO]: ", false,
       [](A a, H) { return local(a) && machine(a) == "MULTI_GPU" && !a.yes("use_deepspeed") && !a.yes("use_fsdp"); });
    auto mg = [](A a, H) { return megatron(a); };
    num("megatron_lm_tp_degree", QuestionKind::Int, "What is the Tensor Parallelism degree/size? [1]:", Value(1), mg,
        "megatron_lm_config.megatron_lm_tp_degree", kIntError);
    yn(
        "megatron_lm_sequence_parallelism", "Do you want to enable Sequence Parallelism? [YES/no]: ", true,
        [](A a, H) { return megatron(a) && a.integer("megatron_lm_tp_degree", 1) > 1; },
        "megatron_lm_config.megatron_lm_sequence_parallelism");
    num("megatron_lm_pp_degree", QuestionKind::Int, "What is the Pipeline Parallelism degree/size? [1]:", Value(1), mg,
        "megatron_lm_config.megatron_lm_pp_degree", kIntError);
    num(
        "megatron_lm_num_micro_batches", QuestionKind::Int, "What is the number of micro-batches? [1]:", Value(1),
        [](A a, H) { return megatron(a) && a.integer("megatron_lm_pp_degree", 1) > 1; },
        "megatron_lm_config.megatron_lm_num_micro_batches", kIntError);
    yn("megatron_lm_recompute_activations", "Do you want to enable selective activation recomputation? [YES/no]: ", true, mg,
       "megatron_lm_config.megatron_lm_recompute_activations");
    yn("megatron_lm_use_distributed_optimizer",
       "Do you want to use distributed optimizer which shards optimizer state and gradients across data parallel ranks? "
       "[YES/no]: ",
       true, mg, "megatron_lm_config.megatron_lm_use_distributed_optimizer");
    num("megatron_lm_gradient_clipping", QuestionKind::Float,
        "What is the gradient clipping value based on global L2 Norm (0 to disable)? [1.0]: ", Value(1.0), mg,
        "megatron_lm_config.megatron_lm_gradient_clipping");

    // H: number of processes. {W} is filled by promptFor().
    num(
        "num_processes", QuestionKind::Int, "How many {W} should be used for distributed training? [1]:", Value(1),
        [](A a, H) { return local(a) && (effectiveType(a) != "NO"); }, "num_processes", kIntError)
        .abortIf = [](A a) {
        return effectiveType(a) == "MULTI_GPU" && a.integer("num_machines", 1) == 1 && a.integer("num_processes", 1) == 1
                   ? std::string("Specified distributed type DistributedType.MULTI_GPU but only using 1 GPU on a single machine. "
                                 "Please select `No distributed training` for the type of machine you are using.")
                   : std::string();
    };

    // I, J: GPU ids and NUMA
    text(
        "gpu_ids", "What {D} (by id) should be used for training on this machine as a comma-separated list? [all]:", Value("all"),
        [](A a, H hw) {
            return local(a)
                   && in(effectiveType(a), {"MULTI_GPU", "MULTI_MLU", "MULTI_SDAA", "MULTI_MUSA", "MULTI_NPU", "MULTI_XPU",
                                            "MULTI_HPU", "MULTI_NEURON", "NO"})
                   && !useCpu(a) && !useMps(a, hw);
        },
        "gpu_ids");
    yn(
        "enable_cpu_affinity",
        "Would you like to enable numa efficiency? (Currently only supported on NVIDIA hardware). [yes/NO]: ", false,
        [](A a, H hw) {
            return local(a) && in(effectiveType(a), {"NO", "MULTI_GPU"}) && !useCpu(a) && !useMps(a, hw);
        },
        "enable_cpu_affinity");

    // K: TPU
    text(
        "main_training_function",
        "What is the name of the function in your script that should be launched in all parallel scripts? [main]: ",
        Value("main"), [](A a, H) { return tpu(a); }, "main_training_function");
    yn(
        "tpu_use_cluster", "Are you using a TPU cluster? [yes/NO]: ", false, [](A a, H) { return tpu(a); }, "tpu_use_cluster");
    text(
        "tpu_name", "What is the name of your TPU cluster? ", Value(), [](A a, H) { return tpuCluster(a); }, "tpu_name");
    text(
        "tpu_zone", "What is the zone of your TPU cluster? ", Value(), [](A a, H) { return tpuCluster(a); }, "tpu_zone");
    // Accelerate stores the raw text (no yes/no conversion); an empty answer gives false.
    text(
        "tpu_use_sudo", "To run a python script in a TPU pod, should `sudo` be used? [yes/NO]: ", Value(false),
        [](A a, H) { return tpuCluster(a); }, "tpu_use_sudo");
    yn("tpu_run_commands", "Do you have code you wish to run on startup in each pod? [yes/NO]: ", false,
       [](A a, H) { return tpuCluster(a); });
    yn("tpu_use_command_file", "Is this code located in a bash script? [yes/NO]: ", false,
       [](A a, H) { return tpuCluster(a) && a.yes("tpu_run_commands"); });
    text(
        "tpu_command_file", "What is the path to your bash script? ", Value(),
        [](A a, H) { return tpuCluster(a) && a.yes("tpu_run_commands") && a.yes("tpu_use_command_file"); }, "command_file")
        .transform = [](const Value& v) {
        std::error_code ec;
        return Value(std::filesystem::absolute(v.isString() ? v.asString() : std::string(), ec).lexically_normal().string());
    };
    {
        Question& c = text("tpu_command", "Please enter a single command to be ran ", Value(),
                           [](A a, H) { return tpuCluster(a) && a.yes("tpu_run_commands") && !a.yes("tpu_use_command_file"); });
        c.preamble = "Please enter each command separately you wish to run on startup in each pod.";
        Question& more = yn("tpu_another_command", "Do you wish to add another command? [yes/NO]: ", false,
                            [](A a, H) { return tpuCluster(a) && a.yes("tpu_run_commands") && !a.yes("tpu_use_command_file"); });
        more.loopBackTo = "tpu_command";
    }
    text(
        "tpu_vm",
        "If not using an instance group, what are the names of the Compute VM instances to be used, separated by a comma: ",
        Value(""), [](A a, H) { return tpuCluster(a); }, "tpu_vm")
        .transform = splitComma;
    text(
        "tpu_env", "What environment variables do you wish to set in each pod, separated by a comma: ", Value(""),
        [](A a, H) { return tpuCluster(a); }, "tpu_env")
        .transform = splitComma;

    // L: mixed precision and FP8
    choice(
        "mixed_precision", "Do you wish to use mixed precision?", labels({"no", "fp16", "bf16", "fp8"}), 0,
        [](A a, H) { return local(a) && !tpu(a) && !(ds(a) && a.yes("use_deepspeed_config_file")); }, "mixed_precision");
    choice(
        "fp8_backend", "Which FP8 backend do you want to use?",
        {{"ao", Value("AO")}, {"te", Value("TE")}, {"msamp", Value("MSAMP")}}, 0, [](A a, H) { return local(a) && fp8(a); },
        "fp8_config.backend");
    auto te = [](A a, H) { return local(a) && fp8(a) && fp8Backend(a) == "TE"; };
    yn("fp8_use_autocast_during_eval",
       "Do you want to use FP8 autocast during eval mode? Generally better metrics are found when this is disabled [yes/NO]: ",
       false, te, "fp8_config.use_autocast_during_eval", nullptr);
    num("fp8_margin", QuestionKind::Int, "What margin should be used for gradient scaling? [0]: ", Value(0), te,
        "fp8_config.margin");
    num("fp8_interval", QuestionKind::Int,
        "What interval should be used for how often the scaling factor is recomputed? [1]: ", Value(1), te,
        "fp8_config.interval");
    choice("fp8_format", "Which weight format should be used?", labels({"HYBRID", "E4M3", "E5M2"}), 0, te,
           "fp8_config.fp8_format");
    num("fp8_amax_history_length", QuestionKind::Int,
        "What length of history should be used for the amax scaling factor computation? [1024]: ", Value(1024), te,
        "fp8_config.amax_history_length");
    choice("fp8_amax_compute_algorithm", "Which algorithm should be used for the amax scaling factor computation?",
           labels({"max", "most_recent"}), 0, te, "fp8_config.amax_compute_algorithm");
    yn("fp8_override_linear_precision",
       "Do you want to execute `fprop`, `dgrad`, and `wgrad` GEMMS in higher precision? [yes/NO]: ", false, te, {}, nullptr);
    auto override3 = [te](A a, H h) { return te(a, h) && a.yes("fp8_override_linear_precision"); };
    yn("fp8_fprop", "Should `fprop` be executed in higher precision? [yes/NO]: ", false, override3, {}, nullptr);
    yn("fp8_dgrad", "Should `dgrad` be executed in higher precision? [yes/NO]: ", false, override3, {}, nullptr);
    yn("fp8_wgrad", "Should `wgrad` be executed in higher precision? [yes/NO]: ", false, override3, {}, nullptr);
    choice(
        "fp8_optimization_level", "Which optimization level should be used?", labels({"O1", "O2"}), 1,
        [](A a, H) { return local(a) && fp8(a) && fp8Backend(a) == "MSAMP"; }, "fp8_config.optimization_level");
    auto ao = [](A a, H) { return local(a) && fp8(a) && fp8Backend(a) == "AO"; };
    yn("fp8_enable_fsdp_float8_all_gather",
       "Do you want to enable FSDP2 float8 all gather? This is recommended for better performance if using FSDP2. [YES/no]: ",
       true, ao, "fp8_config.enable_fsdp_float8_all_gather", nullptr);
    yn("fp8_pad_inner_dim",
       "Do you want to pad the inner dimension of weight matrices before float8 matmuls? This is required for _scaled_mm "
       "which has strict alignment requirements. Note: padding may cause memory spikes. [YES/no]: ",
       true, ao, "fp8_config.pad_inner_dim", nullptr);
    return t;
}

} // namespace

const std::vector<Question>& questionTree()
{
    static const std::vector<Question> tree = buildTree();
    return tree;
}

const Question* findQuestion(const std::string& id)
{
    for (const auto& q : questionTree())
        if (q.id == id)
            return &q;
    return nullptr;
}

} // namespace shardscope::config
