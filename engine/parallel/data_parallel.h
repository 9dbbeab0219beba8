#pragma once

// The one interface the Accelerator trains through, whatever the parallelism:
//   LocalDataParallel        one process: nothing to communicate (below);
//   DistributedDataParallel  every rank holds every parameter, gradients all-reduced (ddp.h);
//   ShardedDataParallel      FSDP / DeepSpeed ZeRO: parameters, gradients and optimizer state
//                            sharded over the ranks (sharded.h).
// The two replicated ones share ReplicatedDataParallel's by-name operations. Everything by name
// uses the model's parameter names ("blocks.0.attn.qkv.weight"), so checkpoints and optimizer
// states move between the three and between world sizes.

#include "profiler/span_recorder.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace shardscope::parallel {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Bytes of a tensor's elements; 0 for an undefined one.
inline std::int64_t tensorBytes(const at::Tensor& t)
{
    return t.defined() ? t.numel() * static_cast<std::int64_t>(t.element_size()) : 0;
}

// This rank's memory and communication over one optimizer step (from beginStep to after the
// optimizer step), in bytes: what the step event reports.
struct StepFootprint {
    // The model states the layout keeps, at their largest in the step: what the ZeRO paper and the
    // memory estimate count. Parameters: every one (replicated, ZeRO-1/2) or this rank's shards
    // (ZeRO-3, FSDP FULL_SHARD). Gradients: every full one until it is reduced (replicated,
    // ZeRO-1) or this rank's reduced shards (ZeRO-2/3, FSDP).
    std::int64_t params = 0;
    std::int64_t grads = 0;
    // The same with what is held only for a moment: units gathered for their forward and
    // backward (ZeRO-3), unsharded gradients until their reduce-scatter is done, DDP's buckets.
    std::int64_t peakParams = 0;
    std::int64_t peakGrads = 0;
    std::int64_t masterShards = 0; // ZeRO-1/2's fp32 master shards, counted with the optimizer state
    std::int64_t allReduced = 0; // gradient all-reduce input (DDP; HYBRID between replicas)
    std::int64_t allGathered = 0; // all-gather output
    std::int64_t reduceScattered = 0; // reduce-scatter input
    std::int64_t broadcast = 0; // the parameters' broadcast from rank 0, with the first step only
    // Tensor parallelism: the split projections' all-reduces over the tensor group (activations
    // forward, their gradients backward), apart from the data-parallel dimensions' above.
    std::int64_t tensorAllReduced = 0;
};

class DataParallel {
public:
    // The part of a per-parameter tensor that belongs to one optimizer parameter (its state, say);
    // undefined: zeros.
    using PartOf = std::function<at::Tensor(const at::Tensor& optimizerParameter)>;
    using SetPart = std::function<void(const at::Tensor& optimizerParameter, const at::Tensor& value)>;

    virtual ~DataParallel() = default;

    // What the optimizer steps, by name: the trainable parameters, or this rank's shards (see
    // ShardedDataParallel).
    virtual NamedTensors namedOptimizerParameters() const = 0;

    // The step's life: beginStep, then per micro-step prepareForBackward (synchronize on the
    // micro-step that ends the optimizer step) and backward, then finishGradientSync (waits for
    // the gradients' communication and leaves the averaged gradients on the optimizer's
    // parameters), the optimizer step, afterOptimizerStep and releaseGradients.
    virtual void beginStep() { }
    virtual void prepareForBackward(bool synchronize) = 0;
    virtual void finishGradientSync() = 0;
    // The sum of squares of every gradient element of the model, from this rank's share of it
    // (the gradients it holds): what clip_grad_norm_'s global norm is the root of.
    virtual double globalGradSquaredNorm(double local) { return local; }
    virtual void afterOptimizerStep() { }
    // Drops the gradients the optimizer's zero_grad cannot (views of a reduced shard).
    virtual void releaseGradients() { }

    // Every parameter in full, by name (FULL_STATE_DICT). Every rank calls it (sharded: the units
    // are gathered one at a time); only a rank with `keep` gets them, the others nothing.
    virtual NamedTensors gatheredNamedParameters(bool keep) = 0;
    // Sets every parameter from full tensors by name; throws naming one that `source` lacks or
    // has in another shape.
    virtual void loadFullParameters(const std::map<std::string, at::Tensor>& parameters, const std::string& source) = 0;

    // Per-parameter tensors shaped like the optimizer's parameters (its state: Adam's moments), in
    // full and by parameter name, whatever the world size: what a FULL_STATE_DICT optimizer
    // checkpoint holds. Every rank calls it; the ranks with `keep` get every trainable
    // parameter's full tensor on the host, the others an empty list.
    virtual NamedTensors gatherByParameter(const PartOf& part, bool keep) = 0;
    // The reverse: `set(p, value)` receives this rank's part of `full` for each optimizer
    // parameter p. Throws naming a trainable parameter `source` lacks or has misshaped.
    virtual void scatterByParameter(const std::map<std::string, at::Tensor>& full, const SetPart& set,
                                    const std::string& source) = 0;

    // Valid after the optimizer step (see StepFootprint).
    virtual StepFootprint stepFootprint() const = 0;
    // A line for the log after the first step, or empty (DDP: its buckets and their overlap).
    virtual std::string firstStepReport() const { return {}; }
    // Spans for every collective (null: none).
    virtual void setRecorder(profiler::SpanRecorder* recorder) = 0;
};

// Every rank holds every parameter: the by-name operations are local.
class ReplicatedDataParallel : public DataParallel {
public:
    // Every parameter of the model, by name, frozen ones included.
    explicit ReplicatedDataParallel(NamedTensors parameters);

    NamedTensors namedOptimizerParameters() const override;
    NamedTensors gatheredNamedParameters(bool keep) override;
    void loadFullParameters(const std::map<std::string, at::Tensor>& parameters, const std::string& source) override;
    NamedTensors gatherByParameter(const PartOf& part, bool keep) override;
    void scatterByParameter(const std::map<std::string, at::Tensor>& full, const SetPart& set,
                            const std::string& source) override;
    StepFootprint stepFootprint() const override;

protected:
    const NamedTensors& namedParameters() const { return m_parameters; }
    // At the end of finishGradientSync: the gradients' bytes, for stepFootprint (they are gone
    // after the optimizer's zero_grad).
    void measureGradients();
    StepFootprint m_footprint;

private:
    NamedTensors m_parameters;
};

// One process: the gradients are already the model's; nothing is communicated.
class LocalDataParallel final : public ReplicatedDataParallel {
public:
    using ReplicatedDataParallel::ReplicatedDataParallel;
    void prepareForBackward(bool) override { }
    void finishGradientSync() override { measureGradients(); }
    void setRecorder(profiler::SpanRecorder*) override { }
};

} // namespace shardscope::parallel
