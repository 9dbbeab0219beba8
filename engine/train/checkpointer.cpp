#include "engine/train/checkpointer.h"

#include "engine/plan/run_plan.h"
#include "engine/data/data.h"
#include "engine/precision/float8_linear.h"
#include "engine/train/accelerator.h"
#include "engine/train/event_sink.h"
#include "engine/train/full_optimizer_state.h"

#include <ATen/ATen.h>
#include <torch/serialize.h>

#include <algorithm>
#include <functional>
#include <sstream>
#include <stdexcept>

namespace shardscope::train {

namespace {

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

checkpoint::Compatibility compatibilityOf(const config::RunPlan& plan, int worldSize)
{
    config::Recipe modelOnly;
    modelOnly.model = plan.recipe.model;
    modelOnly.model.pretrained.clear(); // where the weights first came from does not matter
    // Checkpoints written before the typed fingerprint hold the model section's YAML text.
    const std::string yaml = config::recipeToYaml(modelOnly);
    const auto begin = yaml.find("model:"), end = yaml.find("\ndata:");
    return {worldSize,
            plan.tensorParallelSize,
            strategyName(plan),
            config::stateDictTypeName(plan.sharding ? plan.stateDictType : config::StateDictType::Full),
            std::string(precision::modeName(plan.precision)),
            config::modelFingerprint(modelOnly.model),
            yaml.substr(begin, end - begin)};
}

Checkpointer::Checkpointer(const config::RunPlan& plan, Accelerator& acc, torch::optim::Optimizer& optimizer,
                           data::BatchIterator& batches, EventSink& events, Float8Layers float8Layers)
    : m_plan(plan), m_acc(acc), m_optimizer(optimizer), m_batches(batches), m_events(events), m_layout(plan.runDir),
      m_compatibility(compatibilityOf(plan, acc.dataParallelSize())), m_float8Layers(std::move(float8Layers))
{
}

// Delayed scaling scales each fp8 operand from the amaxes of earlier calls: without its histories
// a resumed run would start again from scale 1 and leave the original's numbers.
void Checkpointer::restoreFloat8State(const checkpoint::LoadedCheckpoint& loaded)
{
    const bool delayed = std::any_of(m_float8Layers.begin(), m_float8Layers.end(),
                                     [](const auto& named) { return named.second->delayedState() != nullptr; });
    if (!delayed) {
        if (!loaded.fp8State.empty() && m_acc.isMainProcess())
            m_events.emit(protocol::LogEvent{"warning", "checkpoint " + loaded.path
                                                            + " holds fp8 delayed scaling's amax histories; this run "
                                                              "scales tensorwise and does not use them"});
        return;
    }
    if (loaded.fp8State.empty()) {
        if (m_acc.isMainProcess())
            m_events.emit(protocol::LogEvent{
                "warning", "fp8 delayed scaling: checkpoint " + loaded.path
                               + " holds no amax histories (it was written at another world size, each rank's being its "
                                 "own data's, or without delayed scaling), so they restart here (scale 1) and this resumed "
                                 "run does not continue the original bit for bit"});
        return;
    }
    for (const auto& [path, layer] : m_float8Layers) {
        if (auto* state = layer->delayedState()) {
            try {
                state->restoreState(path + ".", loaded.fp8State);
            } catch (const std::exception& e) {
                throw std::runtime_error("checkpoint " + loaded.path + ": " + loaded.fp8StateFile + " " + e.what());
            }
        }
    }
}

std::int64_t Checkpointer::resume()
{
    // Parameters, optimizer, data position, RNG and scaler exactly as they were.
    auto loaded = checkpoint::loadCheckpoint(m_plan.resumeFrom, m_acc.processIndex(), m_compatibility);
    if (!loaded)
        throw std::runtime_error(loaded.error().message);
    if (auto* sharded = m_acc.sharded(); sharded && m_plan.stateDictType == config::StateDictType::Sharded)
        sharded->loadShards(loaded->modelTensors);
    else
        m_acc.dataParallel().loadFullParameters(loaded->modelTensors, loaded->path);
    if (loaded->savedWorldSize) {
        loadFullOptimizerState(m_acc, m_optimizer, loaded->fullOptimizerTensors);
        const int savedTp = loaded->savedTensorParallel, tp = m_acc.tensorParallelSize();
        const auto ranks = [](int dataParallel, int tensorParallel) {
            return std::to_string(dataParallel * tensorParallel)
                   + (tensorParallel > 1 ? " (tp_size " + std::to_string(tensorParallel) + ")" : "");
        };
        m_events.emit(protocol::LogEvent{"info", "resharded the checkpoint from " + ranks(*loaded->savedWorldSize, savedTp)
                                                     + " to " + ranks(m_acc.dataParallelSize(), tp) + " ranks"});
    } else {
        try {
            torch::load(m_optimizer, loaded->optimizerFile);
        } catch (const c10::Error& e) {
            throw std::runtime_error("cannot read the optimizer state " + loaded->optimizerFile + " ("
                                     + e.what_without_backtrace()
                                     + "); the file is damaged or truncated: resume from an earlier checkpoint");
        }
    }
    restoreFloat8State(*loaded);
    m_batches.restore(loaded->loop.dataEpoch, loaded->loop.dataPosition);
    m_acc.restoreStepCounters(loaded->loop.skippedSteps, loaded->loop.lossScale, loaded->loop.scalerGrowthTracker);
    const std::int64_t stepsDone = loaded->loop.step;
    checkResumeAgreement(m_acc, stepsDone, loaded->path);
    m_events.emit(protocol::LogEvent{"info", "resumed from " + loaded->path + " after step " + std::to_string(stepsDone)});
    return stepsDone;
}

void Checkpointer::save(std::int64_t stepsDone)
{
    checkpoint::SaveRequest request;
    request.checkpointsDir = m_plan.checkpointsDir.empty() ? m_layout.checkpointsDir().string() : m_plan.checkpointsDir;
    request.rank = m_acc.processIndex();
    request.compatibility = m_compatibility;
    request.loop = {stepsDone, m_batches.epoch(), m_batches.position(), m_acc.skippedSteps(), std::nullopt, 0};
    if (auto* scaler = m_acc.gradScaler()) {
        request.loop.lossScale = scaler->currentScale();
        request.loop.scalerGrowthTracker = scaler->growthTracker();
    }
    // SHARDED_STATE_DICT: each rank its shards; FULL_STATE_DICT: rank 0 everything, gathered.
    auto* sharded = m_plan.stateDictType == config::StateDictType::Sharded ? m_acc.sharded() : nullptr;
    if (sharded) {
        request.modelTensors = sharded->namedShards();
    } else {
        request.modelTensors = m_acc.fullNamedParameters(); // a collective when sharded; empty off rank 0
        auto optimizerState = fullOptimizerState(m_acc, m_optimizer); // a collective when sharded
        if (m_acc.isMainProcess())
            request.fullOptimizerTensors = std::move(optimizerState);
    }
    for (const auto& [path, layer] : m_float8Layers)
        if (const auto* state = layer->delayedState())
            state->appendState(path + ".", request.fp8State);
    request.serializeOptimizer = [this] {
        std::ostringstream bytes;
        torch::save(m_optimizer, bytes);
        return bytes.str();
    };
    request.barrier = [this] { m_acc.waitForEveryone(); };
    request.allRanksOk = [this](bool ok) { return m_acc.meanOverRanks(ok ? 1.0 : 0.0) == 1.0; };
    request.keep = m_plan.recipe.checkpointKeep;
    request.crashWhileWriting = stepsDone == m_plan.faults.crashInCheckpointAtStep;
    auto [path, bytes] = checkpoint::saveCheckpoint(request);
    m_events.emit(protocol::CheckpointEvent{stepsDone, path, "state", bytes});
}

} // namespace shardscope::train
