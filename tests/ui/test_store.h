#pragma once

// Seeds a run history for the GUI tests through the real storage API (RunStore + RunWriter), as
// the launcher would write it.

#include "storage/metric_keys.h"
#include "storage/run_store.h"
#include "storage/run_writer.h"

#include <QtTest>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

namespace shardscope::testing {

struct SeedRun {
    std::string name{};
    std::string distributedType = "MULTI_CPU";
    std::string mixedPrecision = "no";
    std::string configText =
        "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nmixed_precision: no\nnum_processes: 2\n";
    std::string recipeText = "name: demo\ntraining:\n  max_steps: 100\n";
    std::vector<std::string> tags{};
    int worldSize = 2;
    int steps = 20;
    storage::RunStatus status = storage::RunStatus::Completed; // Running leaves it open
    std::optional<int> failingRank{};
    std::string error{}; // the failing rank's message (default: "rank N raised: loss is NaN")
    std::string runDir{};
    bool mfu = false; // steps report mfu (0.30 + 0.01 x rank) and flops
    bool precisionEmulated = false; // the ranks' hellos say the precision is emulated (against float32's peak)
    bool phaseMemory = false; // steps report memory after forward / backward / optimizer (100 / 150 / 120 MB + step)
    int stragglerRank = -1; // >= 0: compute_time 0.1 s (this rank 0.2 s) and the launcher's flag at step 5
    int lossSpikeAtStep = -1; // >= 1: the launcher's loss-spike report at that step (epoch 0, batch step - 1)
};

inline std::int64_t seedRun(const std::filesystem::path& db, const SeedRun& seed)
{
    auto store = storage::RunStore::open(db);
    if (!store)
        qFatal("open: %s", store.error().message.c_str());
    storage::NewRun run;
    run.name = seed.name;
    run.configText = seed.configText;
    run.recipeText = seed.recipeText;
    run.runDir = seed.runDir.empty() ? (db.parent_path() / "runs" / seed.name).string() : seed.runDir;
    run.distributedType = seed.distributedType;
    run.mixedPrecision = seed.mixedPrecision;
    run.worldSize = seed.worldSize;
    run.tags = seed.tags;
    auto id = store->createRun(run);
    if (!id)
        qFatal("createRun: %s", id.error().message.c_str());
    if (!store->markRunning(*id))
        qFatal("markRunning");
    for (int r = 0; r < seed.worldSize; ++r) {
        storage::RankInfo rank{r, 1000 + r, "host", "cpu", "2.5", r, 0};
        if (seed.mfu) {
            rank.peakFlops = 50e9;
            rank.peakDtype = seed.precisionEmulated ? "float32" : "bfloat16";
            rank.peakSource = "test peak of " + rank.peakDtype;
            rank.precisionEmulated = seed.precisionEmulated;
        }
        (void)store->recordRank(*id, rank);
    }
    auto writer = storage::RunWriter::open(db, *id);
    if (!writer)
        qFatal("writer: %s", writer.error().message.c_str());
    namespace k = storage::keys;
    for (int step = 1; step <= seed.steps; ++step) {
        for (int rank = 0; rank < seed.worldSize; ++rank) {
            const double loss = 1.0 / step;
            if (seed.mfu)
                (*writer)->addMetrics(rank, step, 1.7e9 + step, {{k::kMfu, 0.30 + 0.01 * rank}, {k::kFlops, 3e10}});
            if (seed.phaseMemory)
                (*writer)->addMetrics(rank, step, 1.7e9 + step,
                                      {{k::kMemAfterForward, 100e6 + step},
                                       {k::kMemAfterBackward, 150e6 + step},
                                       {k::kMemAfterOptimizer, 120e6 + step},
                                       // the model states engine ranks report with them
                                       {k::kMemParams, 2e6 + rank},
                                       {k::kMemGrads, 2e6 + rank},
                                       {k::kMemOptimizer, 4e6 + rank},
                                       {k::kMemPeakParams, 3e6 + rank},
                                       {k::kMemPeakGrads, 3.5e6 + rank}});
            if (rank == 0 && step == seed.lossSpikeAtStep)
                (*writer)->addMetrics(rank, step, 1.7e9 + step,
                                      {{k::kLossSpike, loss}, {k::kLossSpikeEpoch, 0.0}, {k::kLossSpikeBatch, step - 1.0}});
            if (seed.stragglerRank >= 0) {
                (*writer)->addMetrics(rank, step, 1.7e9 + step, {{k::kComputeTime, rank == seed.stragglerRank ? 0.2 : 0.1}});
                if (rank == seed.stragglerRank && step == 5)
                    (*writer)->addMetrics(rank, step, 1.7e9 + step, {{k::kStraggler, 2.0}});
            }
            (*writer)->addMetrics(rank, step, 1.7e9 + step,
                                  {{k::kLoss, loss},
                                   {k::kLr, 0.01},
                                   {k::kGradNorm, 2.0 / step},
                                   {k::kLossScale, 65536.0 / (step % 7 == 0 ? 2 : 1)},
                                   {k::kSkipped, step % 7 == 0 ? 1.0 : 0.0},
                                   {k::kStepTime, 0.1 + 0.01 * rank},
                                   {k::kTokensPerS, 1000.0 + step},
                                   {k::kTokens, 128.0},
                                   {k::kMemPeakAllocated, 0.0},
                                   {k::kMemRss, 1e8 + rank * 1e7 + step}});
        }
    }
    if (seed.status == storage::RunStatus::Running) {
        if (!(*writer)->flush())
            qFatal("flush");
        return *id;
    }
    storage::RunEnd end;
    end.status = seed.status;
    end.exitCode = seed.status == storage::RunStatus::Completed ? 0 : 1;
    end.rootCauseRank = seed.failingRank;
    if (seed.failingRank)
        end.error = seed.error.empty() ? "rank " + std::to_string(*seed.failingRank) + " raised: loss is NaN" : seed.error;
    if (auto done = (*writer)->finish(end); !done)
        qFatal("finish: %s", done.error().message.c_str());
    return *id;
}

} // namespace shardscope::testing
