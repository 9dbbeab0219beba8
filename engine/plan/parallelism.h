#pragma once

// The one reading of an Accelerate config's parallelism keys: fsdp_config, deepspeed_config (and
// the DeepSpeed JSON file it names), parallelism_config and the launch's shape. What Accelerate
// means by any valid file, including settings this engine refuses (nvme offload, activation
// checkpointing offload), so that `estimate-memory` keeps working on them. Everything that reads
// these keys goes through here:
//   interpretParallelism ─► ParallelismSpec ─┬─► buildRunPlan: what the engine runs (ShardingOptions,
//                                            │   refusals, plan.stateLayout)
//                                            └─► stateLayoutOf ─► the memory estimate (the Configure
//                                                page's chart, estimate-memory, the rank's OOM report)
// The engine flags of `shardscope launch ... --` set the same fields, so a run's memory layout is
// derived from what it runs, whichever way it was asked for.
//
// Torch-free and Qt-free like the rest of engine/plan.

#include "engine/accelerate/accelerate_config.h"
#include "engine/plan/precision_mode.h"
#include "engine/accelerate/validation.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardscope::config {

// accelerateBool, Accelerate's truth rule for the keys its launcher hands to the runtime, is in
// engine/accelerate/value.h.

// What a config asks of sharding, in Accelerate's spellings (the engine flags set the same
// fields). Defaults are `accelerate launch`'s CLI defaults for a key the file does not set.
struct ParallelismSpec {
    // FSDP (distributed_type FSDP). Empty: not FSDP; NO_SHARD: FSDP's DDP equivalent. FSDP2's
    // fsdp_reshard_after_forward becomes FULL_SHARD (true) or SHARD_GRAD_OP (false).
    std::string fsdpShardingStrategy;
    int fsdpVersion = 1;
    std::string fsdpAutoWrapPolicy = "TRANSFORMER_BASED_WRAP";
    std::vector<std::string> fsdpLayerClasses; // empty: the model's own layer classes
    std::int64_t fsdpMinNumParams = 100000000;
    std::string fsdpStateDictType = "FULL_STATE_DICT";
    std::string fsdpBackwardPrefetch = "NO_PREFETCH";
    bool fsdpForwardPrefetch = false;
    bool fsdpUseOrigParams = false;
    bool fsdpActivationCheckpointing = false;
    bool fsdpActivationCheckpointingOffload = false;
    bool fsdpOffloadParams = false;
    bool fsdpCpuRamEfficientLoading = false;
    bool fsdpSyncModuleStates = true;
    // DeepSpeed (distributed_type DEEPSPEED); the JSON file's zero_optimization wins over the keys.
    bool deepSpeed = false;
    int zeroStage = 0; // 0 and not FSDP: replicated (DDP)
    std::string offloadOptimizerDevice = "none"; // none, cpu, nvme
    std::string offloadParamDevice = "none";
    bool zero3Init = false;
    bool zero3Save16BitModel = false;
    // Numbers DeepSpeed itself will use over the recipe's (not "auto").
    std::optional<std::int64_t> deepSpeedGradientAccumulationSteps;
    std::optional<double> deepSpeedGradientClipping;
    // fp16 or bf16 when the DeepSpeed JSON enables it: DeepSpeed trains so even where
    // mixed_precision says no (Accelerate fills only the JSON's "auto" entries).
    std::string deepSpeedMixedPrecision;
    // parallelism_config (FSDP2's device mesh); 1 where not given.
    int dpReplicateSize = 1;
    int dpShardSize = 1;
    int tpSize = 1;
    int cpSize = 1;
    int spSize = 1;

    bool fsdpShards() const { return !fsdpShardingStrategy.empty() && fsdpShardingStrategy != "NO_SHARD"; }
};

struct ParallelismReading {
    ParallelismSpec spec;
    // Where the file means nothing that can be run: an unreadable DeepSpeed JSON, a ZeRO stage
    // that is not one. Refusals of this engine are not here (buildRunPlan adds them).
    std::vector<Diagnostic> problems;
    bool ok() const { return !hasErrors(problems); }
};

// `baseDir` resolves a relative deepspeed_config_file (else the config's own folder).
ParallelismReading interpretParallelism(const AccelerateConfig& config, const std::string& baseDir = {});

// Which ranks form each group of a two-dimensional mesh whose inner dimension takes `groupSize`
// consecutive ranks (Accelerate's layout: dp_replicate x dp_shard, or data x tp): "shard groups
// [0, 1] [2, 3], replicate groups [0, 2] [1, 3]" with inner "shard" and outer "replicate", the
// first few of each on a large world; empty when groupSize does not divide world.
std::string describeMeshGroups(int world, int groupSize, const std::string& inner, const std::string& outer);

// Where each rank's model states live: what the memory estimate needs of a run's parallelism.
struct ModelStateLayout {
    int zeroStage = 0; // 0 = replicated (DDP); every FSDP sharding strategy = 3 (FSDP shards the parameters)
    // FSDP SHARD_GRAD_OP / HYBRID_SHARD_ZERO2 (FSDP2 reshard_after_forward false): each unit stays
    // unsharded from its forward to its backward, beside its shard, so the device holds the full
    // parameters for most of a step. DeepSpeed's ZeRO-2 instead keeps full parameters and books its
    // fp32 shard as optimizer state: the same total in fp32, booked apart (docs/MEMORY_ESTIMATE.md).
    bool fullParamsForwardToBackward = false;
    int shardRanks = 1; // N: ranks the states are sharded over (one machine's under HYBRID_SHARD)
    // tp_size: the decoder's projections (their parameters, gradients and optimizer state) split
    // over this many ranks before the data-parallel layout above applies.
    int tensorParallel = 1;
    bool offloadOptimizer = false; // optimizer state (and master weights) in host memory
    bool offloadParams = false; // sharded parameters in host memory (stage 3 only; the full ones of SHARD_GRAD_OP stay)
    bool offloadGrads = false; // FSDP CPU offload also moves gradients
    bool activationCheckpointing = false;
    // Mixed precision by torch autocast (DDP, NO_SHARD, ZeRO-0, a single process): parameters and
    // gradients stay fp32 and no master copy exists, so fp16/bf16 cost what fp32 costs in model
    // states. DeepSpeed and FSDP keep 16-bit parameters and an fp32 master copy instead.
    bool autocast = false;
    std::string label; // "ZeRO-2", "FSDP1 FULL_SHARD", ...
    std::vector<std::string> notes; // assumptions made, for the user

    friend bool operator==(const ModelStateLayout&, const ModelStateLayout&) = default;
};

// The layout of a run of `numProcesses` ranks on `numMachines` machines asking for `spec`.
ModelStateLayout stateLayoutOf(const ParallelismSpec& spec, int numProcesses, int numMachines);

// The precision a run computes in: the config's mixed_precision, or the DeepSpeed JSON's where
// mixed_precision is no. mixedPrecisionOf gives the name as written (buildRunPlan reports an
// unknown one); precisionOf reads an unknown name as fp32.
std::string mixedPrecisionOf(const AccelerateConfig& config, const ParallelismSpec& spec);
precision::PrecisionMode precisionOf(const AccelerateConfig& config, const ParallelismSpec& spec);

} // namespace shardscope::config
