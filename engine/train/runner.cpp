#include "engine/train/runner.h"
#include "engine/common/run_layout.h"

#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/hf_export.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/data/data.h"
#include "engine/models/models.h"
#include "engine/train/accelerator.h"
#include "engine/train/event_sink.h"
#include "engine/train/full_optimizer_state.h"
#include "engine/train/heartbeat.h"
#include "profiler/analysis.h"
#include "profiler/chrome_trace.h"
#include "profiler/cupti/cupti_collector.h"
#include "profiler/span_recorder.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#ifdef SHARDSCOPE_HAVE_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/serialize.h>
#include <torch/version.h>

#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
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

bool nameContainsAny(const std::string& name, const std::vector<std::string>& patterns)
{
    return std::any_of(patterns.begin(), patterns.end(), [&](const std::string& p) { return name.find(p) != std::string::npos; });
}

// The optimizer over `named` parameters: one group, or two when optimizer.no_weight_decay names
// some (those get weight_decay 0), as Hugging Face's examples build them.
std::unique_ptr<torch::optim::Optimizer> makeOptimizer(const config::OptimizerRecipe& o,
                                                       const std::vector<std::pair<std::string, torch::Tensor>>& named)
{
    std::vector<torch::Tensor> decay, noDecay;
    for (const auto& [name, p] : named)
        (nameContainsAny(name, o.noWeightDecay) ? noDecay : decay).push_back(p);
    // The no-decay group's options: a copy of the defaults with weight_decay 0.
    auto groups = [&](const auto& defaults) {
        std::vector<torch::optim::OptimizerParamGroup> out;
        if (!decay.empty())
            out.emplace_back(decay);
        if (!noDecay.empty()) {
            auto options = std::make_unique<std::decay_t<decltype(defaults)>>(defaults);
            options->weight_decay(0);
            out.emplace_back(noDecay, std::move(options));
        }
        return out;
    };
    if (o.type == "sgd") {
        const auto defaults = torch::optim::SGDOptions(o.lr).momentum(o.momentum).weight_decay(o.weightDecay);
        return std::make_unique<torch::optim::SGD>(groups(defaults), defaults);
    }
    const auto defaults = torch::optim::AdamWOptions(o.lr).betas({o.beta1, o.beta2}).eps(o.eps).weight_decay(o.weightDecay);
    return std::make_unique<torch::optim::AdamW>(groups(defaults), defaults);
}

// model.frozen: parameters whose name starts with one of the prefixes stop requiring grad. A
// prefix that names nothing is an error (a typo would otherwise train what was meant frozen).
void freezeParameters(torch::nn::Module& model, const std::vector<std::string>& prefixes)
{
    for (const auto& prefix : prefixes) {
        bool matched = false;
        for (auto& item : model.named_parameters()) {
            if (item.key().compare(0, prefix.size(), prefix) == 0) {
                item.value().requires_grad_(false);
                matched = true;
            }
        }
        if (!matched) {
            std::string names;
            for (const auto& item : model.named_parameters(/*recurse=*/true))
                if (names.size() < 200)
                    names += (names.empty() ? "" : ", ") + item.key();
            throw std::runtime_error("recipe: model.frozen: '" + prefix
                                     + "' is the start of no parameter's name; "
                                       "names are like: "
                                     + names);
        }
    }
    const auto params = model.parameters();
    if (std::none_of(params.begin(), params.end(), [](const torch::Tensor& p) { return p.requires_grad(); }))
        throw std::runtime_error("recipe: model.frozen freezes every parameter; nothing would train");
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

// This process's resident set now and its peak, in bytes: /proc/self/statm (one short line) and
// getrusage, cheap enough for every step (/proc/self/status is ten times slower to parse).
std::pair<std::int64_t, std::int64_t> residentMemory()
{
    static const long pageSize = sysconf(_SC_PAGESIZE);
    std::int64_t rss = 0;
    if (std::FILE* statm = std::fopen("/proc/self/statm", "r")) {
        long long size = 0, resident = 0;
        if (std::fscanf(statm, "%lld %lld", &size, &resident) == 2)
            rss = resident * pageSize;
        std::fclose(statm);
    }
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return {rss, static_cast<std::int64_t>(usage.ru_maxrss) * 1024};
}

// CUDA ranks: bytes the caching allocator has handed out now, reserves, and the peak since the
// previous call (torch.cuda.memory_allocated / memory_reserved / max_memory_allocated).
void deviceMemory([[maybe_unused]] c10::Device device, [[maybe_unused]] protocol::MemoryStats& mem)
{
#ifdef SHARDSCOPE_HAVE_CUDA
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    constexpr auto all = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    mem.allocated = stats.allocated_bytes[all].current;
    mem.reserved = stats.reserved_bytes[all].current;
    mem.peakAllocated = stats.allocated_bytes[all].peak;
    c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#endif
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
        // A stop (Ctrl-C, or the launcher stopping the run after a rank died) ends the eval at
        // the next batch instead of after all of them; every rank still joins the mean below.
        if (g_stopRequested.load())
            break;
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

std::string strategyName(const config::RunPlan& plan)
{
    if (!plan.sharding)
        return "ddp";
    if (plan.sharding->reshardRootAfterForward)
        return "zero" + std::to_string(plan.sharding->zeroStage);
    // The optimizer's archive differs with use_orig_params (one entry per parameter, not per unit).
    const std::string layout = plan.sharding->useOrigParams ? " (use_orig_params)" : "";
    if (plan.sharding->hybridGroupSize > 0)
        return (plan.sharding->reshardAfterForward ? "HYBRID_SHARD" : "HYBRID_SHARD_ZERO2") + layout;
    return (plan.sharding->reshardAfterForward ? "FULL_SHARD" : "SHARD_GRAD_OP") + layout;
}

// What a checkpoint must agree on with the run that loads it.
checkpoint::Compatibility compatibilityOf(const config::RunPlan& plan, int worldSize)
{
    config::Recipe modelOnly;
    modelOnly.model = plan.recipe.model;
    modelOnly.model.pretrained.clear(); // where the weights first came from does not matter
    const std::string yaml = config::recipeToYaml(modelOnly);
    const auto begin = yaml.find("model:"), end = yaml.find("\ndata:");
    return {worldSize, strategyName(plan),
            config::stateDictTypeName(plan.sharding ? plan.stateDictType : config::StateDictType::Full),
            std::string(precision::modeName(plan.precision)), yaml.substr(begin, end - begin)};
}

void copyByName(torch::nn::Module& model, const std::map<std::string, at::Tensor>& tensors, const std::string& source)
{
    torch::NoGradGuard noGrad;
    for (auto& item : model.named_parameters()) {
        auto it = tensors.find(item.key());
        if (it == tensors.end() || it->second.sizes() != item.value().sizes())
            throw std::runtime_error(source + " has no parameter '" + item.key() + "' of the model's shape");
        item.value().copy_(it->second);
    }
}

} // namespace

void writeLogits(const config::Recipe& recipe, const std::string& weightsDir, const std::string& inputPath,
                 const std::string& outputPath)
{
    auto model = models::buildModel(recipe.model);
    auto weights = checkpoint::loadGpt2(weightsDir, recipe.model);
    if (!weights)
        throw std::runtime_error(weights.error().message);
    copyByName(*model, *weights, weightsDir);
    model->eval();
    std::ifstream in(inputPath, std::ios::binary);
    std::string bytes(static_cast<std::size_t>(recipe.model.blockSize), '\0');
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    bytes.resize(static_cast<std::size_t>(in.gcount()));
    if (bytes.empty())
        throw std::runtime_error("cannot read input bytes from " + inputPath);
    auto ids = at::empty({1, static_cast<std::int64_t>(bytes.size())}, at::kLong);
    for (std::size_t i = 0; i < bytes.size(); ++i)
        ids[0][static_cast<std::int64_t>(i)] = static_cast<std::int64_t>(static_cast<unsigned char>(bytes[i]));
    torch::NoGradGuard noGrad;
    checkpoint::writeSafetensors(outputPath, {{"input_ids", ids}, {"logits", model->forward(ids)}});
}

namespace {

// Every rank must resume the same step of the same checkpoint: ranks that disagree (an edited
// state_rank<N>.json, a checkpoint folder mixed from two runs) would wait in different
// collectives forever. All-gathers each rank's step and checkpoint and fails naming who differs.
void checkResumeAgreement(Accelerator& acc, std::int64_t step, const std::string& path)
{
    if (acc.numProcesses() == 1)
        return;
    const auto pathHash = static_cast<std::int64_t>(std::hash<std::string>{}(path)&0x7fffffffffffffffULL);
    auto mine = at::tensor(std::vector<std::int64_t>{step, pathHash}, at::kLong).to(acc.device());
    auto all = acc.gatherForMetrics(mine).to(at::kCPU).view({acc.numProcesses(), 2});
    std::string differ;
    for (int r = 0; r < acc.numProcesses(); ++r) {
        const auto s = all[r][0].item<std::int64_t>();
        const auto h = all[r][1].item<std::int64_t>();
        if (s != all[0][0].item<std::int64_t>() || h != all[0][1].item<std::int64_t>())
            differ += (differ.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " resumes after step "
                      + std::to_string(s) + (h != all[0][1].item<std::int64_t>() ? " of another checkpoint" : "");
    }
    if (!differ.empty())
        throw std::runtime_error("the ranks do not resume the same point: rank 0 resumes after step "
                                 + std::to_string(all[0][0].item<std::int64_t>()) + " of " + path + ", but " + differ
                                 + ". Each rank's state_rank<N>.json in the checkpoint must name the same step; resume "
                                   "from a checkpoint saved by one run, unchanged");
}

} // namespace

void requestStop() { g_stopRequested.store(true); }

void runTraining(const DistEnv& env, const config::RunPlan& plan, EventSink& events)
{
    const config::Recipe& recipe = plan.recipe;
    const RunLayout layout(plan.runDir);
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    at::set_num_threads(plan.threads > 0 ? plan.threads : std::max(1, cores / env.localWorldSize));

    AcceleratorOptions accOptions;
    accOptions.backend = plan.backend;
    accOptions.gradientAccumulationSteps = recipe.gradientAccumulationSteps;
    accOptions.ddp.bucketCapBytes = static_cast<std::int64_t>(recipe.ddp.bucketCapMb * 1024 * 1024);
    accOptions.ddp.firstBucketCapBytes = static_cast<std::int64_t>(recipe.ddp.firstBucketCapMb * 1024 * 1024);
    accOptions.ddp.overlap = recipe.ddp.overlap;
    accOptions.precision = plan.precision;
    if (plan.sharding) {
        const parallel::ShardingOptions& sharding = *plan.sharding;
        if (!sharding.useOrigParams && !recipe.optimizer.noWeightDecay.empty())
            throw std::runtime_error("recipe: optimizer.no_weight_decay needs per-parameter optimizer groups, and "
                                     "sharded units give the optimizer one flat shard each; set fsdp_use_orig_params: "
                                     "true in fsdp_config (DeepSpeed always keeps parameter groups)");
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
    // fsdp_cpu_ram_efficient_loading: only rank 0 reads the pretrained weights; the others get
    // their shards from it when the model is sharded.
    const bool weightsFromRankZero = plan.sharding && plan.sharding->rankZeroLoadsWeights && acc.processIndex() != 0;
    if (weightsFromRankZero && !recipe.model.pretrained.empty())
        events.emit(protocol::LogEvent{"info", "rank " + std::to_string(acc.processIndex()) + " does not read "
                                                   + recipe.model.pretrained
                                                   + "; its shards come from rank 0 (fsdp_cpu_ram_efficient_loading)"});
    if (!recipe.model.pretrained.empty() && !weightsFromRankZero) {
        auto pretrained = checkpoint::loadGpt2(recipe.model.pretrained, recipe.model);
        if (!pretrained)
            throw std::runtime_error(pretrained.error().message);
        copyByName(*model, *pretrained, recipe.model.pretrained);
    }
    if (recipe.model.loadDtype != "float32")
        model->to(recipe.model.loadDtype == "bfloat16" ? at::kBFloat16 : at::kHalf);
    freezeParameters(*model, recipe.model.frozen);
    acc.prepareModel(*model);
    if (acc.upcastParameters())
        events.emit(protocol::LogEvent{"info", "parameters loaded in " + recipe.model.loadDtype
                                                   + " are trained as fp32 master weights (bf16-pure keeps them in bf16)"});
    else if (recipe.model.loadDtype != "float32" && plan.precision == precision::PrecisionMode::No)
        events.emit(protocol::LogEvent{"info", "parameters loaded in " + recipe.model.loadDtype + " train in "
                                                   + recipe.model.loadDtype
                                                   + ": mixed_precision no does not upcast (as in Accelerate)"});
    if (!plan.faults.dumpInitialPath.empty()) {
        auto initial = acc.fullNamedParameters(*model); // a collective when sharded: every rank
        if (acc.isMainProcess())
            checkpoint::writeSafetensors(plan.faults.dumpInitialPath, initial);
    }

    const auto split = recipe.data.type == "text"
                           ? data::makeByteText(recipe, recipe.data.path.empty() ? data::defaultTextPath() : recipe.data.path)
                           : data::makeSyntheticRegression(recipe);
    data::DistributedSampler sampler(split.train.size(), acc.processIndex(), acc.numProcesses(), recipe.data.shuffle, recipe.seed,
                                     /*dropLast=*/!recipe.data.evenBatches);
    data::BatchIterator batches(split.train, sampler, recipe.perDeviceBatchSize);

    const auto& params = acc.optimizerParameters();
    auto optimizer = makeOptimizer(recipe.optimizer, acc.namedOptimizerParameters());
    model->train();

    // Resume: parameters, optimizer, data position, RNG and scaler exactly as they were.
    std::int64_t firstStep = 0;
    const auto compatibility = compatibilityOf(plan, acc.numProcesses());
    if (!plan.resumeFrom.empty()) {
        auto loaded = checkpoint::loadCheckpoint(plan.resumeFrom, acc.processIndex(), compatibility);
        if (!loaded)
            throw std::runtime_error(loaded.error().message);
        if (auto* sharded = acc.sharded())
            plan.stateDictType == config::StateDictType::Sharded ? sharded->loadShards(loaded->modelTensors)
                                                                 : sharded->loadFullParameters(loaded->modelTensors);
        else
            copyByName(*model, loaded->modelTensors, loaded->path);
        if (loaded->savedWorldSize) {
            loadFullOptimizerState(acc, *optimizer, loaded->fullOptimizerTensors);
            events.emit(protocol::LogEvent{"info", "resharded the checkpoint from " + std::to_string(*loaded->savedWorldSize)
                                                       + " to " + std::to_string(acc.numProcesses()) + " ranks"});
        } else {
            try {
                torch::load(*optimizer, loaded->optimizerFile);
            } catch (const c10::Error& e) {
                throw std::runtime_error("cannot read the optimizer state " + loaded->optimizerFile + " ("
                                         + e.what_without_backtrace()
                                         + "); the file is damaged or truncated: resume from an earlier checkpoint");
            }
        }
        batches.restore(loaded->loop.dataEpoch, loaded->loop.dataPosition);
        acc.restoreStepCounters(loaded->loop.skippedSteps, loaded->loop.lossScale, loaded->loop.scalerGrowthTracker);
        firstStep = loaded->loop.step;
        checkResumeAgreement(acc, firstStep, loaded->path);
        events.emit(protocol::LogEvent{"info", "resumed from " + loaded->path + " after step " + std::to_string(firstStep)});
    }
    auto saveState = [&](std::int64_t stepsDone) {
        checkpoint::SaveRequest request;
        request.checkpointsDir = layout.checkpointsDir().string();
        request.rank = acc.processIndex();
        request.compatibility = compatibility;
        request.loop = {stepsDone, batches.epoch(), batches.position(), acc.skippedSteps(), std::nullopt, 0};
        if (auto* scaler = acc.gradScaler()) {
            request.loop.lossScale = scaler->currentScale();
            request.loop.scalerGrowthTracker = scaler->growthTracker();
        }
        if (acc.sharded() && plan.stateDictType == config::StateDictType::Sharded) {
            request.modelTensors = acc.sharded()->namedShards();
        } else {
            auto full = acc.fullNamedParameters(*model); // a collective when sharded
            if (acc.isMainProcess())
                request.modelTensors = std::move(full);
        }
        request.serializeOptimizer = [&] {
            std::ostringstream bytes;
            torch::save(*optimizer, bytes);
            return bytes.str();
        };
        if (plan.stateDictType != config::StateDictType::Sharded || !acc.sharded()) {
            auto full = fullOptimizerState(acc, *optimizer); // a collective when sharded
            if (acc.isMainProcess())
                request.fullOptimizerTensors = std::move(full);
        }
        request.barrier = [&] { acc.waitForEveryone(); };
        request.allRanksOk = [&](bool ok) { return acc.meanOverRanks(ok ? 1.0 : 0.0) == 1.0; };
        request.keep = recipe.checkpointKeep;
        request.crashWhileWriting = stepsDone == plan.faults.crashInCheckpointAtStep;
        auto [path, bytes] = checkpoint::saveCheckpoint(request);
        events.emit(protocol::CheckpointEvent{stepsDone, path, "state", bytes});
    };

    // Profiling window: host spans of each phase and of every collective (Gloo has no device
    // timeline); on CUDA ranks the CUPTI collector adds the device's kernels, memcpys and memsets
    // (NCCL's kernels among them) while the window is open. When CUPTI cannot start (another
    // subscriber, no CUPTI in this build) the run goes on with host spans and says so.
    profiler::SpanRecorder recorder(acc.processIndex());
    const std::int64_t profileStart = plan.profileStartStep;
    const std::int64_t profileSteps = plan.profileSteps;
    const bool profiling = profileStart >= 0 && profileSteps > 0 && !plan.runDir.empty();
    if (profiling) {
        recorder.setWindow(profileStart, profileSteps);
        acc.setRecorder(&recorder);
    }
    std::unique_ptr<profiler::CuptiCollector> cupti;
    auto startDeviceTrace = [&] {
        if (!acc.device().is_cuda())
            return;
        auto started = profiler::CuptiCollector::start();
        if (!started) {
            events.emit(protocol::LogEvent{"warning", "CUPTI trace not started (host spans only): " + started.error().message});
            return;
        }
        cupti = std::move(*started);
    };
    auto finishTrace = [&] {
        auto trace = recorder.take();
        if (cupti) {
            torch::cuda::synchronize(); // the window's kernels have finished and are in CUPTI's buffers
            if (auto records = cupti->stop(); records)
                profiler::attachDeviceActivity(trace, *records, cupti->deviceToHostOffsetNs());
            else
                events.emit(protocol::LogEvent{"warning", "CUPTI trace lost (host spans only): " + records.error().message});
            cupti.reset();
        }
        const std::string path =
            (std::filesystem::path(layout.tracesDir()) / RunLayout::rankTraceName(acc.processIndex())).string();
        std::error_code ec;
        std::filesystem::create_directories(layout.tracesDir(), ec);
        if (auto written = profiler::writeRankTrace(path, trace); !written) {
            events.emit(protocol::LogEvent{"warning", "trace not written: " + written.error().message});
            return;
        }
        const auto s = profiler::summarise(trace);
        events.emit(protocol::TraceEvent{
            path, trace.source.empty() ? "host" : trace.source, {s.compute, s.comm, s.memory, s.idle, s.overlap}});
    };

    const auto runStart = Clock::now();
    std::int64_t paramBytes = 0; // DDP: every parameter, frozen or not (sharded runs measure their own)
    for (const auto& p : model->parameters())
        paramBytes += tensorBytes(p);

    for (std::int64_t step = firstStep; step < recipe.maxSteps; ++step) {
        setProgress(step, Phase::Train);
        const auto stepStart = Clock::now();
        if (step + 1 == plan.faults.fillDiskAtStep) {
            std::signal(SIGXFSZ, SIG_IGN); // a write past the limit fails with EFBIG instead of killing
            const rlimit limit{64 * 1024, 64 * 1024};
            setrlimit(RLIMIT_FSIZE, &limit);
        }
        if (acc.sharded()) {
            acc.sharded()->resetPeaks();
            acc.sharded()->resetCommunication();
        }
        const double lr = recipe.optimizer.lr * scheduleFactor(recipe.schedule, step, recipe.maxSteps);
        setLearningRate(*optimizer, lr);

        torch::Tensor lossSum; // this rank's losses of the step, summed without a host sync
        std::int64_t samples = 0, epoch = 0;
        const bool recordingBefore = recorder.enabled();
        recorder.stepBegan(step + 1);
        if (!recordingBefore && recorder.enabled())
            startDeviceTrace(); // the window opened with this step
        auto stepSpan = recorder.enabled() ? recorder.scope(profiler::Lane::Host, "step " + std::to_string(step + 1), "step")
                                           : profiler::SpanRecorder::Scope{};
        for (std::int64_t micro = 0; micro < recipe.gradientAccumulationSteps; ++micro) {
            auto dataSpan = recorder.scope(profiler::Lane::Host, "data", "data");
            auto batch = batches.next();
            dataSpan.finish();
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
                auto forwardSpan = recorder.scope(profiler::Lane::Compute, "forward", "forward");
                auto autocast = acc.autocast();
                loss = model->loss(model->forward(inputs), targets);
            }
            lossSum = micro == 0 ? loss.detach().to(at::kDouble) : lossSum + loss.detach().to(at::kDouble);
            if (micro + 1 == recipe.gradientAccumulationSteps)
                acc.startStepAgreement(lossSum / static_cast<double>(recipe.gradientAccumulationSteps), g_stopRequested.load());
            {
                auto backwardSpan = recorder.scope(profiler::Lane::Compute, "backward", "backward");
                acc.backward(loss);
            }
            samples += batch.inputs.size(0);
        }
        if (step + 1 == plan.faults.injectNonfiniteGradAtStep) {
            // Fault injection (tests): a NaN in the first synchronised gradient, on every rank
            // alike, as an overflow in the reduced gradients would be.
            acc.synchronizeGradients();
            for (auto& p : acc.optimizerParameters())
                if (p.grad().defined()) {
                    torch::NoGradGuard noGrad;
                    p.mutable_grad().view({-1})[0] = std::numeric_limits<float>::quiet_NaN();
                    break;
                }
        }

        const double gradNorm = acc.clipGradNorm(recipe.maxGradNorm);
        // Non-finite values outside fp16 (where the scaler skips the step): stop or flag.
        const double lossSumValue = lossSum.item<double>();
        if (!acc.gradScaler() && (!std::isfinite(lossSumValue) || !std::isfinite(gradNorm))) {
            const std::string what = std::string(!std::isfinite(lossSumValue) ? "loss" : "gradient norm") + " is "
                                     + std::to_string(!std::isfinite(lossSumValue) ? lossSumValue : gradNorm) + " at step "
                                     + std::to_string(step + 1);
            if (recipe.stopOnNonfinite) {
                events.emit(protocol::ErrorEvent{"nonfinite", what + " (training.stop_on_nonfinite)"});
                throw std::runtime_error(what + "; stopping (training.stop_on_nonfinite is true)");
            }
            events.emit(protocol::LogEvent{"warning", "non-finite " + what});
        }
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
        {
            auto optimizerSpan = recorder.scope(profiler::Lane::Compute, "optimizer", "optimizer");
            acc.step(*optimizer);
        }
        stepSpan.finish();
        if (recordingBefore && !recorder.enabled() && profiling)
            finishTrace(); // the window closed with this step

        const auto agreement = acc.finishStepAgreement();
        const double localLoss = agreement.localLoss;
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
            if (auto* sharded = acc.sharded())
                e.mem.optimizer += sharded->stats().masterShards; // ZeRO-1/2's fp32 master shard
            std::tie(e.mem.rss, e.mem.peakAllocated) = residentMemory();
            if (acc.device().is_cuda())
                deviceMemory(acc.device(), e.mem); // the caching allocator's view, peak since the last step event
            e.comm.allReduce = allReduced + (acc.sharded() ? acc.sharded()->stats().allReduced : 0);
            e.comm.broadcast = step == 0 && acc.ddp() ? acc.ddp()->broadcastBytes() : 0;
            events.emit(e);
        }
        if (agreement.stop) {
            events.emit(protocol::LogEvent{"info", "stopping after step " + std::to_string(step + 1) + " as asked"});
            events.emit(
                protocol::DoneEvent{"cancelled", step + 1, std::chrono::duration<double>(Clock::now() - runStart).count()});
            return;
        }
        if (recipe.evalEvery > 0 && split.eval.size() > 0
            && ((step + 1) % recipe.evalEvery == 0 || step + 1 == recipe.maxSteps)) {
            setProgress(step + 1, Phase::Eval);
            events.emit(protocol::EvalEvent{step + 1, evaluate(*model, split.eval, acc, recipe.perDeviceBatchSize), {}});
        }
        if (!plan.runDir.empty() && recipe.checkpointEvery > 0 && (step + 1) % recipe.checkpointEvery == 0) {
            setProgress(step + 1, Phase::Checkpoint);
            saveState(step + 1);
        }
    }
    setProgress(recipe.maxSteps, Phase::Finish);

    if (profiling && recorder.enabled()) {
        recorder.setEnabled(false);
        finishTrace(); // the run ended inside the window
    }

    if (!plan.runDir.empty() && recipe.exportModel.enabled) {
        auto full = acc.fullNamedParameters(*model);
        if (acc.isMainProcess()) {
            checkpoint::ExportOptions exportOptions;
            exportOptions.dtype = recipe.exportModel.dtype == "bfloat16"  ? at::kBFloat16
                                  : recipe.exportModel.dtype == "float16" ? at::kHalf
                                                                          : at::kFloat;
            exportOptions.maxShardBytes = static_cast<std::int64_t>(recipe.exportModel.maxShardMb * 1e6);
            const auto bytes = checkpoint::exportModel(layout.exportDir().string(), full, recipe.model, exportOptions);
            events.emit(protocol::CheckpointEvent{recipe.maxSteps, layout.exportDir().string(), "model", bytes});
        }
    }

    if (!plan.faults.dumpParamsPath.empty()) {
        auto final = acc.fullNamedParameters(*model);
        if (acc.isMainProcess())
            checkpoint::writeSafetensors(plan.faults.dumpParamsPath, final);
    }
    acc.waitForEveryone();
    events.emit(
        protocol::DoneEvent{"completed", recipe.maxSteps, std::chrono::duration<double>(Clock::now() - runStart).count()});
}

} // namespace shardscope::train
