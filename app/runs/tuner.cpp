#include "app/runs/tuner.h"

#include "engine/accelerate/yaml_io.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace shardscope::runs {

namespace {

namespace fs = std::filesystem;
using config::DataParallelLayout;

// The estimate's units ("7.54 MB", as `accelerate estimate-memory` prints them), beside which the
// measured bytes are read.
std::string bytes(double b) { return config::formatBytes(b); }

// A new file beside `wanted` when it exists (name-2.yaml, name-3.yaml, ...): nothing of the
// user's is overwritten.
fs::path freshPath(const fs::path& wanted)
{
    fs::path path = wanted;
    for (int n = 2; fs::exists(path); ++n)
        path = wanted.parent_path() / (wanted.stem().string() + "-" + std::to_string(n) + wanted.extension().string());
    return path;
}

// The micro-batches tried: the recipe's batch per rank and step, halved while it divides (three at most).
std::vector<std::int64_t> microBatchesOf(std::int64_t perRank)
{
    std::vector<std::int64_t> microBatches;
    for (std::int64_t b = perRank; b >= 1 && microBatches.size() < 3; b /= 2)
        if (perRank % b == 0)
            microBatches.push_back(b);
    return microBatches;
}

} // namespace

std::string Candidate::label() const
{
    std::string text = layoutName() + ", micro-batch " + std::to_string(microBatch) + " x " + std::to_string(accumulation);
    if (choice.activationCheckpointing)
        text += ", activation checkpointing";
    if (choice.offload)
        text += ", offload";
    return text;
}

Result<std::vector<Candidate>> candidatesOf(const config::Recipe& recipe, const TuneRequest& request)
{
    const std::int64_t perRank = recipe.perDeviceBatchSize * recipe.gradientAccumulationSteps;
    const std::vector<std::int64_t> microBatches = microBatchesOf(perRank);
    std::vector<Candidate> out;
    for (DataParallelLayout layout : config::allDataParallelLayouts()) {
        if (!request.layouts.empty()
            && std::find(request.layouts.begin(), request.layouts.end(), layout) == request.layouts.end())
            continue;
        for (bool checkpointing : {false, true})
            for (bool offload : {false, true}) {
                // On the CPU the host is the device: offloading moves nothing out of the budget.
                if ((checkpointing && !config::layoutHasActivationCheckpointing(layout))
                    || (offload && (!config::layoutHasOffload(layout) || !request.gpu)))
                    continue;
                for (std::int64_t b : microBatches) {
                    Candidate c;
                    c.choice = {layout, request.numProcesses, request.gpu, request.mixedPrecision, checkpointing, offload};
                    c.microBatch = b;
                    c.accumulation = perRank / b;
                    c.config = config::configForChoice(c.choice);
                    auto setup = config::memorySetupFromConfig(c.config);
                    if (!setup)
                        return setup.error();
                    config::Recipe variant = recipe;
                    variant.perDeviceBatchSize = b;
                    const config::MemoryEstimate e = config::estimateMemory(config::modelShapeOf(variant), setup->precision,
                                                                            setup->sharding, config::optimizerKindOf(recipe));
                    c.estimate = request.gpu ? e.deviceTotal() : e.modelStates() + e.hostTotal();
                    c.fields = e;
                    out.push_back(std::move(c));
                }
            }
    }
    return out;
}

TuneSession::TuneSession(TuneRequest request, TrialRunner& runner, std::function<double()> elapsedSeconds)
    : m_request(std::move(request)), m_runner(runner), m_elapsed(std::move(elapsedSeconds))
{
}

double TuneSession::marginOf(DataParallelLayout layout) const
{
    const auto it = m_margins.find(layout);
    return it == m_margins.end() ? 1.0 : std::max(1.0, it->second);
}

void TuneSession::prune(std::vector<Candidate>& all) const
{
    for (Candidate& c : all) {
        const double margin = marginOf(c.choice.layout);
        if (!c.dropped.empty() || c.rounds > 0 || c.estimate * margin <= m_request.memoryBudget)
            continue;
        char ratio[32];
        std::snprintf(ratio, sizeof ratio, "%.2f", margin);
        c.dropped = "estimate " + bytes(c.estimate)
                    + (margin > 1.0 ? std::string(" x ") + ratio + " (what its layout's trials measured over their estimate)"
                                    : "")
                    + " exceeds the budget " + bytes(m_request.memoryBudget);
    }
}

// Runs one trial to its end; false when the time budget ran out first.
bool TuneSession::runTrial(Candidate& c, const config::Recipe& recipe, int steps)
{
    const double left = m_request.timeBudget - elapsed();
    // A trial the time left cannot hold is not started (as long as the last one took per step).
    if (left <= 1 || (c.rounds > 0 && m_secondsPerStep * steps > left)) {
        m_outOfTime = true;
        return false;
    }
    config::Recipe variant = recipe;
    variant.perDeviceBatchSize = c.microBatch;
    variant.gradientAccumulationSteps = c.accumulation;
    variant.maxSteps = steps;
    // A trial measures speed and memory: a warm-up longer than it is shortened, nothing is exported.
    variant.schedule.warmupSteps = std::min<std::int64_t>(variant.schedule.warmupSteps, steps - 1);
    variant.exportModel.enabled = false;
    const std::string runName = m_request.sessionId + "-" + std::to_string(++m_trials);
    const double trialStart = elapsed();
    const TrialResult result = m_runner.run(Trial{c, variant, runName, m_request.sessionId, steps, left});
    if (result.timedOut) {
        m_outOfTime = true;
        // What an earlier round measured stands; a first trial cut short measured nothing.
        if (c.rounds == 0) {
            c.run = runName;
            c.dropped = "stopped: the time budget ran out during its trial";
        }
        return false;
    }
    c.run = runName;
    if (result.outcome != "completed" && c.rounds > 0) {
        // A longer trial of a setup an earlier round measured failed: it is out of the race, and
        // says why beside the numbers it had.
        c.outcome = result.outcome;
        c.dropped = "its round " + std::to_string(c.rounds + 1) + " trial did not complete (" + result.outcome + ")";
        return true;
    }
    c.outcome = result.outcome;
    c.measured = result.measured;
    ++c.rounds;
    c.steps = steps;
    m_secondsPerStep = (elapsed() - trialStart) / steps;
    if (c.outcome != "completed") {
        // A trial that fails (out of memory, say) is a result: the launcher's last word says why.
        c.dropped = "its trial did not complete (" + c.outcome + (result.launcherWords.empty() ? "" : "; " + result.launcherWords)
                    + ")";
        return true;
    }
    if (c.estimate > 0)
        m_margins[c.choice.layout] = std::max(m_margins[c.choice.layout], c.measured.peak / c.estimate);
    if (c.measured.peak > m_request.memoryBudget)
        c.dropped = "measured " + bytes(c.measured.peak) + " per rank, over the budget " + bytes(m_request.memoryBudget);
    return true;
}

void TuneSession::race(std::vector<Candidate>& all, const config::Recipe& recipe)
{
    int steps = m_request.trialSteps;
    for (int round = 0; !m_outOfTime; ++round, steps *= 2) {
        const auto alive = std::count_if(all.begin(), all.end(), [](const Candidate& c) { return c.dropped.empty(); });
        if (round > 0 && alive <= 1)
            return; // one left: it won
        // Cheapest estimates first: what they measure teaches the margin before the larger ones run.
        std::vector<Candidate*> order;
        for (Candidate& c : all)
            if (c.dropped.empty())
                order.push_back(&c);
        std::stable_sort(order.begin(), order.end(),
                         [](const Candidate* a, const Candidate* b) { return a->estimate < b->estimate; });
        std::vector<Candidate*> running;
        for (Candidate* c : order) {
            if (!c->dropped.empty())
                continue; // pruned by what an earlier trial of this round taught
            if (!runTrial(*c, recipe, steps))
                break;
            prune(all);
            if (c->dropped.empty())
                running.push_back(c);
        }
        if (m_outOfTime || running.size() <= 1)
            return;
        std::sort(running.begin(), running.end(),
                  [](const Candidate* a, const Candidate* b) { return a->measured.tokensPerS > b->measured.tokensPerS; });
        for (std::size_t i = (running.size() + 1) / 2; i < running.size(); ++i)
            running[i]->dropped = "slower than half of round " + std::to_string(round + 1) + "'s trials";
    }
}

const Candidate* bestOf(const std::vector<Candidate>& all)
{
    const Candidate* best = nullptr;
    for (const Candidate& c : all)
        if (c.rounds > 0 && c.dropped.empty()
            && (!best || c.rounds > best->rounds
                || (c.rounds == best->rounds && c.measured.tokensPerS > best->measured.tokensPerS)))
            best = &c;
    return best;
}

std::string budgetBelowEveryEstimate(const std::vector<Candidate>& all, double budget)
{
    if (all.empty())
        return "there is no candidate setup to try";
    const auto smallest = std::min_element(all.begin(), all.end(),
                                           [](const Candidate& a, const Candidate& b) { return a.estimate < b.estimate; });
    return "the budget " + bytes(budget) + " per rank is below every candidate's estimate; the smallest is "
           + bytes(smallest->estimate) + " (" + smallest->label() + "). A budget of at least " + bytes(smallest->estimate)
           + " would fit it; more processes shard the states further";
}

Result<std::pair<std::string, std::string>> writeTunedFiles(const TuneRequest& request, const Candidate& best)
{
    const fs::path recipe = fs::absolute(request.recipeFile);
    const fs::path folder = request.outDir.empty() ? recipe.parent_path() : fs::absolute(request.outDir);
    Result<std::string> edited = makeError("unread");
    std::error_code ec;
    fs::create_directories(folder, ec);
    if (fs::equivalent(folder, recipe.parent_path(), ec)) {
        // Beside the user's: their text, comments and relative paths kept, two values changed.
        auto text = config::readTextFile(recipe.string());
        if (!text)
            return text.error();
        edited = config::withRecipeValue(*text, "training.per_device_batch_size", std::to_string(best.microBatch));
        if (edited)
            edited = config::withRecipeValue(*edited, "training.gradient_accumulation_steps", std::to_string(best.accumulation));
    } else {
        // Elsewhere, relative paths would point nowhere: the recipe as read, its paths absolute.
        auto read = config::loadRecipe(recipe.string());
        if (!read)
            return read.error();
        read->perDeviceBatchSize = best.microBatch;
        read->gradientAccumulationSteps = best.accumulation;
        edited = "# " + recipe.filename().string()
                 + " with the micro-batch and accumulation shardscope tune chose, its "
                   "paths made absolute\n"
                 + config::recipeToYaml(*read);
    }
    if (!edited)
        return edited.error();
    const fs::path configPath = freshPath(folder / (recipe.stem().string() + ".tuned-accelerate.yaml"));
    const fs::path recipePath = freshPath(folder / (recipe.stem().string() + ".tuned.yaml"));
    std::ofstream(configPath) << "# shardscope tune " << request.sessionId << ": " << best.label() << "\n"
                              << config::toYamlText(best.config);
    std::ofstream(recipePath) << *edited;
    if (!fs::exists(configPath) || !fs::exists(recipePath))
        return makeError("cannot write the chosen setup into " + folder.string());
    return std::pair{configPath.string(), recipePath.string()};
}

} // namespace shardscope::runs
