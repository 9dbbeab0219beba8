#include "engine/train/runner.h"

#include "engine/checkpoint/safetensors.h"
#include "engine/data/data.h"
#include "engine/models/models.h"
#include "engine/train/accelerator.h"
#include "engine/train/event_sink.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/version.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <thread>

namespace shardscope::train {

namespace {

using Clock = std::chrono::steady_clock;

std::atomic<bool> g_stopRequested{false};

// The learning-rate factor of Hugging Face's get_{constant,linear,cosine}_schedule_with_warmup
// for 0-based optimizer step `step` of `total`.
double scheduleFactor(const config::ScheduleRecipe& s, std::int64_t step, std::int64_t total)
{
    const auto warmup = s.warmupSteps;
    if (step < warmup)
        return static_cast<double>(step) / static_cast<double>(std::max<std::int64_t>(1, warmup));
    if (s.type == "constant")
        return 1.0;
    const double progress = static_cast<double>(step - warmup) / static_cast<double>(std::max<std::int64_t>(1, total - warmup));
    if (s.type == "linear")
        return std::max(0.0, 1.0 - progress);
    return std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * progress))); // cosine
}

std::unique_ptr<torch::optim::Optimizer> makeOptimizer(const config::OptimizerRecipe& o,
                                                       const std::vector<torch::Tensor>& params)
{
    if (o.type == "sgd")
        return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(o.lr).momentum(o.momentum).weight_decay(o.weightDecay));
    return std::make_unique<torch::optim::AdamW>(
        params, torch::optim::AdamWOptions(o.lr).betas({o.beta1, o.beta2}).eps(o.eps).weight_decay(o.weightDecay));
}

void setLearningRate(torch::optim::Optimizer& optimizer, double lr)
{
    for (auto& group : optimizer.param_groups())
        group.options().set_lr(lr);
}

std::int64_t tensorBytes(const torch::Tensor& t)
{
    return t.defined() ? t.numel() * static_cast<std::int64_t>(t.element_size()) : 0;
}

std::int64_t optimizerStateBytes(torch::optim::Optimizer& optimizer)
{
    std::int64_t bytes = 0;
    for (const auto& [key, state] : optimizer.state()) {
        if (auto* adamw = dynamic_cast<torch::optim::AdamWParamState*>(state.get()))
            bytes += tensorBytes(adamw->exp_avg()) + tensorBytes(adamw->exp_avg_sq()) + tensorBytes(adamw->max_exp_avg_sq());
        else if (auto* sgd = dynamic_cast<torch::optim::SGDParamState*>(state.get()))
            bytes += tensorBytes(sgd->momentum_buffer());
    }
    return bytes;
}

// VmRSS and VmHWM of this process, in bytes.
std::pair<std::int64_t, std::int64_t> residentMemory()
{
    std::ifstream status("/proc/self/status");
    std::string key;
    std::int64_t rss = 0, peak = 0;
    while (status >> key) {
        std::int64_t kb = 0;
        if (key == "VmRSS:" && status >> kb)
            rss = kb * 1024;
        else if (key == "VmHWM:" && status >> kb)
            peak = kb * 1024;
    }
    return {rss, peak};
}

double evaluate(models::TrainableModel& model, const data::Dataset& eval, Accelerator& acc, std::int64_t batchSize)
{
    torch::NoGradGuard noGrad;
    model.eval();
    // Each rank evaluates its strided share of the eval set; the mean over ranks is reported.
    double sum = 0;
    std::int64_t count = 0;
    const std::int64_t n = eval.size();
    std::vector<std::int64_t> mine;
    for (std::int64_t i = acc.processIndex(); i < n; i += acc.numProcesses())
        mine.push_back(i);
    for (std::size_t start = 0; start < mine.size(); start += static_cast<std::size_t>(batchSize)) {
        const auto len = std::min<std::size_t>(static_cast<std::size_t>(batchSize), mine.size() - start);
        auto index = at::from_blob(mine.data() + start, {static_cast<std::int64_t>(len)}, at::kLong).clone();
        auto inputs = eval.inputs.index_select(0, index).to(acc.device());
        auto targets = eval.targets.index_select(0, index).to(acc.device());
        if (inputs.is_floating_point())
            inputs = inputs.to(acc.inputDtype());
        if (targets.is_floating_point())
            targets = targets.to(acc.inputDtype());
        auto autocast = acc.autocast();
        sum += model.loss(model.forward(inputs), targets).item<double>() * static_cast<double>(len);
        count += static_cast<std::int64_t>(len);
    }
    model.train();
    return acc.meanOverRanks(count > 0 ? sum / static_cast<double>(count) : 0.0);
}

} // namespace

void requestStop()
{
    g_stopRequested.store(true);
}

void runTraining(const DistEnv& env, const RunOptions& options, EventSink& events)
{
    const config::Recipe& recipe = options.recipe;
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    at::set_num_threads(options.threads > 0 ? options.threads : std::max(1, cores / env.localWorldSize));

    AcceleratorOptions accOptions;
    accOptions.backend = options.backend;
    accOptions.gradientAccumulationSteps = recipe.gradientAccumulationSteps;
    accOptions.ddp.bucketCapBytes = static_cast<std::int64_t>(recipe.ddp.bucketCapMb * 1024 * 1024);
    accOptions.ddp.firstBucketCapBytes = static_cast<std::int64_t>(recipe.ddp.firstBucketCapMb * 1024 * 1024);
    accOptions.ddp.overlap = recipe.ddp.overlap;
    accOptions.precision = options.precision;
    if (options.sharding) {
        parallel::ShardingOptions sharding;
        sharding.zeroStage = options.sharding->zeroStage;
        sharding.reshardAfterForward = options.sharding->reshardAfterForward;
        sharding.reshardRootAfterForward = options.sharding->reshardRootAfterForward;
        sharding.wrapPolicy = options.sharding->wrapPolicy == "SIZE_BASED_WRAP" ? parallel::WrapPolicy::SizeBased
            : options.sharding->wrapPolicy == "NO_WRAP"                        ? parallel::WrapPolicy::NoWrap
                                                                               : parallel::WrapPolicy::TransformerBased;
        sharding.transformerLayerClasses = options.sharding->transformerLayerClasses;
        sharding.minNumParams = options.sharding->minNumParams;
        accOptions.sharding = sharding;
    }
    accOptions.scaler.initScale = recipe.lossScaler.initScale;
    accOptions.scaler.growthFactor = recipe.lossScaler.growthFactor;
    accOptions.scaler.backoffFactor = recipe.lossScaler.backoffFactor;
    accOptions.scaler.growthInterval = recipe.lossScaler.growthInterval;
    Accelerator acc(env, accOptions);

    char host[256] = {};
    gethostname(host, sizeof host - 1);
    events.emit(protocol::HelloEvent{static_cast<std::int64_t>(getpid()), host, acc.device().str(), TORCH_VERSION,
                                     acc.numProcesses(), env.localRank, env.groupRank});

    // Every rank builds the same initial weights from the seed; rank 0's are broadcast anyway.
    torch::manual_seed(recipe.seed);
    auto model = models::buildModel(recipe.model);
    acc.prepareModel(*model);
    if (!options.dumpInitialPath.empty()) {
        auto initial = acc.fullNamedParameters(*model); // a collective when sharded: every rank
        if (acc.isMainProcess())
            checkpoint::writeSafetensors(options.dumpInitialPath, initial);
    }

    const auto split = recipe.data.type == "text"
        ? data::makeByteText(recipe, recipe.data.path.empty() ? data::defaultTextPath() : recipe.data.path)
        : data::makeSyntheticRegression(recipe);
    data::DistributedSampler sampler(split.train.size(), acc.processIndex(), acc.numProcesses(), recipe.data.shuffle,
                                     recipe.seed, /*dropLast=*/!recipe.data.evenBatches);
    data::BatchIterator batches(split.train, sampler, recipe.perDeviceBatchSize);

    auto params = acc.optimizerParameters();
    auto optimizer = makeOptimizer(recipe.optimizer, params);
    model->train();

    const auto runStart = Clock::now();
    std::int64_t paramBytes = 0;
    for (const auto& p : params)
        paramBytes += tensorBytes(p);

    for (std::int64_t step = 0; step < recipe.maxSteps; ++step) {
        const auto stepStart = Clock::now();
        if (acc.sharded()) {
            acc.sharded()->resetPeaks();
            acc.sharded()->resetCommunication();
        }
        const double lr = recipe.optimizer.lr * scheduleFactor(recipe.schedule, step, recipe.maxSteps);
        setLearningRate(*optimizer, lr);

        double lossSum = 0;
        std::int64_t samples = 0, epoch = 0;
        for (std::int64_t micro = 0; micro < recipe.gradientAccumulationSteps; ++micro) {
            auto batch = batches.next();
            epoch = batch.epoch;
            [[maybe_unused]] Accelerator::AccumulateGuard guard = acc.accumulate();
            auto inputs = batch.inputs.to(acc.device());
            auto targets = batch.targets.to(acc.device());
            if (inputs.is_floating_point())
                inputs = inputs.to(acc.inputDtype());
            if (targets.is_floating_point())
                targets = targets.to(acc.inputDtype());
            torch::Tensor loss;
            {
                auto autocast = acc.autocast();
                loss = model->loss(model->forward(inputs), targets);
            }
            acc.backward(loss);
            lossSum += loss.item<double>();
            samples += batch.inputs.size(0);
        }
        if (!std::isfinite(lossSum))
            events.emit(protocol::LogEvent{"warning", "non-finite loss at step " + std::to_string(step + 1)});

        const double gradNorm = acc.clipGradNorm(recipe.maxGradNorm);
        std::int64_t gradBytes = 0;
        for (const auto& p : params)
            gradBytes += tensorBytes(p.grad());
        const std::int64_t allReduced = acc.ddp() ? acc.ddp()->allReducedBytes() : 0;
        if (step == 0 && acc.ddp()) {
            const auto& issues = acc.ddp()->lastIssues();
            const auto during = std::count_if(issues.begin(), issues.end(), [](const auto& i) { return i.duringBackward; });
            events.emit(protocol::LogEvent{"info", "ddp: " + std::to_string(acc.ddp()->bucketCount()) + " buckets, "
                                                       + std::to_string(during)
                                                       + " all-reduces issued before backward finished"});
        }
        acc.step(*optimizer);

        const double localLoss = lossSum / static_cast<double>(recipe.gradientAccumulationSteps);
        const auto agreement = acc.agreeOnStep(localLoss, g_stopRequested.load());
        const double globalLoss = agreement.meanLoss;
        const double stepTime = std::chrono::duration<double>(Clock::now() - stepStart).count();

        if ((step + 1) % recipe.logEvery == 0 || step + 1 == recipe.maxSteps) {
            protocol::StepEvent e;
            e.step = step + 1;
            e.epoch = epoch;
            e.loss = globalLoss;
            e.localLoss = localLoss;
            e.lr = lr;
            e.gradNorm = gradNorm;
            e.lossScale = acc.lossScale();
            e.skipped = acc.lastStepSkipped();
            e.skippedSteps = acc.skippedSteps();
            e.samples = samples;
            e.tokens = samples * split.train.tokensPerSample;
            e.stepTime = stepTime;
            e.tokensPerS = stepTime > 0 ? static_cast<double>(e.tokens * acc.numProcesses()) / stepTime : 0;
            e.mem.params = paramBytes;
            e.mem.grads = gradBytes;
            if (auto* sharded = acc.sharded()) {
                // Peak residency over the step: parameters (shards, plus units while gathered)
                // and gradients (full ones while not yet reduced, plus shards).
                e.mem.params = sharded->stats().peakParams;
                e.mem.grads = sharded->stats().peakGrads;
                e.comm.allGather = sharded->stats().allGathered;
                e.comm.reduceScatter = sharded->stats().reduceScattered;
            }
            e.mem.optimizer = optimizerStateBytes(*optimizer);
            std::tie(e.mem.rss, e.mem.peakAllocated) = residentMemory();
            e.comm.allReduce = allReduced;
            e.comm.broadcast = step == 0 && acc.ddp() ? acc.ddp()->broadcastBytes() : 0;
            events.emit(e);
        }
        if (agreement.stop) {
            events.emit(protocol::LogEvent{"info", "stopping after step " + std::to_string(step + 1) + " as asked"});
            events.emit(protocol::DoneEvent{"cancelled", step + 1,
                                            std::chrono::duration<double>(Clock::now() - runStart).count()});
            return;
        }
        if (recipe.evalEvery > 0 && split.eval.size() > 0 && ((step + 1) % recipe.evalEvery == 0 || step + 1 == recipe.maxSteps))
            events.emit(protocol::EvalEvent{step + 1, evaluate(*model, split.eval, acc, recipe.perDeviceBatchSize), {}});
    }

    if (!options.dumpParamsPath.empty()) {
        auto final = acc.fullNamedParameters(*model);
        if (acc.isMainProcess())
            checkpoint::writeSafetensors(options.dumpParamsPath, final);
    }
    acc.waitForEveryone();
    events.emit(protocol::DoneEvent{"completed", recipe.maxSteps,
                                    std::chrono::duration<double>(Clock::now() - runStart).count()});
}

} // namespace shardscope::train
