#pragma once

// The tuner: the fastest setup of a recipe that fits a memory budget per rank. Candidates are the
// data-parallel layouts (DDP, FSDP FULL_SHARD / SHARD_GRAD_OP, ZeRO 1-3), activation checkpointing
// and offload where the layout has them, and micro-batch sizes with gradient accumulation keeping
// the recipe's batch per rank and step. The memory estimate rules out what cannot fit (times the
// largest measured / estimated ratio of its layout's trials so far: pruning); the rest run as
// short trials, one at a time, through a TrialRunner, and the slower half is dropped after each
// round (successive halving) until one is left or the time budget is spent.
//
// How a trial runs is the runner's business (tune_trials.h: a `shardscope launch` of the trial's
// files, a run of the history); the search here sees only what a trial measured, and its time
// only through the clock it is given, so it is tested with a fake runner and a fake clock.

#include "engine/accelerate/accelerate_config.h"
#include "engine/accelerate/data_parallel_config.h"
#include "engine/common/result.h"
#include "engine/estimate/memory_estimate.h"
#include "engine/recipe/recipe.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace shardscope::runs {

// What `shardscope tune` was asked.
struct TuneRequest {
    std::string recipeFile;
    int numProcesses = 2;
    double memoryBudget = 0; // bytes per rank
    double timeBudget = 600; // seconds for all trials
    int trialSteps = 6; // the first round's steps per trial (2 of them warm-up)
    std::string runsDir; // where the trials' runs go
    std::string outDir; // where the chosen files go (empty: the recipe's folder)
    std::string mixedPrecision = "no";
    std::vector<config::DataParallelLayout> layouts; // empty: all
    bool gpu = false; // GPU ranks: the budget holds the device's whole use, and offload frees it
    std::string sessionId; // the trials' tag and name prefix
};

// What a trial measured (the latest round's).
struct TrialMeasure {
    double tokensPerS = 0; // all ranks, over the steps after the first two
    double peak = 0; // bytes per rank, as the candidate's estimate counts them
    // The step events' largest kept model states of a rank: what the estimate's fields are held to.
    double params = 0, grads = 0, optimizer = 0;
};

// One setup to try.
struct Candidate {
    config::DataParallelChoice choice;
    std::int64_t microBatch = 1;
    std::int64_t accumulation = 1;
    config::AccelerateConfig config; // the Accelerate config a trial of it launches
    double estimate = 0; // bytes per rank the budget is held to
    config::MemoryEstimate fields; // the estimate's parts
    std::string dropped; // why it was not run (or stopped), empty while in the race
    int rounds = 0; // trials measured
    int steps = 0; // of its latest trial
    TrialMeasure measured;
    std::string run; // its latest trial's run name
    std::string outcome; // the run's status ("completed", "failed: ...")

    std::string layoutName() const { return std::string(config::layoutName(choice.layout)); }
    std::string label() const;
};

// A trial to run: the candidate with the recipe as the trial trains it (micro-batch, accumulation,
// steps; nothing exported), its run's name and the session's tag.
struct Trial {
    const Candidate& candidate;
    config::Recipe recipe;
    std::string runName;
    std::string tag;
    int steps = 0;
    double secondsLeft = 0; // the time budget left: a trial still running then is stopped
};

struct TrialResult {
    bool timedOut = false; // stopped by the time budget before its end
    std::string outcome; // the run's status: "completed", "failed: ...", "no outcome"
    std::string launcherWords; // what the launcher said last of a trial that did not complete
    TrialMeasure measured;
};

class TrialRunner {
public:
    virtual ~TrialRunner() = default;
    virtual TrialResult run(const Trial& trial) = 0;
};

// Every candidate of the recipe, with its estimate (model states on the CPU, where the engine
// measures those and host and device memory are one; the device's whole use on a GPU).
Result<std::vector<Candidate>> candidatesOf(const config::Recipe& recipe, const TuneRequest& request);

class TuneSession {
public:
    // `elapsedSeconds`: the seconds since the session started (the time budget's clock).
    TuneSession(TuneRequest request, TrialRunner& runner, std::function<double()> elapsedSeconds);

    const TuneRequest& request() const { return m_request; }
    int trials() const { return m_trials; }
    bool outOfTime() const { return m_outOfTime; }
    double elapsed() const { return m_elapsed(); }
    // The largest measured / estimated ratio of a layout's trials so far (at least 1): what the
    // estimate misses (FSDP's gathered units, a ZeRO stage's buffers) differs between layouts.
    double marginOf(config::DataParallelLayout layout) const;

    // Drops what the estimate times the margin its layout's trials taught says cannot fit.
    void prune(std::vector<Candidate>& all) const;
    // The race: every candidate left runs a round; the faster half goes on with twice the steps.
    void race(std::vector<Candidate>& all, const config::Recipe& recipe);

private:
    bool runTrial(Candidate& c, const config::Recipe& recipe, int steps);

    TuneRequest m_request;
    TrialRunner& m_runner;
    std::function<double()> m_elapsed;
    std::map<config::DataParallelLayout, double> m_margins;
    int m_trials = 0;
    bool m_outOfTime = false;
    double m_secondsPerStep = 0; // the last completed trial's, launch included
};

// The winner: the candidate still in the race that ran the most rounds, the fastest among those.
const Candidate* bestOf(const std::vector<Candidate>& all);

// The refusal when every candidate's estimate is over the budget, naming the smallest.
std::string budgetBelowEveryEstimate(const std::vector<Candidate>& all, double budget);

// Writes the winner as new files beside the recipe (or in the request's outDir): its Accelerate
// config and the recipe with its micro-batch and accumulation. Nothing of the user's is
// overwritten. The paths written: (config, recipe).
Result<std::pair<std::string, std::string>> writeTunedFiles(const TuneRequest& request, const Candidate& best);

} // namespace shardscope::runs
