#pragma once

// What sharded data parallelism is asked to do (parallel/sharded.h does it): FSDP's and DeepSpeed
// ZeRO's options, in engine terms. Torch-free, so the worker's command line and the runner's
// options (train/runner.h) carry it as it is.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace shardscope::parallel {

enum class WrapPolicy { TransformerBased, SizeBased, NoWrap };

struct ShardingOptions {
    int zeroStage = 3; // 1, 2 or 3 (FSDP's FULL_SHARD and SHARD_GRAD_OP are stage 3)
    bool reshardAfterForward = true; // stage 3: FULL_SHARD (true) or SHARD_GRAD_OP (false)
    // Stage 3: also free the root unit after forward. DeepSpeed's ZeRO-3 does (every parameter is
    // gathered twice: 1.5x DDP's communication); FSDP keeps the root gathered until backward.
    bool reshardRootAfterForward = false;
    WrapPolicy wrapPolicy = WrapPolicy::TransformerBased;
    // fsdp_transformer_layer_cls_to_wrap; empty: the model's own layer classes (transformers'
    // _no_split_modules, which is what Accelerate falls back to): GPTBlock, LlamaDecoderLayer, ...
    std::vector<std::string> transformerLayerClasses;
    std::int64_t minNumParams = 100000000; // fsdp_min_num_params
    // Stage 3: start the all-gather of the unit that runs next while the current one computes.
    // backwardPrefetch is FSDP's BACKWARD_PRE (issued when a unit's backward begins; BACKWARD_POST
    // is treated the same), forwardPrefetch fsdp_forward_prefetch.
    bool backwardPrefetch = false;
    bool forwardPrefetch = false;
    // fsdp_use_orig_params (and DeepSpeed, which partitions per parameter group): the optimizer
    // sees one view of this rank's shard per original parameter, so per-parameter groups and
    // frozen parameters work; false: one flat shard per unit, and a unit must not mix frozen and
    // trainable parameters (FSDP1's rule).
    bool useOrigParams = false;
    // fsdp_activation_checkpointing: every wrapped unit (not the root) recomputes its forward in
    // backward instead of keeping its activations (parallel/activation_checkpoint.h).
    bool activationCheckpointing = false;
    // Gradients of low-precision parameters (bf16-pure) are reduced in fp32 and the reduced shard
    // cast back: Gloo's reductions are fp32-only on CPU, and fp32 sums lose nothing (DDP does the same).
    bool reduceInFloat32 = true;
    // fsdp_offload_params / DeepSpeed's offload_optimizer_device and offload_param_device: cpu.
    // The shards (the fp32 master partition), their gradients and the optimizer step live in host
    // memory (pinned when the device is a GPU); the device holds parameters only while gathered
    // (stage 3) or the full parameters (stages 1-2). Each gather copies the shard to the device
    // and each reduced gradient shard comes back. On a CPU device the copies are no-ops.
    bool offloadToHost = false;
    // fsdp_cpu_ram_efficient_loading: rank 0's values are the weights and the other ranks only
    // receive their shards (a scatter instead of a broadcast of every unit; stage 3 never fills
    // their full buffers). Without it, rank 0's full buffers are broadcast (sync_module_states).
    bool rankZeroLoadsWeights = false;
    // HYBRID_SHARD / HYBRID_SHARD_ZERO2: shard inside groups of this many consecutive ranks (one
    // machine's ranks, LOCAL_WORLD_SIZE) and replicate across them: gradient shards are
    // reduce-scattered in the group, then all-reduced between the groups' same-position ranks.
    // 0: shard over all ranks.
    int hybridGroupSize = 0;
    // fp8_config.enable_fsdp_float8_all_gather under FSDP with tensorwise fp8 scaling (stage 3):
    // the fp8 layers' weights are quantized to e4m3 on each rank (with one scale from the whole
    // weight's amax, all-reduced) and gathered as such, a quarter of their bytes, as torchao does.
    bool float8AllGather = false;
};

// fsdp_auto_wrap_policy's names: TRANSFORMER_BASED_WRAP (also the default for anything else),
// SIZE_BASED_WRAP, NO_WRAP.
inline WrapPolicy wrapPolicyNamed(const std::string& name)
{
    if (name == "SIZE_BASED_WRAP")
        return WrapPolicy::SizeBased;
    if (name == "NO_WRAP")
        return WrapPolicy::NoWrap;
    return WrapPolicy::TransformerBased;
}

// The two groups a rank of hybrid sharding belongs to, as Accelerate's device mesh makes them for
// parallelism_config's dp_replicate_size x dp_shard_size (init_device_mesh's row-major layout of
// (dp_replicate, dp_shard)): its shard group, the `groupSize` consecutive ranks it shards with, and
// its replicate group, the ranks at its position in every shard group.
struct HybridGroups {
    std::vector<int> shard; // the mesh's dp_shard group
    std::vector<int> replicate; // the mesh's dp_replicate group
};

inline HybridGroups hybridGroupsOf(int rank, int world, int groupSize)
{
    HybridGroups groups;
    for (int r = 0; r < world; ++r) {
        if (r / groupSize == rank / groupSize)
            groups.shard.push_back(r);
        if (r % groupSize == rank % groupSize)
            groups.replicate.push_back(r);
    }
    return groups;
}

// The two groups of a rank under tensor parallelism, as Accelerate's device mesh lays out
// parallelism_config's (dp_shard, tp) or a lone tp (init_device_mesh's row-major layout, tp the
// innermost dimension): its tensor group, the `tpSize` consecutive ranks that split each
// projection, and its data group, the ranks at its position in every tensor group (they shard or
// replicate the parameters and read different batches).
struct TensorParallelGroups {
    std::vector<int> tensor; // the mesh's tp group
    std::vector<int> data; // the mesh's data-parallel group (dp_shard, or dp_replicate)
};

// The same layout as hybridGroupsOf's: consecutive inner groups, strided outer ones.
inline TensorParallelGroups tensorParallelGroupsOf(int rank, int world, int tpSize)
{
    HybridGroups groups = hybridGroupsOf(rank, world, tpSize);
    return {std::move(groups.shard), std::move(groups.replicate)};
}

} // namespace shardscope::parallel
