#pragma once

// The C++ counterpart of Accelerate's `Accelerator`: one object per rank that owns the process
// group and the data-parallel wrapper, and gives the training loop Accelerate's vocabulary:
// prepare, accumulate (with `sync_gradients` semantics), backward, clipGradNorm, step,
// gatherForMetrics, waitForEveryone, isMainProcess. The runner is written on it the way
// Accelerate's examples are written on `Accelerator`.

#include "engine/common/dist_env.h"
#include "engine/dist/communicator.h"
#include "engine/models/models.h"
#include "engine/parallel/data_parallel.h"
#include "engine/parallel/ddp.h"
#include "engine/parallel/sharded.h"
#include "engine/precision/autocast.h"
#include "engine/precision/grad_scaler.h"
#include "engine/plan/precision_mode.h"

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <memory>
#include <optional>

namespace shardscope::train {

struct AcceleratorOptions {
    dist::BackendKind backend = dist::BackendKind::Gloo;
    std::int64_t gradientAccumulationSteps = 1;
    parallel::DdpOptions ddp;
    precision::PrecisionMode precision = precision::PrecisionMode::No;
    precision::GradScalerOptions scaler; // fp16 only
    // Set: FSDP / ZeRO sharding instead of DDP.
    std::optional<parallel::ShardingOptions> sharding;
    // parallelism_config's tp_size: the decoder's projections split over this many consecutive
    // ranks (parallel/tensor_parallel.h); the data parallelism runs over the ranks at the same
    // position of each tensor group.
    int tensorParallelSize = 1;
};

class Accelerator {
public:
    Accelerator(const DistEnv& env, AcceleratorOptions options);
    ~Accelerator();

    int processIndex() const { return m_comm->rank(); }
    int numProcesses() const { return m_comm->size(); }
    bool isMainProcess() const { return processIndex() == 0; }
    c10::Device device() const { return m_comm->device(); }
    dist::Communicator& communicator() { return *m_comm; }
    // The data-parallel position and their number: the process index and count, or with tensor
    // parallelism the index of this rank's tensor group and their number (the ranks of a tensor
    // group read the same batches).
    int dataParallelRank() const;
    int dataParallelSize() const;
    int tensorParallelSize() const { return m_tensorGroup ? m_tensorGroup->size() : 1; }

    // Moves the model to this rank's device, makes its parameters equal to rank 0's and wraps it
    // for data parallelism: sharded when configured, else DDP with more than one process, else
    // LocalDataParallel.
    void prepareModel(models::TrainableModel& model);
    // Whether prepareModel found low-precision parameters and made them fp32 (a model loaded in
    // bf16, trained in a mode with fp32 master weights).
    bool upcastParameters() const { return m_upcastParameters; }
    // What the optimizer must be built on, after prepareModel: the model's trainable parameters,
    // or this rank's shards (flat per unit, or per parameter with use_orig_params) when sharded
    // (so prepare the model before the optimizer, as in Accelerate).
    // By name: model parameters that require grad, or the shards' parts (see
    // ShardedDataParallel::namedOptimizerParameters), for building parameter groups.
    const std::vector<std::pair<std::string, torch::Tensor>>& namedOptimizerParameters() const
    {
        return m_namedOptimizerParameters;
    }
    const std::vector<torch::Tensor>& optimizerParameters() const { return m_optimizerParameters; }
    // Every parameter in full, by name, on the main process (gathered from the shards when
    // sharded: every rank must call it; the others get nothing, as FSDP's rank0_only).
    std::vector<std::pair<std::string, torch::Tensor>> fullNamedParameters();

    // Accelerate's `with accelerator.accumulate(model):` — one micro-step; `syncGradients()` is
    // true on the micro-step that ends an optimizer step.
    class AccumulateGuard {
    public:
        explicit AccumulateGuard(Accelerator& a);
        AccumulateGuard(const AccumulateGuard&) = delete;
        AccumulateGuard& operator=(const AccumulateGuard&) = delete;
    };
    AccumulateGuard accumulate() { return AccumulateGuard(*this); }
    bool syncGradients() const { return m_syncGradients; }

    // The autocast region for forward and loss (Accelerate's `accelerator.autocast()`): empty in
    // fp32 and bf16-pure, fp16/bf16 autocast on this rank's device otherwise.
    std::unique_ptr<precision::AutocastGuard> autocast();
    // The dtype a floating input must have to enter the model: the parameters' (bf16 in bf16-pure,
    // the loaded dtype without mixed precision, else float32). Valid after prepareModel.
    c10::ScalarType inputDtype() const;

    // loss / gradient_accumulation_steps (times the loss scale in fp16), backward, with DDP's
    // hooks armed only when syncing.
    void backward(const torch::Tensor& loss);
    // Waits for this step's gradient communication and leaves the synchronised gradients in
    // place (clipGradNorm and step do it themselves; this is for looking at them before).
    void synchronizeGradients() { finishGradientSync(); }
    // Finishes the gradient all-reduce, then clips by global norm; returns the norm before
    // clipping. Only meaningful when syncGradients(). maxNorm <= 0: no clipping, norm only.
    double clipGradNorm(double maxNorm);
    // The optimizer step and zero_grad, skipped on accumulation micro-steps (AcceleratedOptimizer)
    // and, in fp16, when a gradient was inf/NaN (then the loss scale backs off).
    void step(torch::optim::Optimizer& optimizer);
    bool lastStepSkipped() const { return m_lastStepSkipped; }
    std::int64_t skippedSteps() const { return m_skippedSteps; }
    // The fp16 loss scale the last step used (before its update), or nullopt outside fp16.
    std::optional<double> lossScale() const;
    precision::GradScaler* gradScaler() { return m_scaler.get(); }
    // Resuming: the skipped-step count and the loss scaler's state as checkpointed.
    void restoreStepCounters(std::int64_t skippedSteps, std::optional<double> lossScale, std::int64_t growthTracker);

    // Mean of a per-rank scalar over all ranks (what gather_for_metrics + mean gives).
    double meanOverRanks(double value);
    // The end-of-step agreement, in one small all-reduce: the mean loss over ranks, and whether
    // any rank was asked to stop, so that all ranks stop after the same step. It is started as
    // soon as the step's last loss exists (before its backward; `localLoss` is a tensor, so no
    // host sync) and finished after the optimizer step, so that its latency hides behind backward
    // and the gradient communication instead of adding a round trip to every step.
    struct StepAgreement {
        double meanLoss = 0;
        double localLoss = 0;
        bool stop = false; // some rank asked to stop
        bool checkpointFirst = false; // some rank asked for a checkpoint before the stop
    };
    void startStepAgreement(const torch::Tensor& localLoss, bool stopRequested, bool checkpointRequested = false);
    StepAgreement finishStepAgreement();
    torch::Tensor gatherForMetrics(const torch::Tensor& tensor);
    void waitForEveryone();

    // The data-parallel wrapper, after prepareModel.
    parallel::DataParallel& dataParallel() { return *m_dataParallel; }
    // The same, when it is sharded (for what only shards have: the SHARDED_STATE_DICT); else null.
    parallel::ShardedDataParallel* sharded() { return m_sharded; }
    // Collective spans go to this recorder (call after prepareModel).
    void setRecorder(profiler::SpanRecorder* recorder);

private:
    void finishGradientSync();
    // Tensor parallelism: the model made whole and equal everywhere, then split; the data
    // parallelism over the data group, wrapped to gather and load across the split.
    void prepareTensorParallel(models::TrainableModel& model);
    // Sharded when configured, else DDP over `group` (null or one rank: LocalDataParallel).
    std::unique_ptr<parallel::DataParallel> makeDataParallel(models::TrainableModel& model, dist::Communicator* group);
    // The sum of squares of this rank's gradients, each whole one divided by the tensor group's size.
    double localGradSquaredNorm();
    void setOptimizerParameters(std::vector<std::pair<std::string, torch::Tensor>> named);

    AcceleratorOptions m_options;
    std::unique_ptr<dist::Communicator> m_comm;
    std::unique_ptr<dist::Communicator> m_tensorGroup; // tensor parallelism: the tp group
    std::unique_ptr<dist::Communicator> m_dataGroup; // tensor parallelism: the data-parallel group (over one rank: none)
    std::unique_ptr<parallel::DataParallel> m_dataParallel;
    parallel::ShardedDataParallel* m_sharded = nullptr; // m_dataParallel, when sharded
    std::vector<torch::Tensor> m_optimizerParameters;
    std::vector<std::pair<std::string, torch::Tensor>> m_namedOptimizerParameters;
    std::unique_ptr<precision::GradScaler> m_scaler;
    bool m_lastStepSkipped = false;
    double m_lastLossScale = 0; // the scale the last step's loss was multiplied by
    std::int64_t m_skippedSteps = 0;
    std::int64_t m_microStep = 0;
    bool m_syncGradients = true;
    bool m_gradientsSynced = false;
    bool m_upcastParameters = false;
    torch::Tensor m_agreementLocalLoss; // this rank's loss, as started
    torch::Tensor m_agreementValues; // [sum of losses, stop requests], reduced in place
    c10::intrusive_ptr<c10d::Work> m_agreementWork; // null on one process
    c10::ScalarType m_parameterDtype = c10::ScalarType::Float;
};

} // namespace shardscope::train
