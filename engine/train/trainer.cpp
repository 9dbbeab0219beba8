#include "engine/train/trainer.h"

#include "engine/checkpoint/hf_export.h"
#include "engine/train/generation.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/recipe/hf_config_keys.h"
#include "engine/estimate/memory_estimate.h"
#include "engine/recipe/model_architecture.h"
#include "engine/plan/run_plan.h"
#include "engine/common/byte_format.h"
#include "engine/dist/flight_recorder.h"
#include "engine/dist/wait_clock.h"
#include "engine/models/float8_conversion.h"
#include "engine/models/lora.h"
#include "engine/models/pretrained.h"
#include "engine/train/checkpointer.h"
#include "engine/train/event_sink.h"
#include "engine/train/fault_injector.h"
#include "engine/train/heartbeat.h"
#include "engine/train/optimizer_setup.h"
#include "engine/train/profiling_window.h"
#include "engine/train/rank_errors.h"
#include "engine/train/runner.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/version.h>
#ifdef SHARDSCOPE_HAVE_CUDA
#include <torch/csrc/cuda/memory_snapshot.h>
#endif

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

namespace shardscope::train {

namespace {

using Clock = std::chrono::steady_clock;

std::atomic<bool> g_stopRequested{false};
std::atomic<bool> g_checkpointRequested{false};

double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

} // namespace

void requestStop() { g_stopRequested.store(true); }

bool stopRequested() { return g_stopRequested.load(); }

void requestCheckpointAndStop() { g_checkpointRequested.store(true); }

bool checkpointAndStopRequested() { return g_checkpointRequested.load(); }

AcceleratorOptions Trainer::acceleratorOptions(const config::RunPlan& plan)
{
    const config::Recipe& recipe = plan.recipe;
    AcceleratorOptions options;
    options.backend = plan.backend;
    options.gradientAccumulationSteps = recipe.gradientAccumulationSteps;
    options.ddp.bucketCapBytes = static_cast<std::int64_t>(recipe.ddp.bucketCapMb * 1024 * 1024);
    options.ddp.firstBucketCapBytes = static_cast<std::int64_t>(recipe.ddp.firstBucketCapMb * 1024 * 1024);
    options.ddp.overlap = recipe.ddp.overlap;
    options.precision = plan.precision;
    if (plan.sharding)
        options.sharding = *plan.sharding;
    options.tensorParallelSize = plan.tensorParallelSize;
    options.scaler.initScale = recipe.lossScaler.initScale;
    options.scaler.growthFactor = recipe.lossScaler.growthFactor;
    options.scaler.backoffFactor = recipe.lossScaler.backoffFactor;
    options.scaler.growthInterval = recipe.lossScaler.growthInterval;
    return options;
}

Trainer::Trainer(const DistEnv& env, const config::RunPlan& plan, EventSink& events)
    : m_plan(plan), m_recipe(plan.recipe), m_events(events), m_layout(plan.runDir), m_acc(env, acceleratorOptions(plan)),
      m_faults(plan.faults, env.rank, plan.recipe.model.vocabSize)
{
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    // The peak first: the hello says what this rank's MFU is against (kept per machine; measured
    // here, every core, the first time a machine runs).
    m_devicePeak = devicePeak(m_acc.device(), m_plan.precision, m_plan.machinePeaksFile);
    protocol::HelloEvent hello;
    hello.pid = static_cast<std::int64_t>(getpid());
    hello.host = host;
    hello.device = m_acc.device().str();
    hello.torch = TORCH_VERSION;
    hello.worldSize = m_acc.numProcesses();
    hello.localRank = env.localRank;
    hello.machineRank = env.groupRank;
    hello.threads = at::get_num_threads();
    if (m_devicePeak) {
        hello.peakFlops = m_devicePeak->flops;
        hello.peakDtype = m_devicePeak->dtype;
        hello.peakSource = m_devicePeak->how;
        hello.precisionEmulated = m_devicePeak->emulated;
    }
    m_events.emit(hello);
    prepareModel();
    prepareData();
    prepareUtilisation();
    m_optimizer = makeOptimizer(m_recipe.optimizer, m_acc.namedOptimizerParameters());
    m_model->train();
    Float8Layers float8Layers;
    for (auto& fp8 : models::float8LinearWeights(*m_model))
        float8Layers.emplace_back(fp8.name.substr(0, fp8.name.rfind('.')), fp8.layer);
    m_checkpointer = std::make_unique<Checkpointer>(m_plan, m_acc, *m_optimizer, *m_batches, m_events, std::move(float8Layers));
}

Trainer::~Trainer() = default;

void Trainer::prepareModel()
{
    // Every rank builds the same initial weights from the seed; rank 0's are broadcast anyway.
    torch::manual_seed(m_recipe.seed);
    m_model = models::buildModel(m_recipe.model);
    const config::ModelRecipe& model = m_recipe.model;
    // fsdp_cpu_ram_efficient_loading: only rank 0 reads the pretrained weights; the others get
    // their shards from it when the model is sharded.
    const bool weightsFromRankZero = m_plan.sharding && m_plan.sharding->rankZeroLoadsWeights && m_acc.processIndex() != 0;
    if (weightsFromRankZero && !model.pretrained.empty())
        m_events.emit(protocol::LogEvent{"info", "rank " + std::to_string(m_acc.processIndex()) + " does not read "
                                                     + model.pretrained
                                                     + "; its shards come from rank 0 (fsdp_cpu_ram_efficient_loading)"});
    if (!model.pretrained.empty() && !weightsFromRankZero) {
        const auto unused = models::loadPretrained(*m_model, model, model.pretrained);
        if (!unused.empty() && m_acc.isMainProcess()) {
            std::string names;
            for (const auto& name : unused)
                names += (names.empty() ? "" : ", ") + name;
            m_events.emit(protocol::LogEvent{"warning", model.pretrained + " holds tensors the model does not use: " + names});
        }
    }
    if (model.loadDtype != "float32")
        m_model->to(model.loadDtype == "bfloat16" ? at::kBFloat16 : at::kHalf);
    if (model.lora.enabled) {
        const models::LoraSummary lora = models::applyLora(*m_model, model);
        m_events.emit(protocol::LogEvent{"info", "lora: " + std::to_string(lora.adaptedModules) + " projections adapted (r "
                                                     + std::to_string(model.lora.r) + "); " + std::to_string(lora.trainable)
                                                     + " of " + std::to_string(lora.total)
                                                     + " parameters train, the base weights are frozen"});
    }
    freezeParameters(*m_model, model.frozen);
    if (m_plan.precision == precision::PrecisionMode::Fp8)
        convertToFloat8();
    m_acc.prepareModel(*m_model);
    m_faults.attach(*m_model, m_stepInProgress);
    m_nonfinite.attach(*m_model); // after parallelism's hooks and the fault's
    if (m_acc.upcastParameters())
        m_events.emit(protocol::LogEvent{"info", "parameters loaded in " + model.loadDtype
                                                     + " are trained as fp32 master weights (bf16-pure keeps them in bf16)"});
    else if (model.loadDtype != "float32" && m_plan.precision == precision::PrecisionMode::No)
        m_events.emit(protocol::LogEvent{"info", "parameters loaded in " + model.loadDtype + " train in " + model.loadDtype
                                                     + ": mixed_precision no does not upcast (as in Accelerate)"});
    if (!m_plan.faults.dumpInitialPath.empty()) {
        auto initial = m_acc.fullNamedParameters(); // a collective when sharded: every rank
        if (m_acc.isMainProcess())
            checkpoint::writeSafetensors(m_plan.faults.dumpInitialPath, initial);
    }
}

void Trainer::convertToFloat8()
{
    const models::Float8Conversion fp8 = models::convertToFloat8(*m_model, m_recipe, m_plan.fp8);
    m_fp8StateBytes = fp8.stateBytes;
    if (!m_acc.isMainProcess())
        return;
    std::string kept;
    for (const auto& name : fp8.kept)
        kept += (kept.empty() ? "" : ", ") + name;
    const std::size_t total = fp8.converted.size() + fp8.kept.size();
    if (fp8.converted.empty())
        m_events.emit(protocol::LogEvent{"warning", "fp8: none of the model's " + std::to_string(total)
                                                        + " linear layers qualifies (Accelerate keeps the first and the last, "
                                                          "and those with a dimension not divisible by 16, in bf16): this run "
                                                          "computes as bf16"});
    else
        m_events.emit(protocol::LogEvent{"info", "fp8: " + std::to_string(fp8.converted.size()) + " of " + std::to_string(total)
                                                     + " linear layers run their matmuls in fp8 with " + m_plan.fp8.describe()
                                                     + "; kept in bf16: " + (kept.empty() ? "none" : kept) + "; scaling state "
                                                     + std::to_string(fp8.stateBytes) + " bytes"});
    if (m_acc.device().is_cpu())
        m_events.emit(protocol::LogEvent{"warning", "fp8 on the CPU runs emulated (torch._scaled_mm without fp8 hardware): "
                                                    "the numbers of an fp8 run without its speed (slower than bf16)"});
}

namespace {

// The recipe with a Hugging Face family's vocab_size as its architecture says (config.json or the
// recipe's keys), which the data is checked against.
config::Recipe withResolvedVocabulary(config::Recipe recipe)
{
    if (config::isHfFamilyType(recipe.model.type)) {
        auto architecture = config::resolveArchitecture(recipe.model, "the recipe");
        if (!architecture)
            throw std::runtime_error(architecture.error().message);
        recipe.model = config::withArchitecture(recipe.model, *architecture);
    }
    return recipe;
}

} // namespace

void Trainer::prepareData()
{
    const auto& kind = m_recipe.data.type;
    m_split = std::make_unique<data::Split>(
        kind == "tokens" ? data::makeTokenBlocks(withResolvedVocabulary(m_recipe), at::get_num_threads())
        : kind == "text" ? data::makeByteText(m_recipe, m_recipe.data.path.empty() ? data::defaultTextPath() : m_recipe.data.path)
                         : data::makeSyntheticRegression(m_recipe));
    if (kind == "tokens" && m_acc.isMainProcess())
        m_events.emit(protocol::LogEvent{"info", data::describe(*m_split)});
    m_sampler = std::make_unique<data::DistributedSampler>(m_split->train.size(), m_acc.dataParallelRank(),
                                                           m_acc.dataParallelSize(), m_recipe.data.shuffle, m_recipe.seed,
                                                           /*dropLast=*/!m_recipe.data.evenBatches);
    m_batches = std::make_unique<data::BatchIterator>(m_split->train, *m_sampler, m_recipe.perDeviceBatchSize);
}

void Trainer::prepareUtilisation()
{
    const bool recomputes = m_plan.sharding && m_plan.sharding->activationCheckpointing;
    auto perToken = config::flopsPerToken(m_recipe, recomputes);
    if (!perToken) {
        if (m_acc.isMainProcess())
            m_events.emit(protocol::LogEvent{"warning", "no MFU for this run: " + perToken.error().message});
        return;
    }
    m_flopsPerToken = *perToken;
    if (!m_acc.isMainProcess())
        return;
    char text[512];
    if (m_devicePeak)
        std::snprintf(text, sizeof text, "MFU: %.4g FLOPs per token (model%s), device peak %.4g TFLOP/s (%s)", perToken->model,
                      recomputes ? ", recomputation apart" : "", m_devicePeak->flops / 1e12, m_devicePeak->how.c_str());
    else
        std::snprintf(text, sizeof text, "MFU: %.4g FLOPs per token (model); no peak known for %s, FLOP/s only", perToken->model,
                      m_acc.device().str().c_str());
    m_events.emit(protocol::LogEvent{"info", text});
}

void Trainer::run()
{
    const std::int64_t firstStep = m_plan.resumeFrom.empty() ? 0 : m_checkpointer->resume();
    m_profiling = std::make_unique<ProfilingWindow>(m_plan, m_acc, m_events);
    m_runStart = Clock::now();
    for (std::int64_t step = firstStep; step < m_recipe.maxSteps; ++step) {
        const StepOutcome outcome = trainStepReportingOutOfMemory(step);
        if ((step + 1) % m_recipe.logEvery == 0 || step + 1 == m_recipe.maxSteps) {
            auto event = makeStepEvent(outcome.measured, m_acc, *m_optimizer);
            event.mem.fp8Scaling = m_fp8StateBytes;
            if (m_flopsPerToken)
                addUtilisation(event, *m_flopsPerToken, m_devicePeak);
            m_events.emit(event);
        }
        if (outcome.stop && outcome.checkpointFirst && !m_plan.runDir.empty()) {
            stopWithCheckpoint(step + 1);
            return;
        }
        if (outcome.stop) {
            m_events.emit(protocol::LogEvent{"info", "stopping after step " + std::to_string(step + 1) + " as asked"});
            m_events.emit(protocol::DoneEvent{"cancelled", step + 1, secondsSince(m_runStart)});
            return;
        }
        betweenSteps(step + 1);
    }
    setProgress(m_recipe.maxSteps, Phase::Finish);
    m_profiling->runEnded();
    finish();
}

Trainer::StepOutcome Trainer::trainStepReportingOutOfMemory(std::int64_t step)
{
    try {
        return trainStep(step);
    } catch (const std::exception& e) {
        if (!isOutOfMemory(e) || dynamic_cast<const OutOfMemory*>(&e))
            throw;
        throw OutOfMemory(outOfMemoryReport(e, step));
    }
}

// Where it ran out (the phase), what the rank held, what the estimate says the config needs,
// and on CUDA the allocator's snapshot in the run directory (torch.cuda.memory._dump_snapshot's
// format: pytorch.org/memory_viz reads it).
std::string Trainer::outOfMemoryReport(const std::exception& e, std::int64_t step)
{
    const auto* c10 = dynamic_cast<const c10::Error*>(&e);
    std::string cause = c10 ? c10->what_without_backtrace() : e.what();
    if (const auto end = cause.find('\n'); end != std::string::npos)
        cause.resize(end);
    // The CPU allocator's TORCH_CHECK prefix says where in c10 it failed, not what the user needs.
    if (cause.rfind("[enforce fail at ", 0) == 0)
        if (const auto text = cause.find("DefaultCPUAllocator"); text != std::string::npos)
            cause.erase(0, text);
    std::string report = "out of memory in " + std::string(dist::FlightRecorder::instance().phase()) + " of step "
                         + std::to_string(step + 1) + " (" + cause + "); this rank held "
                         + formatBytes(static_cast<double>(memoryInUse(m_acc.device())))
                         + (m_acc.device().is_cuda() ? " allocated" : " resident");
    const config::MemoryEstimate estimate = config::estimateRun(m_plan);
    report += "; the estimate for this config is " + formatBytes(estimate.deviceTotal()) + " per rank (model states "
              + formatBytes(estimate.modelStates()) + ", activations " + formatBytes(estimate.activations)
              + "; shardscope estimate-memory shows the choices that need less)";
#ifdef SHARDSCOPE_HAVE_CUDA
    if (m_acc.device().is_cuda() && !m_plan.runDir.empty()) {
        const auto path = m_layout.dir() / ("memory_snapshot_rank" + std::to_string(m_acc.processIndex()) + ".pickle");
        std::ofstream(path, std::ios::binary) << torch::cuda::_memory_snapshot_pickled();
        report += "; the CUDA allocator's snapshot is in " + path.string();
    }
#endif
    return report;
}

Trainer::StepOutcome Trainer::trainStep(std::int64_t step)
{
    setProgress(step, Phase::Train);
    m_stepInProgress = step + 1;
    if (m_plan.faults.diagnosticsAb) {
        // The overhead benchmark's cycle of four steps: none of the diagnostics, all of them, the
        // flight recorder and wait clock alone, the NaN probe and memory per phase alone.
        const std::int64_t mode = m_stepInProgress % 4;
        dist::FlightRecorder::instance().setEnabled(mode == 1 || mode == 2);
        m_diagnostics = mode == 1 || mode == 3;
        m_nonfinite.setEnabled(m_diagnostics);
    }
    m_nonfinite.beginStep();
    const auto stepStart = Clock::now();
    const double waitedBefore = dist::secondsWaited();
    m_faults.beforeStep(m_stepInProgress);
    m_acc.dataParallel().beginStep();
    const double lr = m_recipe.optimizer.lr * scheduleFactor(m_recipe.schedule, step, m_recipe.maxSteps);
    setLearningRate(*m_optimizer, lr);

    m_profiling->stepBegins(step + 1);
    profiler::SpanRecorder& recorder = m_profiling->recorder();
    auto stepSpan = recorder.enabled() ? recorder.scope(profiler::Lane::Host, "step " + std::to_string(step + 1), "step")
                                       : profiler::SpanRecorder::Scope{};
    const MicroSteps micro = forwardAndBackward();
    m_faults.afterBackward(m_acc, m_stepInProgress);
    setProgress(step, Phase::Optimizer); // clipping's norm, the step, the agreement
    const double gradNorm = m_acc.clipGradNorm(m_recipe.maxGradNorm);
    checkFinite(micro.lossSum.item<double>(), gradNorm, step);
    if (step == 0)
        if (std::string report = m_acc.dataParallel().firstStepReport(); !report.empty())
            m_events.emit(protocol::LogEvent{"info", std::move(report)});
    double optimizerTime = 0;
    {
        auto optimizerSpan = recorder.scope(profiler::Lane::Compute, "optimizer", "optimizer");
        const auto optimizerStart = Clock::now();
        m_acc.step(*m_optimizer);
        optimizerTime = secondsSince(optimizerStart);
    }
    protocol::PhaseMemory phaseMemory = micro.phaseMemory;
    if (m_diagnostics)
        phaseMemory.afterOptimizer = memoryInUse(m_acc.device());
    stepSpan.finish();
    m_profiling->stepEnded();

    const auto agreement = m_acc.finishStepAgreement();
    StepOutcome outcome;
    outcome.stop = agreement.stop;
    outcome.checkpointFirst = agreement.checkpointFirst;
    StepMeasurement& m = outcome.measured;
    m.step = step + 1;
    m.epoch = micro.epoch;
    m.batch = micro.batch;
    m.loss = agreement.meanLoss;
    m.localLoss = agreement.localLoss;
    m.lr = lr;
    m.gradNorm = gradNorm;
    m.samples = micro.samples;
    // The tokens this rank's compute trained: a tensor group's ranks split each of its batches, so
    // MFU, tokens/s and the tokens-seen axis (tokens x ranks) count each token once.
    m.tokens = micro.samples * m_split->train.tokensPerSample / m_acc.tensorParallelSize();
    m.stepTime = secondsSince(stepStart);
    m.dataTime = micro.dataTime;
    m.waitTime = dist::secondsWaited() - waitedBefore;
    m.optimizerTime = optimizerTime;
    m.phaseMemory = phaseMemory;
    return outcome;
}

Trainer::MicroSteps Trainer::forwardAndBackward()
{
    profiler::SpanRecorder& recorder = m_profiling->recorder();
    MicroSteps out;
    for (std::int64_t micro = 0; micro < m_recipe.gradientAccumulationSteps; ++micro) {
        setProgress(m_stepInProgress - 1, Phase::Data);
        auto dataSpan = recorder.scope(profiler::Lane::Host, "data", "data");
        const auto dataStart = Clock::now();
        auto batch = m_batches->next();
        out.dataTime += secondsSince(dataStart);
        dataSpan.finish();
        out.epoch = batch.epoch;
        if (micro == 0)
            out.batch = batch.position / std::max<std::int64_t>(1, m_recipe.perDeviceBatchSize);
        m_faults.spoil(batch, m_stepInProgress);
        [[maybe_unused]] Accelerator::AccumulateGuard guard = m_acc.accumulate();
        auto inputs = batch.inputs.to(m_acc.device());
        auto targets = batch.targets.to(m_acc.device());
        if (inputs.is_floating_point())
            inputs = inputs.to(m_acc.inputDtype());
        if (targets.is_floating_point())
            targets = targets.to(m_acc.inputDtype());
        torch::Tensor loss;
        setProgress(m_stepInProgress - 1, Phase::Forward);
        {
            auto forwardSpan = recorder.scope(profiler::Lane::Compute, "forward", "forward");
            auto autocast = m_acc.autocast();
            loss = m_model->loss(m_model->forward(inputs), targets);
        }
        m_faults.afterForward(m_acc.device(), m_stepInProgress);
        if (m_diagnostics)
            out.phaseMemory.afterForward = memoryInUse(m_acc.device());
        out.lossSum = micro == 0 ? loss.detach().to(at::kDouble) : out.lossSum + loss.detach().to(at::kDouble);
        if (micro + 1 == m_recipe.gradientAccumulationSteps)
            m_acc.startStepAgreement(out.lossSum / static_cast<double>(m_recipe.gradientAccumulationSteps), stopRequested(),
                                     checkpointAndStopRequested());
        setProgress(m_stepInProgress - 1, Phase::Backward);
        {
            auto backwardSpan = recorder.scope(profiler::Lane::Compute, "backward", "backward");
            m_acc.backward(loss);
        }
        if (m_diagnostics)
            out.phaseMemory.afterBackward = memoryInUse(m_acc.device());
        out.samples += batch.inputs.size(0);
    }
    return out;
}

void Trainer::checkFinite(double lossSum, double gradNorm, std::int64_t step)
{
    // Non-finite values outside fp16 (where the scaler skips the step): stop or flag, saying where
    // they began.
    if (m_acc.gradScaler() || (std::isfinite(lossSum) && std::isfinite(gradNorm)))
        return;
    const std::string what = std::string(!std::isfinite(lossSum) ? "loss" : "gradient norm") + " is "
                             + std::to_string(!std::isfinite(lossSum) ? lossSum : gradNorm) + " at step "
                             + std::to_string(step + 1) + "; " + m_nonfinite.describe(std::isfinite(lossSum));
    if (m_recipe.stopOnNonfinite) {
        m_events.emit(protocol::ErrorEvent{"nonfinite", what + " (training.stop_on_nonfinite)"});
        throw std::runtime_error(what + "; stopping (training.stop_on_nonfinite is true)");
    }
    m_events.emit(protocol::LogEvent{"warning", "non-finite " + what});
}

void Trainer::stopWithCheckpoint(std::int64_t stepsDone)
{
    // The step's evaluation and periodic checkpoint first, as an uninterrupted run has them; then
    // the checkpoint the next attempt resumes from, unless that was it.
    if (!betweenSteps(stepsDone)) {
        setProgress(stepsDone, Phase::Checkpoint);
        m_checkpointer->save(stepsDone);
    }
    m_events.emit(protocol::LogEvent{"info", "stopping after step " + std::to_string(stepsDone)
                                                 + " as asked, with a checkpoint to resume from"});
    m_events.emit(protocol::DoneEvent{"checkpointed", stepsDone, secondsSince(m_runStart)});
}

bool Trainer::betweenSteps(std::int64_t stepsDone)
{
    const bool last = stepsDone == m_recipe.maxSteps;
    if (m_recipe.evalEvery > 0 && m_split->eval.size() > 0 && (stepsDone % m_recipe.evalEvery == 0 || last)) {
        setProgress(stepsDone, Phase::Eval);
        const double loss = evaluate();
        m_events.emit(protocol::EvalEvent{stepsDone, loss, {}, evalSamples()});
    }
    if (!m_plan.runDir.empty() && m_recipe.checkpointEvery > 0 && stepsDone % m_recipe.checkpointEvery == 0) {
        setProgress(stepsDone, Phase::Checkpoint);
        m_checkpointer->save(stepsDone);
        return true;
    }
    return false;
}

double Trainer::evaluate()
{
    torch::NoGradGuard noGrad;
    m_model->eval();
    // Each rank evaluates its strided share of the eval set; the mean over ranks is reported.
    const data::Dataset& eval = m_split->eval;
    const auto batchSize = static_cast<std::size_t>(m_recipe.perDeviceBatchSize);
    double sum = 0;
    std::int64_t count = 0;
    std::vector<std::int64_t> mine;
    // (A tensor group evaluates one share together: its ranks run each forward's collectives.)
    for (std::int64_t i = m_acc.dataParallelRank(); i < eval.size(); i += m_acc.dataParallelSize())
        mine.push_back(i);
    // Sharded units and split projections communicate in every forward: there a rank that saw the
    // stop first must not leave a peer inside a collective, so the eval runs to its end.
    const bool forwardsCommunicate = m_acc.sharded() != nullptr || m_acc.tensorParallelSize() > 1;
    for (std::size_t start = 0; start < mine.size(); start += batchSize) {
        // A stop (Ctrl-C, or the launcher stopping the run after a rank died) ends the eval at
        // the next batch instead of after all of them; every rank still joins the mean below.
        if (stopRequested() && !forwardsCommunicate)
            break;
        const auto len = std::min(batchSize, mine.size() - start);
        auto [inputs, targets] = eval.gather(mine.data() + start, static_cast<std::int64_t>(len));
        inputs = inputs.to(m_acc.device());
        targets = targets.to(m_acc.device());
        if (inputs.is_floating_point())
            inputs = inputs.to(m_acc.inputDtype());
        if (targets.is_floating_point())
            targets = targets.to(m_acc.inputDtype());
        auto autocast = m_acc.autocast();
        sum += m_model->loss(m_model->forward(inputs), targets).item<double>() * static_cast<double>(len);
        count += static_cast<std::int64_t>(len);
    }
    m_model->train();
    return m_acc.meanOverRanks(count > 0 ? sum / static_cast<double>(count) : 0.0);
}

std::vector<protocol::TextSample> Trainer::evalSamples()
{
    if (m_recipe.evalPrompts.empty())
        return {};
    if (!m_sampleTokenizerLoaded) {
        // The data's tokenizer, which the run's data already checked against the model; none: the
        // model reads bytes.
        if (const std::string folder = config::tokenizerFolder(m_recipe); !folder.empty()) {
            auto loaded = text::Tokenizer::load(folder);
            if (!loaded)
                throw std::runtime_error("training.eval_prompts: " + loaded.error().message);
            m_sampleTokenizer = std::make_shared<const text::Tokenizer>(std::move(*loaded));
        }
        m_sampleTokenizerLoaded = true;
    }
    GenerationOptions options;
    options.maxNewTokens = m_recipe.evalSampleTokens;
    options.contextLength = m_recipe.model.blockSize;
    options.runPastEos = m_acc.numProcesses() > 1; // every rank runs the same forwards (sharded units gather together)
    std::vector<protocol::TextSample> samples;
    {
        auto autocast = m_acc.autocast();
        for (const auto& prompt : m_recipe.evalPrompts)
            samples.push_back({prompt, generate(*m_model, m_sampleTokenizer.get(), prompt, options).text});
    }
    m_model->train();
    if (m_acc.processIndex() != 0)
        samples.clear(); // the same text on every rank: rank 0's is recorded
    return samples;
}

void Trainer::exportTokenizer(const std::string& dir)
{
    // The tokenizer the run trained with goes beside the model, as save_pretrained of a model and
    // its tokenizer leaves them: AutoTokenizer.from_pretrained(export) then works.
    const std::string from = config::tokenizerFolder(m_recipe);
    if (from.empty() || !std::filesystem::is_directory(dir))
        return;
    int copied = 0;
    for (const char* file : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt",
                             "tokenizer.model", "added_tokens.json"}) {
        std::error_code ec;
        const auto source = std::filesystem::path(from) / file;
        if (!std::filesystem::is_regular_file(source, ec))
            continue;
        std::filesystem::copy_file(source, std::filesystem::path(dir) / file, std::filesystem::copy_options::overwrite_existing,
                                   ec);
        if (ec)
            m_events.emit(protocol::LogEvent{"warning", "the export has no " + std::string(file) + ": " + ec.message()});
        else
            ++copied;
    }
    if (copied > 0)
        m_events.emit(protocol::LogEvent{"info", "the export has the tokenizer of " + from + " (" + std::to_string(copied)
                                                     + " files): AutoTokenizer.from_pretrained reads it"});
}

void Trainer::finish()
{
    if (!m_plan.runDir.empty() && m_recipe.exportModel.enabled) {
        auto full = m_acc.fullNamedParameters(); // a collective when sharded; empty off rank 0
        if (m_acc.isMainProcess()) {
            const auto& wanted = m_recipe.exportModel;
            checkpoint::ExportOptions exportOptions;
            exportOptions.dtype = wanted.dtype == "bfloat16" ? at::kBFloat16 : wanted.dtype == "float16" ? at::kHalf : at::kFloat;
            exportOptions.maxShardBytes = static_cast<std::int64_t>(wanted.maxShardMb * 1e6);
            const std::string dir = m_layout.exportDir().string();
            if (m_recipe.model.lora.enabled) {
                // The adapter as PEFT saves it; the merged model only when asked (the base is unchanged).
                const std::string adapterDir = (m_layout.exportDir() / "adapter").string();
                models::saveLoraAdapter(adapterDir, full, m_recipe.model);
                const auto adapterBytes = static_cast<std::int64_t>(
                    std::filesystem::file_size(adapterDir + "/adapter_model.safetensors"));
                m_events.emit(protocol::CheckpointEvent{m_recipe.maxSteps, adapterDir, "adapter", adapterBytes});
                if (wanted.mergeLora) {
                    const auto bytes = checkpoint::exportModel(dir, models::mergeLora(full, m_recipe.model), m_recipe.model,
                                                               exportOptions);
                    m_events.emit(protocol::CheckpointEvent{m_recipe.maxSteps, dir, "model", bytes});
                }
            } else {
                const auto bytes = checkpoint::exportModel(dir, full, m_recipe.model, exportOptions);
                m_events.emit(protocol::CheckpointEvent{m_recipe.maxSteps, dir, "model", bytes});
            }
            exportTokenizer(dir);
        }
    }
    if (!m_plan.faults.dumpParamsPath.empty()) {
        auto final = m_acc.fullNamedParameters();
        if (m_acc.isMainProcess())
            checkpoint::writeSafetensors(m_plan.faults.dumpParamsPath, final);
    }
    m_acc.waitForEveryone();
    m_events.emit(protocol::DoneEvent{"completed", m_recipe.maxSteps, secondsSince(m_runStart)});
}

} // namespace shardscope::train
