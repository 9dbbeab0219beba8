#include "app/launcher/run_recorder.h"

#include "storage/metric_keys.h"
#include "storage/run_store.h"
#include "storage/run_writer.h"
#include "storage/store_paths.h"

#include <deque>
#include <fstream>

namespace shardscope {

Result<std::unique_ptr<RunRecorder>> RunRecorder::start(const std::filesystem::path& home, const storage::NewRun& run)
{
    std::error_code ec;
    std::filesystem::create_directories(home, ec);
    const auto file = storage::historyFile(home);
    auto store = storage::RunStore::open(file);
    if (!store)
        return store.error();
    auto id = store->createRun(run);
    if (!id)
        return id.error();
    if (auto running = store->markRunning(*id); !running)
        return running.error();
    auto writer = storage::RunWriter::open(file, *id);
    if (!writer)
        return writer.error();
    std::unique_ptr<RunRecorder> recorder(new RunRecorder());
    recorder->m_runId = *id;
    recorder->m_writer = std::move(*writer);
    return recorder;
}

RunRecorder::~RunRecorder() = default;

void RunRecorder::record(const protocol::Event& event)
{
    namespace k = storage::keys;
    const int rank = event.rank;
    if (const auto* step = std::get_if<protocol::StepEvent>(&event.body)) {
        std::vector<storage::MetricValue> values = {
            {k::kLoss, step->loss},
            {k::kLocalLoss, step->localLoss},
            {k::kLr, step->lr},
            {k::kGradNorm, step->gradNorm},
            {k::kSkipped, step->skipped ? 1.0 : 0.0},
            {"skipped_steps", static_cast<double>(step->skippedSteps)},
            {k::kTokens, static_cast<double>(step->tokens)},
            {k::kSamples, static_cast<double>(step->samples)},
            {k::kStepTime, step->stepTime},
            {k::kTokensPerS, step->tokensPerS},
            {"mem.params", static_cast<double>(step->mem.params)},
            {"mem.grads", static_cast<double>(step->mem.grads)},
            {"mem.optimizer", static_cast<double>(step->mem.optimizer)},
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
        if (step->lossScale)
            values.push_back({k::kLossScale, *step->lossScale});
        m_writer->addMetrics(rank, step->step, event.time, values);
    } else if (const auto* hello = std::get_if<protocol::HelloEvent>(&event.body)) {
        m_writer->addRank({rank, hello->pid, hello->host, hello->device, hello->torch, hello->localRank, hello->machineRank});
    } else if (const auto* eval = std::get_if<protocol::EvalEvent>(&event.body)) {
        m_writer->addEval({rank, eval->step, event.time, "loss", eval->loss});
        for (const auto& [name, value] : eval->metrics)
            m_writer->addEval({rank, eval->step, event.time, name, value});
    } else if (const auto* trace = std::get_if<protocol::TraceEvent>(&event.body)) {
        m_writer->addTrace({rank, event.time, trace->path, trace->source, trace->summary.compute, trace->summary.comm,
                            trace->summary.memory, trace->summary.idle, trace->summary.overlap});
    } else if (const auto* checkpoint = std::get_if<protocol::CheckpointEvent>(&event.body)) {
        m_writer->addCheckpoint({rank, checkpoint->step, event.time, checkpoint->path, checkpoint->kind, checkpoint->bytes});
    } else if (const auto* error = std::get_if<protocol::ErrorEvent>(&event.body)) {
        m_errors.emplace_back(rank, error->kind + ": " + error->message);
    }
}

Result<void> RunRecorder::finish(const LaunchOutcome& outcome, const std::string& rootCauseLog)
{
    storage::RunEnd end;
    end.status = outcome.cancelled ? storage::RunStatus::Cancelled
        : outcome.exitCode == 0    ? storage::RunStatus::Completed
                                   : storage::RunStatus::Failed;
    end.exitCode = outcome.exitCode;
    end.rootCauseRank = outcome.rootCauseRank;
    for (const auto& r : outcome.ranks)
        end.rankExitCodes.emplace_back(r.rank, r.status());
    if (outcome.rootCauseRank) {
        for (const auto& [rank, message] : m_errors)
            if (rank == *outcome.rootCauseRank)
                end.error += message + "\n";
        for (const auto& r : outcome.ranks)
            if (r.rank == *outcome.rootCauseRank)
                end.error += r.describe() + "\n";
        if (!rootCauseLog.empty())
            end.error += "last log lines:\n" + rootCauseLog;
    }
    return m_writer->finish(end);
}

std::string tailOfFile(const std::string& path, int lines)
{
    std::ifstream in(path);
    std::deque<std::string> last;
    std::string line;
    while (std::getline(in, line)) {
        last.push_back(line);
        if (static_cast<int>(last.size()) > lines)
            last.pop_front();
    }
    std::string out;
    for (const auto& l : last)
        out += l + "\n";
    return out;
}

} // namespace shardscope
