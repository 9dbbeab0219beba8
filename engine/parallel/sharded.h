#pragma once

// Sharded data parallelism: FSDP's strategies and DeepSpeed's ZeRO stages on one machinery.
//
// A wrap policy groups the model's parameters into units (each GPTBlock, say, plus a root unit
// for the rest). Each unit's parameters become views into one flat buffer padded to a multiple of
// the number of shards (the world size, or a machine's ranks with HYBRID); each rank owns one
// shard of it, which is what the optimizer sees. The buffer has the parameters' dtype: fp32 under
// mixed precision (an fp32 master partition, even for a model loaded in bf16), bf16 in bf16-pure,
// and the loaded dtype without mixed precision (train/accelerator.cpp decides). By stage:
//   1  optimizer state sharded: full parameters and gradients; gradients are reduce-scattered
//      after backward, each rank steps its shard, the shards are all-gathered back;
//   2  + gradients: each unit's gradients are reduce-scattered as soon as backward has produced
//      them (overlapping the rest of backward) and the full gradients freed;
//   3  + parameters (FSDP FULL_SHARD / SHARD_GRAD_OP): a unit's parameters exist in full only
//      around its forward and backward: all-gathered before, freed after (after forward too,
//      unless reshardAfterForward is false, SHARD_GRAD_OP), re-gathered before its backward.
// The model does not change: parallelism hooks the units' forward (models/forward_hooks.h),
// their outputs' gradients (pre-backward) and the parameters' gradient accumulators.
//
// fp8 all-gather (ShardingOptions::float8AllGather, torchao's enable_fsdp_float8_all_gather):
// a unit's fp8 layer weights travel as e4m3 bytes. Each rank quantizes its part of each such
// weight with the whole weight's tensorwise scale (its amax all-reduced by MAX first, one small
// all-reduce per gather), the rest of its shard goes as it is, and one byte all-gather moves
// both; the gathered e4m3 weights go to their layers (precision::Float8Layer), which skip
// their own quantization. The numbers are those of gathering first and quantizing after (the
// amax of a weight is the max of its parts' amaxes), bit for bit. While a unit is gathered so,
// its fp8 weights' full-precision values are not there: anything that reads them (a checkpoint,
// an evaluation in bf16) gets the unit gathered again in full.

#include "engine/dist/communicator.h"
#include "engine/plan/sharding_options.h"
#include "engine/parallel/data_parallel.h"
#include "engine/models/float8_conversion.h"
#include "engine/models/models.h"
#include "profiler/span_recorder.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace shardscope::parallel {

// Bytes resident on this rank (now, and the peak since the last resetPeaks), and bytes moved by
// collectives since the last resetCommunication.
struct ShardingStats {
    // Stages 1-2: the fp32 master shards, apart from the full parameters (counted with the
    // optimizer state, as the ZeRO paper does); 0 at stage 3, where the shard is the parameter.
    std::int64_t masterShards = 0;
    // Peaks since beginStep (see StepFootprint): what the layout keeps, and that with what it
    // holds for a moment (gathered units, unsharded gradients before their reduce-scatter).
    std::int64_t keptParams = 0;
    std::int64_t keptGrads = 0;
    std::int64_t peakParams = 0;
    std::int64_t peakGrads = 0;
    std::int64_t allGathered = 0; // output bytes of all-gathers
    std::int64_t reduceScattered = 0; // input bytes of reduce-scatters
    std::int64_t allReduced = 0; // HYBRID: bytes all-reduced between replicas
};

class ShardedDataParallel final : public DataParallel {
public:
    ShardedDataParallel(models::TrainableModel& model, dist::Communicator& comm, ShardingOptions options);
    ~ShardedDataParallel() override;
    ShardedDataParallel(const ShardedDataParallel&) = delete;
    ShardedDataParallel& operator=(const ShardedDataParallel&) = delete;

    // What the optimizer steps, by name: with useOrigParams each trainable parameter's part of
    // this rank's shard, by the parameter's name (possibly empty parts are left out); otherwise
    // the flat fp32 shard of each trainable unit, by the unit's name.
    NamedTensors namedOptimizerParameters() const override;
    // Resets the peaks and the communication counters of stepFootprint.
    void beginStep() override;
    void prepareForBackward(bool synchronize) override;
    // After the last backward of a step: reduce what is left, wait, and set the shards' gradients.
    void finishGradientSync() override;
    // Each rank holds a shard of the gradients: the global norm needs every rank's part (and
    // with HYBRID every shard is held by each machine: counted once).
    double globalGradSquaredNorm(double local) override;
    // After the optimizer step: stages 1 and 2 all-gather the updated shards into the parameters.
    void afterOptimizerStep() override;
    // Drops the shards' gradients (with useOrigParams, views of one reduced shard per unit).
    void releaseGradients() override;
    // Gathered copies (the live parameters are views of buffers that are freed when resharded).
    NamedTensors gatheredNamedParameters(bool keep) override;

    // Checkpoints: this rank's shards by unit name (SHARDED_STATE_DICT), and loading them back
    // (throws naming a missing or misshaped shard).
    NamedTensors namedShards() const;
    void loadShards(const std::map<std::string, at::Tensor>& shards);
    void loadFullParameters(const std::map<std::string, at::Tensor>& parameters, const std::string& source) override;

    NamedTensors gatherByParameter(const PartOf& part, bool keep) override;
    void scatterByParameter(const std::map<std::string, at::Tensor>& full, const SetPart& set,
                            const std::string& source) override;
    StepFootprint stepFootprint() const override;
    // "sharding: 3 units (model.layers.0, model.layers.1, (root)), ZeRO stage 3": what the wrap policy made.
    std::string firstStepReport() const override;

    // How many ranks hold each shard: 1, or the number of machines with HYBRID sharding.
    int replicas() const { return m_replicateGroup ? m_replicateGroup->size() : 1; }
    // Spans for every all-gather and reduce-scatter (null: none).
    void setRecorder(profiler::SpanRecorder* recorder) override { m_recorder = recorder; }
    // fp8 all-gather for these layers (models::float8LinearWeights; tensorwise ones only, stage 3).
    void gatherInFloat8(const std::vector<models::Float8LinearWeight>& layers);

private:
    void resetPeaks();
    void resetCommunication();
    struct Unit {
        std::string name;
        std::vector<at::Tensor> params;
        std::vector<std::string> paramNames;
        std::vector<std::int64_t> offsets;
        // useOrigParams: views of `shard` covering each trainable parameter's part of it.
        struct Segment {
            std::string name;
            at::Tensor view;
            std::int64_t offset; // in the shard
        };
        std::vector<Segment> segments;
        int trainable = 0; // parameters that require grad
        std::int64_t numel = 0;
        std::int64_t padded = 0; // numel rounded up to a multiple of the number of shards
        at::Tensor full; // [padded] the parameters' storage; freed while resharded
        at::Tensor shard; // [padded / shards] this rank's part: the optimizer's parameter (on the host when offloaded)
        at::Tensor shardOnDevice; // offloaded: the shard copied to the device for an all-gather in flight
        at::Tensor fullGrad; // [padded] reduce-scatter input
        at::Tensor shardGrad; // [padded / shards]
        c10::intrusive_ptr<c10d::Work> gradWork;
        c10::intrusive_ptr<c10d::Work> gatherWork; // a prefetch in flight
        // Spans to end after the wait, when the work cannot end them at completion.
        profiler::SpanRecorder::SpanId gatherSpan = profiler::SpanRecorder::kNoSpan;
        profiler::SpanRecorder::SpanId gradSpan = profiler::SpanRecorder::kNoSpan;
        // fp8 all-gather: the unit's fp8 layer weights (by parameter index) and, for each shard,
        // the runs of its elements in the gathered bytes: e4m3 (part >= 0) or the shard's dtype.
        struct Float8Part {
            std::size_t param;
            std::shared_ptr<precision::Float8Layer> layer;
        };
        struct WireRun {
            std::int64_t begin, end; // in the flat buffer
            int part; // index into float8, or -1
            std::int64_t byteOffset; // in that shard's bytes
        };
        std::vector<Float8Part> float8;
        std::vector<std::vector<WireRun>> wire; // by shard index
        std::int64_t wireBytes = 0; // bytes per shard: the longest shard's
        at::Tensor wireGathered; // an fp8 all-gather's output, until it is unpacked
        at::Tensor float8Scales; // [float8.size()] that gather's scales
        bool gatheredInFloat8 = false;
        bool gathered = true;
        bool reduced = false; // this step's gradients are launched
        int pending = 0; // parameters whose gradient has not arrived in this backward
        bool isRoot = false;
    };

    // The constructor's parts, in order: HYBRID's groups; the units the wrap policy makes (returns
    // the wrappable module of each non-root unit, by unit index); each unit flattened, synchronised
    // from rank 0 and sharded; activation checkpointing; the forward, backward and gradient hooks.
    void makeHybridGroups();
    void checkLayerClasses(models::TrainableModel& model); // fills in the model's own classes when none are named
    std::vector<models::WrappableModule> collectUnits(models::TrainableModel& model);
    void shardUnit(Unit& unit, c10::ScalarType dtype);
    void checkpointActivations(const std::vector<models::WrappableModule>& wrapped);
    void installHooks(models::TrainableModel& model, const std::vector<models::WrappableModule>& wrapped);

    // The group the parameters are sharded over: every rank, or this machine's (HYBRID).
    dist::Communicator& shardGroup() { return m_shardGroup ? *m_shardGroup : m_comm; }
    // A unit's flat buffer (on the host) from per-parameter tensors by name; zeros for padding and,
    // with trainableOnly, frozen parameters. Throws naming a missing or misshaped one in `source`.
    at::Tensor flatten(const Unit& unit, const std::map<std::string, at::Tensor>& byName, bool trainableOnly,
                       const std::string& source) const;
    // The shard where collectives run: itself, or a device copy when it is offloaded to the host.
    at::Tensor shardForCollective(Unit& unit);
    // float8: an fp8 all-gather where the unit has fp8 weights (see the top); false: every
    // parameter in full. A unit gathered in fp8 that is wanted in full is gathered again.
    void gather(Unit& unit, bool float8);
    void startGather(Unit& unit, bool float8); // asynchronous: a prefetch
    // What the unit's forward and backward gather: fp8 where its fp8 layers are active.
    bool wantsFloat8(const Unit& unit) const;
    at::Tensor packFloat8(Unit& unit, const at::Tensor& shard); // quantizes: this rank's bytes
    void unpackFloat8(Unit& unit); // the gathered bytes into the parameters and the layers
    void prefetchAfter(std::size_t unit, bool backward);
    void reshard(Unit& unit);
    void onGradientReady(std::size_t unit);
    // Launches the unit's reduce-scatter once the one before it is done: as FSDP2 does, at most
    // one unit's unsharded gradients wait for theirs (all of them would be the full model's).
    void launchReduceScatter(Unit& unit);
    void completeReduceScatter(Unit& unit); // waits and frees the unsharded gradients
    void updatePeaks();

    dist::Communicator& m_comm;
    const torch::nn::Module* m_model; // whether it is training decides what a forward gathers
    std::unique_ptr<dist::Communicator> m_shardGroup; // HYBRID: this machine's ranks
    std::unique_ptr<dist::Communicator> m_replicateGroup; // HYBRID: the ranks holding the same shard
    ShardingOptions m_options;
    std::vector<Unit> m_units;
    std::vector<decltype(torch::autograd::impl::grad_accumulator(std::declval<const at::Tensor&>()))> m_accumulators;
    bool m_synchronize = true;
    Unit* m_reduceScatterInFlight = nullptr;
    std::vector<std::size_t> m_forwardOrder; // units in the order this step's forward ran them
    std::vector<std::size_t> m_lastForwardOrder; // the previous forward's: what forward prefetch follows
    ShardingStats m_stats;
    profiler::SpanRecorder* m_recorder = nullptr;
};

} // namespace shardscope::parallel
