#pragma once

// Tensor parallelism: parallelism_config's tp_size on the decoder families (Llama, Mistral,
// Qwen2), split as transformers' tp plan for them and torchtitan's Llama plan split a layer with
// PyTorch's ColwiseParallel and RowwiseParallel (Megatron-LM's scheme):
//   column-parallel  q_proj, k_proj, v_proj, gate_proj, up_proj: each rank keeps a slice of the
//                    output features (rows of the weight, and of the bias), so of the attention
//                    heads and of the MLP's intermediate features; its input is the whole
//                    activation, whose gradient is all-reduced over the tensor group backward;
//   row-parallel     o_proj, down_proj: each rank keeps the matching slice of the input features
//                    (columns of the weight); the partial outputs are all-reduced forward and the
//                    bias, whole on every rank, added after.
// Everything else (embeddings, norms, lm_head) is whole on every rank of a tensor group, and its
// gradients are equal there without communication (every input they see is). The data-parallel
// ranks (parallel::tensorParallelGroupsOf) then shard or replicate each rank's slices as without
// tensor parallelism: FSDP over dp_shard is the 2D layout.

#include "engine/dist/communicator.h"
#include "engine/parallel/data_parallel.h"
#include "profiler/span_recorder.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace shardscope::models {
struct CausalDecoderImpl;
}

namespace shardscope::parallel {

// The dimension a parameter of a decoder is split along over the tensor group (0: rows,
// column-parallel; 1: columns, row-parallel), or -1 where every rank holds it whole. By
// transformers' parameter names ("model.layers.0.self_attn.q_proj.weight").
int tensorParallelDim(const std::string& parameterName);

// What the split projections' all-reduces (forward in the row-parallel ones, backward in the
// column-parallel ones) moved over the tensor group, and where their spans go: the step event's
// comm.tp_all_reduce and the trace's "all_reduce tp" collectives, apart from the data-parallel
// dimensions' communication.
struct TensorParallelTraffic {
    std::atomic<std::int64_t> allReduced{0}; // input bytes since the last reset
    profiler::SpanRecorder* recorder = nullptr;
};

// Splits the decoder's projections over `tensorGroup`: every rank keeps its slice of each split
// parameter (the model must be whole and equal on every rank of the group) and its projections
// communicate through the group, counting in `traffic`. Throws where a split dimension (heads,
// key-value heads, intermediate size) does not divide by the group's size.
void applyTensorParallel(models::CausalDecoderImpl& model, dist::Communicator& tensorGroup,
                         std::shared_ptr<TensorParallelTraffic> traffic);

// The data parallelism of one position of the tensor groups (`inner`, over the data-parallel
// group), with every by-name operation made whole across the split: gathered parameters and
// optimizer state are all-gathered along their split dimension, full ones sliced to this rank's
// part before loading; the gradients' squared norm adds the tensor group's parts.
class TensorParallelDataParallel final : public DataParallel {
public:
    // `dataParallelLeader`: this rank is in the first data-parallel position (dp rank 0), whose
    // tensor group gathers what rank 0 saves.
    TensorParallelDataParallel(std::unique_ptr<DataParallel> inner, dist::Communicator& tensorGroup, bool dataParallelLeader,
                               std::shared_ptr<TensorParallelTraffic> traffic);

    NamedTensors namedOptimizerParameters() const override { return m_inner->namedOptimizerParameters(); }
    void beginStep() override;
    void prepareForBackward(bool synchronize) override { m_inner->prepareForBackward(synchronize); }
    void finishGradientSync() override { m_inner->finishGradientSync(); }
    // `local`: this rank's split gradients' squares plus its whole ones' divided by the group's
    // size (Accelerator::clipGradNorm), so that the sum over the group counts those once.
    double globalGradSquaredNorm(double local) override;
    void afterOptimizerStep() override { m_inner->afterOptimizerStep(); }
    void releaseGradients() override { m_inner->releaseGradients(); }
    NamedTensors gatheredNamedParameters(bool keep) override;
    void loadFullParameters(const std::map<std::string, at::Tensor>& parameters, const std::string& source) override;
    NamedTensors gatherByParameter(const PartOf& part, bool keep) override;
    void scatterByParameter(const std::map<std::string, at::Tensor>& full, const SetPart& set,
                            const std::string& source) override;
    StepFootprint stepFootprint() const override; // with the tensor group's all-reduces

    std::string firstStepReport() const override;
    void setRecorder(profiler::SpanRecorder* recorder) override;

    DataParallel& inner() { return *m_inner; }

private:
    // The split tensors of `local` (by parameter name) all-gathered whole along their dimension.
    NamedTensors joined(NamedTensors local);
    // This rank's part of each split tensor of `full`; throws naming one that does not divide.
    std::map<std::string, at::Tensor> sliced(const std::map<std::string, at::Tensor>& full, const std::string& source) const;

    std::unique_ptr<DataParallel> m_inner;
    dist::Communicator& m_group;
    bool m_leader;
    std::shared_ptr<TensorParallelTraffic> m_traffic;
};

} // namespace shardscope::parallel
