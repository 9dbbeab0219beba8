#pragma once

// One rank's training, in the parts of Accelerate's examples: setup (the accelerator, the model
// with its weights, the data, the optimizer), resume, the steps, evaluation and checkpoints
// between them, and the end (export, the done event). The parts it hands work to:
//   Accelerator      data parallelism, precision, the step's agreement (accelerator.h)
//   Checkpointer     saving and resuming the whole training state (checkpointer.h)
//   ProfilingWindow  the --profile window's spans and device trace (profiling_window.h)
//   makeStepEvent    what a step reports (step_event.h)
//   FaultInjector    the reliability tests' faults, at fixed points of a step (fault_injector.h)
// Includes torch: only runner.cpp includes it (the worker sees runner.h).

#include "engine/common/dist_env.h"
#include "engine/common/run_layout.h"
#include "engine/data/data.h"
#include "engine/protocol/events.h"
#include "engine/train/accelerator.h"
#include "engine/train/fault_injector.h"
#include "engine/train/mfu.h"
#include "engine/train/nonfinite_probe.h"
#include "engine/train/step_event.h"

#include <torch/optim/optimizer.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

namespace shardscope::text {
class Tokenizer;
}

namespace shardscope::config {
struct RunPlan;
struct Recipe;
} // namespace shardscope::config

namespace shardscope::train {

class Checkpointer;
class EventSink;
class ProfilingWindow;

// Whether requestStop() was called (runner.h).
bool stopRequested();
// Whether requestCheckpointAndStop() was called (runner.h).
bool checkpointAndStopRequested();

class Trainer {
public:
    // Setup: rendezvous, model, data, optimizer. Throws on what ends the run before it starts
    // (a bad data file, weights that do not fit the model).
    Trainer(const DistEnv& env, const config::RunPlan& plan, EventSink& events);
    ~Trainer();
    Trainer(const Trainer&) = delete;
    Trainer& operator=(const Trainer&) = delete;

    // Resumes when the plan says so, trains to max_steps (or until the ranks agree to stop) and
    // emits the done event.
    void run();

private:
    struct StepOutcome {
        StepMeasurement measured;
        bool stop = false; // some rank was asked to stop: every rank stops after this step
        bool checkpointFirst = false; // and some rank was asked for a checkpoint before stopping
    };
    struct MicroSteps {
        at::Tensor lossSum; // this rank's losses of the step, summed without a host sync
        std::int64_t samples = 0;
        std::int64_t epoch = 0;
        std::int64_t batch = 0; // the first micro-batch's number within the epoch
        double dataTime = 0; // seconds waiting for batches
        protocol::PhaseMemory phaseMemory; // after the last micro-batch's forward and backward
    };

    static AcceleratorOptions acceleratorOptions(const config::RunPlan& plan);
    void prepareModel();
    void convertToFloat8(); // mixed_precision fp8: its linear layers to fp8 matmuls
    void prepareData();
    void prepareUtilisation();
    StepOutcome trainStep(std::int64_t step);
    // trainStep, with an allocation failure turned into OutOfMemory with outOfMemoryReport's text.
    StepOutcome trainStepReportingOutOfMemory(std::int64_t step);
    std::string outOfMemoryReport(const std::exception& e, std::int64_t step);
    MicroSteps forwardAndBackward();
    void checkFinite(double lossSum, double gradNorm, std::int64_t step);
    // A stop agreed with a checkpoint: saves it (unless the step's periodic one is it) and reports
    // "checkpointed".
    void stopWithCheckpoint(std::int64_t stepsDone);
    // Evaluation and the periodic checkpoint; whether it saved one.
    bool betweenSteps(std::int64_t stepsDone);
    double evaluate();
    // Rank 0's model's continuations of the recipe's eval_prompts (every rank runs them; the
    // others return none).
    std::vector<protocol::TextSample> evalSamples();
    void finish();
    void exportTokenizer(const std::string& dir); // the run's tokenizer files beside the exported model

    const config::RunPlan& m_plan;
    const config::Recipe& m_recipe;
    EventSink& m_events;
    RunLayout m_layout;
    Accelerator m_acc;
    FaultInjector m_faults; // the tests' faults, at fixed points of a step (fault_injector.h)
    std::shared_ptr<models::TrainableModel> m_model;
    std::shared_ptr<const text::Tokenizer> m_sampleTokenizer; // eval_prompts' (null: bytes)
    bool m_sampleTokenizerLoaded = false;
    std::unique_ptr<data::Split> m_split;
    std::unique_ptr<data::DistributedSampler> m_sampler;
    std::unique_ptr<data::BatchIterator> m_batches;
    std::unique_ptr<torch::optim::Optimizer> m_optimizer;
    std::unique_ptr<Checkpointer> m_checkpointer;
    std::unique_ptr<ProfilingWindow> m_profiling;
    std::chrono::steady_clock::time_point m_runStart;
    std::int64_t m_stepInProgress = 0; // from 1
    NonfiniteProbe m_nonfinite; // where a NaN began
    bool m_diagnostics = true; // memory per phase measured (off in some of the overhead benchmark's steps)
    // MFU: the model's FLOPs per token (none: not countable) and the device's peak (mfu.h).
    std::optional<config::FlopsPerToken> m_flopsPerToken;
    std::optional<DevicePeak> m_devicePeak;
    std::int64_t m_fp8StateBytes = 0; // the fp8 layers' scaling state (delayed scaling)
};

} // namespace shardscope::train
