// shardscope-worker: the engine's executable, one process per rank, started only by the launcher.
//
// Exit codes: 0 success, 2 bad command line or environment, 3 a self-check found wrong results,
// 4 a run-ending error inside the rank (rendezvous, backend, torch), 5 a peer rank went away
// (its connection closed: the cause is that rank's own error).

#include "engine/common/dist_env.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/config/recipe.h"
#include "engine/dist/collective_check.h"
#include "engine/train/event_sink.h"
#include "engine/train/heartbeat.h"
#include "engine/train/rank_errors.h"
#include "engine/train/runner.h"

#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <exception>
#include <iostream>

namespace {

enum ExitCode { kOk = 0, kUsage = 2, kCheckFailed = 3, kRankError = 4, kPeerLost = shardscope::train::kPeerLostExitCode };

struct CheckCollectivesArgs {
    std::string backend = "gloo";
    std::int64_t numel = 1024;
    int corruptRank = -1;
    int failRank = -1;
    int failCode = 1;
};

int checkCollectives(const CheckCollectivesArgs& args)
{
    using namespace shardscope;
    auto env = DistEnv::fromEnvironment();
    if (!env) {
        std::cerr << "shardscope-worker: " << env.error().message << "\n";
        return kUsage;
    }
    const std::string who = "rank " + std::to_string(env->rank) + "/" + std::to_string(env->worldSize);
    if (env->rank == args.failRank) {
        // Fault injection for the launcher's tests: fail before the rendezvous, so the other
        // ranks wait in it until the launcher stops them.
        std::cerr << who << ": failing on purpose with exit code " << args.failCode << " (--fail-rank)\n";
        return args.failCode;
    }
    const auto backend = dist::parseBackendName(args.backend); // the command line admits only known names
    dist::CollectiveCheckOptions options;
    options.backend = *backend;
    options.numel = args.numel;
    options.corruptRank = args.corruptRank;
    const auto report = dist::runCollectiveChecks(*env, options);
    // One write per report: ranks share the terminal, and lines written in pieces interleave.
    std::string text;
    for (const auto& failure : report.failures)
        text += who + ": WRONG " + failure + "\n";
    if (!report.failures.empty()) {
        text += who + ": " + std::to_string(report.failures.size()) + " of " + std::to_string(report.checksRun)
                + " collective checks failed on " + report.device + " (" + args.backend + ")\n";
        std::fputs(text.c_str(), stderr);
        return kCheckFailed;
    }
    text = who + ": " + std::to_string(report.checksRun) + " collective checks passed on " + report.device + " ("
           + args.backend + ")\n";
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
    return kOk;
}

struct TrainArgs {
    std::string recipe;
    std::string backend = "gloo";
    std::int64_t maxSteps = 0;
    int threads = 0;
    std::string dumpParams;
    std::string dumpInitial;
    std::string mixedPrecision = "no";
    int zeroStage = 0;
    std::string fsdpShardingStrategy;
    std::string fsdpAutoWrapPolicy = "TRANSFORMER_BASED_WRAP";
    std::vector<std::string> fsdpLayerClasses = {"GPTBlock"};
    std::int64_t fsdpMinNumParams = 100000000;
    std::string fsdpStateDictType = "FULL_STATE_DICT";
    std::string fsdpBackwardPrefetch = "NO_PREFETCH";
    bool fsdpForwardPrefetch = false;
    bool fsdpUseOrigParams = false;
    bool fsdpActivationCheckpointing = false;
    bool fsdpOffloadParams = false;
    bool fsdpCpuRamEfficientLoading = false;
    std::string offloadOptimizerDevice = "none";
    std::string offloadParamDevice = "none";
    bool zero3Init = false;
    bool zero3Save16BitModel = false;
    std::int64_t gradientAccumulationSteps = 0;
    double maxGradNorm = -1;
    std::string checkpointDir;
    std::string resumeFrom;
    std::string runsDir;
    std::string exportDir;
    std::int64_t crashInCheckpoint = -1;
    std::int64_t fillDiskAtStep = -1;
    std::string traceDir;
    std::int64_t injectNonfiniteGrad = -1;
    std::int64_t profileStartStep = -1;
    std::int64_t profileSteps = 0;
};

int train(const TrainArgs& args)
{
    using namespace shardscope;
    auto env = DistEnv::fromEnvironment();
    if (!env) {
        std::cerr << "shardscope-worker: " << env.error().message << "\n";
        return kUsage;
    }
    auto recipe = config::loadRecipe(args.recipe);
    if (!recipe) {
        std::cerr << "shardscope-worker: " << recipe.error().message << "\n";
        return kUsage;
    }
    const auto backend = dist::parseBackendName(args.backend); // the command line admits only known names
    auto precision = precision::parseMode(args.mixedPrecision);
    if (!precision) {
        std::cerr << "shardscope-worker: " << precision.error().message << "\n";
        return kUsage;
    }
    train::RunOptions options;
    options.recipe = *recipe;
    options.precision = *precision;
    options.stateDictType = args.fsdpStateDictType;
    options.checkpointDir = args.checkpointDir;
    if (!args.resumeFrom.empty()) {
        auto resolved = checkpoint::resolveCheckpoint(args.resumeFrom, args.runsDir, options.recipe.name);
        if (!resolved) {
            std::cerr << "shardscope-worker: --resume_from_checkpoint: " << resolved.error().message << "\n";
            return kUsage;
        }
        options.resumeFrom = *resolved;
    }
    options.exportDir = args.exportDir;
    options.crashInCheckpointAtStep = args.crashInCheckpoint;
    options.fillDiskAtStep = args.fillDiskAtStep;
    options.traceDir = args.traceDir;
    options.injectNonfiniteGradAtStep = args.injectNonfiniteGrad;
    options.profileStartStep = args.profileStartStep;
    options.profileSteps = args.profileSteps;
    if (!args.fsdpShardingStrategy.empty() && args.fsdpShardingStrategy != "NO_SHARD") {
        parallel::ShardingOptions sharding;
        const std::string& strategy = args.fsdpShardingStrategy;
        sharding.reshardAfterForward = strategy == "FULL_SHARD" || strategy == "HYBRID_SHARD";
        if (strategy == "HYBRID_SHARD" || strategy == "HYBRID_SHARD_ZERO2")
            sharding.hybridGroupSize = env->localWorldSize; // shard within this machine
        sharding.offloadToHost = args.fsdpOffloadParams;
        sharding.rankZeroLoadsWeights = args.fsdpCpuRamEfficientLoading;
        sharding.wrapPolicy = parallel::wrapPolicyNamed(args.fsdpAutoWrapPolicy);
        sharding.transformerLayerClasses = args.fsdpLayerClasses;
        sharding.minNumParams = args.fsdpMinNumParams;
        sharding.backwardPrefetch = args.fsdpBackwardPrefetch != "NO_PREFETCH";
        sharding.forwardPrefetch = args.fsdpForwardPrefetch;
        sharding.useOrigParams = args.fsdpUseOrigParams;
        sharding.activationCheckpointing = args.fsdpActivationCheckpointing;
        options.sharding = sharding;
    } else if (args.zeroStage > 0) {
        parallel::ShardingOptions sharding;
        sharding.zeroStage = args.zeroStage;
        sharding.reshardRootAfterForward = true; // DeepSpeed releases every parameter after use
        sharding.backwardPrefetch = args.fsdpBackwardPrefetch != "NO_PREFETCH";
        sharding.forwardPrefetch = args.fsdpForwardPrefetch;
        sharding.useOrigParams = true; // DeepSpeed partitions per parameter group
        sharding.offloadToHost = args.offloadOptimizerDevice == "cpu" || args.offloadParamDevice == "cpu";
        // zero.Init: no rank builds the whole model for itself; the nearest here is rank 0's
        // weights, each other rank receiving only its partition.
        sharding.rankZeroLoadsWeights = args.zero3Init;
        sharding.activationCheckpointing = args.fsdpActivationCheckpointing;
        options.sharding = sharding;
    }
    if (args.maxSteps > 0)
        options.recipe.maxSteps = args.maxSteps;
    if (args.gradientAccumulationSteps > 0)
        options.recipe.gradientAccumulationSteps = args.gradientAccumulationSteps;
    if (args.maxGradNorm >= 0)
        options.recipe.maxGradNorm = args.maxGradNorm;
    // stage3_gather_16bit_weights_on_model_save: the 16-bit weights of a 16-bit run (an fp32 run
    // saves fp32, as DeepSpeed saves the module's own dtype).
    if (args.zero3Save16BitModel && options.precision == precision::PrecisionMode::Fp16)
        options.recipe.exportModel.dtype = "float16";
    else if (args.zero3Save16BitModel && options.precision != precision::PrecisionMode::No)
        options.recipe.exportModel.dtype = "bfloat16";
    options.backend = *backend;
    options.threads = args.threads;
    options.dumpParamsPath = args.dumpParams;
    options.dumpInitialPath = args.dumpInitial;
    train::EventSink events(env->rank);
    train::installTerminateHandler(events);
    // Beats from its own thread while this one trains, evaluates, checkpoints or waits.
    train::Heartbeat heartbeat(events);
    // SIGTERM / SIGINT from the launcher (Ctrl-C): finish the step, agree with the other ranks,
    // report "cancelled". A second signal is not caught: the launcher escalates to SIGKILL.
    struct sigaction stop {};
    stop.sa_handler = [](int) { train::requestStop(); };
    stop.sa_flags = SA_RESETHAND;
    sigaction(SIGTERM, &stop, nullptr);
    sigaction(SIGINT, &stop, nullptr);
    try {
        train::runTraining(*env, options, events);
    } catch (const std::exception& e) {
        const auto error = train::describeError(e);
        events.emit(protocol::ErrorEvent{error.kind, error.message});
        std::cerr << "shardscope-worker: error: " << error.message << std::endl;
        return error.kind == train::kPeerLostKind ? kPeerLost : kRankError;
    }
    return kOk;
}

} // namespace

int main(int argc, char** argv)
{
    CLI::App app{"shardscope-worker: one rank of a Shardscope run (started by `shardscope launch`)"};
    app.require_subcommand(1);

    CheckCollectivesArgs check;
    auto* checkCmd = app.add_subcommand("check-collectives",
                                        "Run all-reduce, all-gather, reduce-scatter and broadcast and verify every result");
    checkCmd->add_option("--backend", check.backend, "c10d backend: gloo (CPU) or nccl (CUDA)")
        ->check(CLI::IsMember({"gloo", "nccl"}))
        ->capture_default_str();
    checkCmd->add_option("--numel", check.numel, "Elements per rank in each collective")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 24))
        ->capture_default_str();
    checkCmd->add_option("--corrupt-rank", check.corruptRank, "Fault injection: this rank perturbs its inputs");
    checkCmd->add_option("--fail-rank", check.failRank, "Fault injection: this rank exits at once with --fail-code");
    checkCmd->add_option("--fail-code", check.failCode, "Exit code for --fail-rank")->capture_default_str();

    TrainArgs trainArgs;
    auto* trainCmd = app.add_subcommand("train", "Train the recipe on this rank, emitting events");
    trainCmd->add_option("--recipe", trainArgs.recipe, "Recipe YAML file")->required();
    trainCmd->add_option("--backend", trainArgs.backend, "c10d backend: gloo (CPU) or nccl (CUDA)")
        ->check(CLI::IsMember({"gloo", "nccl"}))
        ->capture_default_str();
    trainCmd->add_option("--max_steps", trainArgs.maxSteps, "Override the recipe's training.max_steps");
    trainCmd->add_option("--gradient_accumulation_steps", trainArgs.gradientAccumulationSteps,
                         "Override the recipe's training.gradient_accumulation_steps (DeepSpeed's config)")
        ->check(CLI::PositiveNumber);
    trainCmd->add_option("--max_grad_norm", trainArgs.maxGradNorm,
                         "Override the recipe's training.max_grad_norm (DeepSpeed's gradient_clipping; 0: none)")
        ->check(CLI::NonNegativeNumber);
    trainCmd->add_flag("--zero3_init", trainArgs.zero3Init, "DeepSpeed zero3_init_flag: ranks receive their partitions");
    trainCmd->add_flag("--zero3_save_16bit_model", trainArgs.zero3Save16BitModel,
                       "DeepSpeed zero3_save_16bit_model: save_model writes 16-bit weights");
    trainCmd->add_option("--threads", trainArgs.threads, "Intra-op threads (default: cores / local ranks)");
    trainCmd->add_option("--dump-params", trainArgs.dumpParams, "Rank 0 writes the final parameters here (safetensors)");
    trainCmd->add_option("--mixed_precision", trainArgs.mixedPrecision, "no, fp16, bf16, bf16-pure or fp8")
        ->capture_default_str();
    trainCmd->add_option("--zero_stage", trainArgs.zeroStage, "DeepSpeed ZeRO stage 1, 2 or 3 (0: DDP)")
        ->check(CLI::Range(0, 3));
    trainCmd->add_option("--fsdp_sharding_strategy", trainArgs.fsdpShardingStrategy,
                         "FSDP: FULL_SHARD, SHARD_GRAD_OP, HYBRID_SHARD, HYBRID_SHARD_ZERO2 or NO_SHARD (DDP)")
        ->check(CLI::IsMember({"FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2", "NO_SHARD"}));
    trainCmd->add_option("--fsdp_auto_wrap_policy", trainArgs.fsdpAutoWrapPolicy, "TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP or NO_WRAP")
        ->check(CLI::IsMember({"TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP"}))
        ->capture_default_str();
    trainCmd->add_option("--fsdp_transformer_layer_cls_to_wrap", trainArgs.fsdpLayerClasses, "Classes that become units");
    trainCmd->add_option("--fsdp_min_num_params", trainArgs.fsdpMinNumParams, "SIZE_BASED_WRAP threshold");
    trainCmd->add_option("--fsdp_backward_prefetch", trainArgs.fsdpBackwardPrefetch, "BACKWARD_PRE, BACKWARD_POST or NO_PREFETCH")
        ->check(CLI::IsMember({"BACKWARD_PRE", "BACKWARD_POST", "NO_PREFETCH"}))
        ->capture_default_str();
    trainCmd->add_flag("--fsdp_forward_prefetch", trainArgs.fsdpForwardPrefetch, "Prefetch the next unit in forward");
    trainCmd->add_flag("--fsdp_use_orig_params", trainArgs.fsdpUseOrigParams,
                       "The optimizer sees each original parameter (groups, frozen parameters)");
    trainCmd->add_flag("--fsdp_activation_checkpointing", trainArgs.fsdpActivationCheckpointing,
                       "Recompute each wrapped unit's forward in backward");
    trainCmd->add_flag("--fsdp_offload_params", trainArgs.fsdpOffloadParams,
                       "Shards, their gradients and the optimizer step in host memory");
    trainCmd->add_flag("--fsdp_cpu_ram_efficient_loading", trainArgs.fsdpCpuRamEfficientLoading,
                       "Only rank 0 loads the weights; the others receive their shards");
    trainCmd->add_option("--offload_optimizer_device", trainArgs.offloadOptimizerDevice, "DeepSpeed: none or cpu")
        ->check(CLI::IsMember({"none", "cpu"}));
    trainCmd->add_option("--offload_param_device", trainArgs.offloadParamDevice, "DeepSpeed ZeRO-3: none or cpu")
        ->check(CLI::IsMember({"none", "cpu"}));
    trainCmd->add_option("--fsdp_state_dict_type", trainArgs.fsdpStateDictType, "FULL_STATE_DICT or SHARDED_STATE_DICT")
        ->check(CLI::IsMember({"FULL_STATE_DICT", "SHARDED_STATE_DICT"}))
        ->capture_default_str();
    trainCmd->add_option("--checkpoint_dir", trainArgs.checkpointDir, "Where save_state writes step_<N>/ folders");
    trainCmd->add_option("--resume_from", trainArgs.resumeFrom,
                         "Continue from a checkpoint: a step_<N> folder, a run's folder, or latest");
    trainCmd->add_option("--runs_dir", trainArgs.runsDir, "Where `latest` looks for runs of this recipe");
    trainCmd->add_option("--export_dir", trainArgs.exportDir, "save_model's folder (Hugging Face layout)");
    trainCmd->add_option("--trace_dir", trainArgs.traceDir, "Where rank<N>.json traces go (profiling needs it)");
    trainCmd->add_option("--profile_start_step", trainArgs.profileStartStep, "First profiled step (wins over the recipe)");
    trainCmd->add_option("--profile_steps", trainArgs.profileSteps, "Profiled steps");
    trainCmd->add_option("--inject-nonfinite-grad", trainArgs.injectNonfiniteGrad,
                         "Fault injection: a NaN in a synchronised gradient at this step");
    trainCmd->add_option("--fill-disk-at-step", trainArgs.fillDiskAtStep,
                         "Fault injection (tests): from this step, files beyond 64 KiB cannot be written");
    trainCmd->add_option("--crash-in-checkpoint", trainArgs.crashInCheckpoint,
                         "Fault injection: rank 0 dies while writing the checkpoint of this step");
    trainCmd->add_option("--dump-initial", trainArgs.dumpInitial, "Rank 0 writes the initial parameters here (safetensors)");

    std::string logitsRecipe, logitsWeights, logitsInput, logitsOut;
    auto* logitsCmd = app.add_subcommand("logits", "Run a GPT loaded from a Hugging Face GPT-2 folder on some text; write its logits");
    logitsCmd->add_option("--recipe", logitsRecipe, "Recipe whose model section describes the GPT")->required();
    logitsCmd->add_option("--weights", logitsWeights, "Folder with config.json and safetensors (GPT-2 layout)")->required();
    logitsCmd->add_option("--input", logitsInput, "Text file; its first block_size bytes are the input")->required();
    logitsCmd->add_option("--out", logitsOut, "Output safetensors file")->required();

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? kOk : kUsage;
    }

    try {
        if (checkCmd->parsed())
            return checkCollectives(check);
        if (trainCmd->parsed())
            return train(trainArgs);
        if (logitsCmd->parsed()) {
            auto recipe = shardscope::config::loadRecipe(logitsRecipe);
            if (!recipe) {
                std::cerr << "shardscope-worker: " << recipe.error().message << "\n";
                return kUsage;
            }
            shardscope::train::writeLogits(*recipe, logitsWeights, logitsInput, logitsOut);
            return kOk;
        }
    } catch (const std::exception& e) {
        // Note [Run-ending errors]: exceptions end a rank; they are caught here once, reported,
        // and turned into a distinct exit code the launcher propagates.
        const auto error = shardscope::train::describeError(e);
        std::cerr << "shardscope-worker: error: " << error.message << std::endl;
        return error.kind == shardscope::train::kPeerLostKind ? kPeerLost : kRankError;
    }
    return kUsage;
}
