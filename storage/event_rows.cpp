#include "storage/event_rows.h"

#include "storage/metric_keys.h"
#include "storage/run_writer.h"

#include <vector>

namespace shardscope::storage {

std::vector<MetricValue> stepMetrics(const protocol::StepEvent& event)
{
    namespace k = keys;
    const protocol::StepEvent* step = &event;
    std::vector<storage::MetricValue> values = {
        {k::kLoss, step->loss},
        {k::kLocalLoss, step->localLoss},
        {k::kSkipped, step->skipped ? 1.0 : 0.0},
        {"skipped_steps", static_cast<double>(step->skippedSteps)},
        {k::kStepTime, step->stepTime},
        {k::kDataTime, step->dataTime},
        {k::kWaitTime, step->waitTime},
        {k::kOptimizerTime, step->optimizerTime},
        {k::kComputeTime, step->computeTime},
        {k::kMemParams, static_cast<double>(step->mem.params)},
        {k::kMemGrads, static_cast<double>(step->mem.grads)},
        {k::kMemPeakParams, static_cast<double>(step->mem.peakParams)},
        {k::kMemPeakGrads, static_cast<double>(step->mem.peakGrads)},
        {k::kMemOptimizer, static_cast<double>(step->mem.optimizer)},
        {"mem.activations_peak", static_cast<double>(step->mem.activationsPeak)},
        {"mem.allocated", static_cast<double>(step->mem.allocated)},
        {"mem.reserved", static_cast<double>(step->mem.reserved)},
        {k::kMemPeakAllocated, static_cast<double>(step->mem.peakAllocated)},
        {k::kMemRss, static_cast<double>(step->mem.rss)},
        {"comm.all_reduce", static_cast<double>(step->comm.allReduce)},
        {"comm.all_gather", static_cast<double>(step->comm.allGather)},
        {"comm.reduce_scatter", static_cast<double>(step->comm.reduceScatter)},
        {"comm.broadcast", static_cast<double>(step->comm.broadcast)},
    };
    if (step->comm.tensorAllReduce > 0) // tensor parallelism's group; no row without it
        values.push_back({"comm.tp_all_reduce", static_cast<double>(step->comm.tensorAllReduce)});
    // What a script's reporter could not know has no row (no row is not a 0).
    if (step->hasLr)
        values.push_back({k::kLr, step->lr});
    if (step->hasGradNorm)
        values.push_back({k::kGradNorm, step->gradNorm});
    if (step->hasTokens) {
        values.push_back({k::kTokens, static_cast<double>(step->tokens)});
        values.push_back({k::kSamples, static_cast<double>(step->samples)});
        values.push_back({k::kTokensPerS, step->tokensPerS});
    }
    if (const auto& phases = step->phaseMemory; phases.afterOptimizer > 0) { // measured (engine ranks)
        values.push_back({k::kMemAfterForward, static_cast<double>(phases.afterForward)});
        values.push_back({k::kMemAfterBackward, static_cast<double>(phases.afterBackward)});
        values.push_back({k::kMemAfterOptimizer, static_cast<double>(phases.afterOptimizer)});
    }
    if (step->lossScale)
        values.push_back({k::kLossScale, *step->lossScale});
    if (step->flops > 0)
        values.push_back({k::kFlops, step->flops});
    if (step->mfu)
        values.push_back({k::kMfu, *step->mfu});
    return values;
}

std::vector<EvalRecord> evalRecords(int rank, double time, const protocol::EvalEvent& eval)
{
    std::vector<EvalRecord> records{{rank, eval.step, time, "loss", eval.loss}};
    for (const auto& [name, value] : eval.metrics)
        records.push_back({rank, eval.step, time, name, value});
    return records;
}

RankInfo rankInfo(int rank, const protocol::HelloEvent& hello)
{
    RankInfo info{rank, hello.pid, hello.host, hello.device, hello.torch, hello.localRank, hello.machineRank};
    if (hello.peakFlops > 0)
        info.peakFlops = hello.peakFlops;
    info.peakDtype = hello.peakDtype;
    info.peakSource = hello.peakSource;
    info.precisionEmulated = hello.precisionEmulated;
    return info;
}

void writeEventRows(RunWriter& writer, const protocol::Event& event)
{
    const int rank = event.rank;
    if (const auto* step = std::get_if<protocol::StepEvent>(&event.body)) {
        writer.addMetrics(rank, step->step, event.time, stepMetrics(*step));
    } else if (const auto* hello = std::get_if<protocol::HelloEvent>(&event.body)) {
        writer.addRank(rankInfo(rank, *hello));
    } else if (const auto* eval = std::get_if<protocol::EvalEvent>(&event.body)) {
        for (auto& record : evalRecords(rank, event.time, *eval))
            writer.addEval(record);
        for (const auto& sample : eval->samples)
            writer.addEvalSample({eval->step, event.time, sample.prompt, sample.text});
    } else if (const auto* trace = std::get_if<protocol::TraceEvent>(&event.body)) {
        writer.addTrace({rank, event.time, trace->path, trace->source, trace->summary.compute, trace->summary.comm,
                         trace->summary.memory, trace->summary.idle, trace->summary.overlap});
    } else if (const auto* checkpoint = std::get_if<protocol::CheckpointEvent>(&event.body)) {
        writer.addCheckpoint({rank, checkpoint->step, event.time, checkpoint->path, checkpoint->kind, checkpoint->bytes});
    } else if (const auto* straggler = std::get_if<protocol::StragglerEvent>(&event.body)) {
        // The flag, where the Run page marks it: the rank's compute time over the others' at that step.
        const double ratio = straggler->othersTime > 0 ? straggler->computeTime / straggler->othersTime : 0;
        writer.addMetrics(rank, straggler->step, event.time, {{keys::kStraggler, ratio}});
    } else if (const auto* spike = std::get_if<protocol::LossSpikeEvent>(&event.body)) {
        writer.addMetrics(rank, spike->step, event.time,
                          {{keys::kLossSpike, spike->loss},
                           {keys::kLossSpikeEpoch, static_cast<double>(spike->epoch)},
                           {keys::kLossSpikeBatch, static_cast<double>(spike->batch)}});
    }
}

} // namespace shardscope::storage
