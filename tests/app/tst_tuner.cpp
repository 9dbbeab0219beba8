// The tuner's search on its own (app/runs/tuner.h), with a fake trial runner and a fake clock: no
// process starts. The candidates of the Llama demo, their configs key for key, pruning by the
// estimate and by what a layout's trials taught, successive halving, failed and over-budget
// trials, the time budget; a memory budget's text; a trial's run folder read back.

#include "app/runs/tune_trials.h"
#include "app/runs/tuner.h"
#include "engine/accelerate/data_parallel_config.h"
#include "engine/common/byte_size.h"
#include "engine/common/run_layout.h"
#include "engine/recipe/recipe.h"

#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

using namespace shardscope;
using namespace shardscope::runs;
using config::DataParallelLayout;

namespace {

config::Recipe llamaDemo()
{
    auto recipe = config::loadRecipe(SHARDSCOPE_SOURCE_DIR "/resources/recipes/demo-llama.yaml");
    if (!recipe)
        qFatal("%s", recipe.error().message.c_str());
    return *recipe;
}

// A runner that measures what `measure` says of a candidate, and whose every trial takes
// `secondsPerStep` times its steps of the fake clock.
class FakeRunner : public TrialRunner {
public:
    double clock = 0;
    double secondsPerStep = 1;
    std::function<TrialResult(const Trial&)> measure;
    std::vector<std::string> ran; // the trials' run names, in order
    std::vector<int> steps;
    std::vector<std::string> labels;

    TrialResult run(const Trial& trial) override
    {
        ran.push_back(trial.runName);
        steps.push_back(trial.steps);
        labels.push_back(trial.candidate.label());
        const double seconds = secondsPerStep * trial.steps;
        if (seconds > trial.secondsLeft) {
            clock += trial.secondsLeft;
            TrialResult cut;
            cut.timedOut = true;
            return cut;
        }
        clock += seconds;
        return measure(trial);
    }
};

TrialResult completed(double peak, double tokensPerS)
{
    TrialResult r;
    r.outcome = "completed";
    r.measured.peak = peak;
    r.measured.tokensPerS = tokensPerS;
    return r;
}

TuneRequest cpuRequest(double budget)
{
    TuneRequest request;
    request.recipeFile = SHARDSCOPE_SOURCE_DIR "/resources/recipes/demo-llama.yaml";
    request.numProcesses = 2;
    request.memoryBudget = budget;
    request.timeBudget = 1e6;
    request.trialSteps = 3;
    request.sessionId = "tune-test";
    return request;
}

const Candidate* find(const std::vector<Candidate>& all, const std::string& label)
{
    for (const Candidate& c : all)
        if (c.label() == label)
            return &c;
    return nullptr;
}

int alive(const std::vector<Candidate>& all)
{
    return static_cast<int>(std::count_if(all.begin(), all.end(), [](const Candidate& c) { return c.dropped.empty(); }));
}

} // namespace

class TestTuner : public QObject {
    Q_OBJECT

private slots:
    void candidatesOfTheLlamaDemo()
    {
        const config::Recipe recipe = llamaDemo();
        QCOMPARE(recipe.perDeviceBatchSize * recipe.gradientAccumulationSteps, 8);
        // On CPU ranks: DDP, FSDP x2 with and without checkpointing, ZeRO 1-3 (no offload: the
        // host is the device), each with micro-batches 8, 4, 2 keeping 8 samples per rank and step.
        auto cpu = candidatesOf(recipe, cpuRequest(1e9));
        QVERIFY(cpu.ok());
        QCOMPARE(int(cpu->size()), 8 * 3);
        for (const Candidate& c : *cpu) {
            QVERIFY(!c.choice.offload);
            QCOMPARE(c.microBatch * c.accumulation, std::int64_t(8));
            QVERIFY(c.estimate > 0);
        }
        QVERIFY(find(*cpu, "FSDP SHARD_GRAD_OP, micro-batch 2 x 4, activation checkpointing"));
        // On GPUs offload joins FSDP and ZeRO-2/3, and the estimate is the device's whole use.
        TuneRequest gpuRequest = cpuRequest(1e9);
        gpuRequest.gpu = true;
        auto gpu = candidatesOf(recipe, gpuRequest);
        QVERIFY(gpu.ok());
        QCOMPARE(int(gpu->size()), 14 * 3);
        QVERIFY(find(*gpu, "ZeRO-3, micro-batch 8 x 1, offload"));
        QVERIFY(!find(*gpu, "ZeRO-1, micro-batch 8 x 1, offload"));
        // Only the layouts asked for.
        TuneRequest some = cpuRequest(1e9);
        some.layouts = {DataParallelLayout::Ddp, DataParallelLayout::Zero3};
        auto two = candidatesOf(recipe, some);
        QVERIFY(two.ok());
        QCOMPARE(int(two->size()), 2 * 3);
        // Sharding the states makes them smaller: the estimate says so per rank.
        const double ddp = find(*cpu, "DDP, micro-batch 8 x 1")->estimate;
        QVERIFY(find(*cpu, "FSDP FULL_SHARD, micro-batch 8 x 1")->estimate < ddp);
        QVERIFY(find(*cpu, "ZeRO-1, micro-batch 8 x 1")->estimate < ddp);
    }

    void layoutsAreNamedAsUsersWriteThem()
    {
        QVERIFY(config::layoutNamed("full_shard") == DataParallelLayout::FsdpFullShard);
        QVERIFY(config::layoutNamed("FSDP SHARD_GRAD_OP") == DataParallelLayout::FsdpShardGradOp);
        QVERIFY(config::layoutNamed("zero-3") == DataParallelLayout::Zero3);
        QVERIFY(config::layoutNamed("ddp") == DataParallelLayout::Ddp);
        QVERIFY(!config::layoutNamed("SHARD"));
        QVERIFY(!config::layoutNamed("ZeRO-4"));
    }

    // Each layout's config is the one the tuner wrote as YAML text before it built them typed.
    void configsAreAcceleratesKeyForKey()
    {
        const auto parse = [](const std::string& text) {
            auto parsed = config::parseAccelerateConfig(text, "expected", config::FileFormat::Yaml);
            if (!parsed)
                qFatal("%s", parsed.error().message.c_str());
            return *parsed;
        };
        const std::string head = "compute_environment: LOCAL_MACHINE\nnum_processes: 2\nmixed_precision: 'bf16'\nuse_cpu: true\n";
        config::DataParallelChoice c{DataParallelLayout::Ddp, 2, false, "bf16", false, false};
        QVERIFY(config::configForChoice(c) == parse(head + "distributed_type: MULTI_CPU\n"));
        c.gpu = true;
        QVERIFY(config::configForChoice(c)
                == parse("compute_environment: LOCAL_MACHINE\nnum_processes: 2\nmixed_precision: 'bf16'\n"
                         "distributed_type: MULTI_GPU\n"));
        c = {DataParallelLayout::FsdpShardGradOp, 2, false, "bf16", true, false};
        QVERIFY(config::configForChoice(c)
                == parse(head
                         + "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n  fsdp_auto_wrap_policy: "
                           "TRANSFORMER_BASED_WRAP\n  fsdp_reshard_after_forward: false\n  fsdp_activation_checkpointing: true\n"
                           "  fsdp_offload_params: false\n  fsdp_state_dict_type: FULL_STATE_DICT\n"));
        c = {DataParallelLayout::Zero2, 2, false, "bf16", false, true};
        QVERIFY(config::configForChoice(c)
                == parse(head
                         + "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 2\n  offload_optimizer_device: cpu\n"
                           "  offload_param_device: none\n"));
        // And what the launch reads back from the written file is the same config.
        const config::AccelerateConfig written = config::configForChoice(c);
        QVERIFY(parse(config::toYamlText(written)) == written);
    }

    void theEstimateRulesOutWhatCannotFit()
    {
        const config::Recipe recipe = llamaDemo();
        auto all = candidatesOf(recipe, cpuRequest(0));
        QVERIFY(all.ok());
        const double ddp = find(*all, "DDP, micro-batch 8 x 1")->estimate;
        const double fsdp = find(*all, "FSDP FULL_SHARD, micro-batch 8 x 1")->estimate;
        FakeRunner runner;
        TuneSession session(cpuRequest((ddp + fsdp) / 2), runner, [&] { return runner.clock; });
        session.prune(*all);
        for (const Candidate& c : *all) {
            if (c.choice.layout == DataParallelLayout::Ddp)
                QVERIFY2(c.dropped.find("exceeds the budget") != std::string::npos, c.dropped.c_str());
            if (c.choice.layout == DataParallelLayout::FsdpFullShard)
                QVERIFY2(c.dropped.empty(), c.dropped.c_str());
        }
        QVERIFY(runner.ran.empty()); // pruning runs nothing
        const std::string refusal = budgetBelowEveryEstimate(*all, 1);
        // In the estimate's units, as `accelerate estimate-memory` prints them: FSDP's model states of
        // the Llama demo at 2 ranks.
        QVERIFY2(refusal.find("the budget 1 bytes per rank is below every candidate's estimate; the smallest is 7.54 MB "
                              "(FSDP FULL_SHARD")
                     != std::string::npos,
                 refusal.c_str());
    }

    // Each round's slower half is dropped; the rest run again with twice the steps, until one is
    // left. The cheapest estimates run first.
    void successiveHalvingKeepsTheFastest()
    {
        const config::Recipe recipe = llamaDemo();
        TuneRequest request = cpuRequest(1e12);
        request.layouts = {DataParallelLayout::Ddp, DataParallelLayout::FsdpFullShard};
        auto all = candidatesOf(recipe, request);
        QVERIFY(all.ok());
        QCOMPARE(int(all->size()), 9); // DDP x 3 micro-batches, FSDP with and without checkpointing x 3
        std::map<std::string, double> speed;
        double s = 100;
        for (const Candidate& c : *all)
            speed[c.label()] = s += 10;
        speed["FSDP FULL_SHARD, micro-batch 4 x 2"] = 10000; // the fastest
        FakeRunner runner;
        runner.measure = [&](const Trial& t) { return completed(t.candidate.estimate, speed[t.candidate.label()]); };
        TuneSession session(request, runner, [&] { return runner.clock; });
        session.prune(*all);
        double lastEstimate = 0;
        session.race(*all, recipe);
        // Round 1: all 9 in estimate order, 3 steps; round 2: 5 at 6 steps; round 3: 3 at 12; round 4: 2 at 24.
        QCOMPARE(int(runner.ran.size()), 9 + 5 + 3 + 2);
        for (int i = 0; i < 9; ++i) {
            QCOMPARE(runner.steps[i], 3);
            const double estimate = find(*all, runner.labels[i])->estimate;
            QVERIFY(estimate >= lastEstimate);
            lastEstimate = estimate;
        }
        QCOMPARE(runner.steps[9], 6);
        QCOMPARE(runner.steps.back(), 24);
        QCOMPARE(runner.ran.front(), std::string("tune-test-1"));
        QCOMPARE(session.trials(), 19);
        QCOMPARE(alive(*all), 1);
        const Candidate* best = bestOf(*all);
        QVERIFY(best);
        QCOMPARE(best->label(), std::string("FSDP FULL_SHARD, micro-batch 4 x 2"));
        QCOMPARE(best->rounds, 4);
        QCOMPARE(best->steps, 24);
        QVERIFY(best->run == runner.ran[17] || best->run == runner.ran[18]); // a trial of the last round
        int slower = 0;
        for (const Candidate& c : *all)
            slower += c.dropped.rfind("slower than half of round ", 0) == 0 ? 1 : 0;
        QCOMPARE(slower, 8);
        QVERIFY(!session.outOfTime());
    }

    // What a layout's trials measured over their estimate raises the bar of its untried setups.
    void aLayoutsMarginIsLearned()
    {
        const config::Recipe recipe = llamaDemo();
        TuneRequest request = cpuRequest(0);
        request.layouts = {DataParallelLayout::Zero3};
        auto all = candidatesOf(recipe, request);
        QVERIFY(all.ok());
        double largest = 0, smallest = 1e18;
        for (const Candidate& c : *all) {
            largest = std::max(largest, c.estimate);
            smallest = std::min(smallest, c.estimate);
        }
        // The budget holds every estimate, but the first trial measures twice its estimate.
        request.memoryBudget = largest * 1.5;
        FakeRunner runner;
        runner.measure = [&](const Trial& t) { return completed(t.candidate.estimate * 2, 100); };
        TuneSession session(request, runner, [&] { return runner.clock; });
        session.prune(*all);
        QCOMPARE(alive(*all), 3);
        session.race(*all, recipe);
        QCOMPARE(session.marginOf(DataParallelLayout::Zero3), 2.0);
        QCOMPARE(session.marginOf(DataParallelLayout::Ddp), 1.0);
        int pruned = 0;
        for (const Candidate& c : *all)
            if (c.dropped.find("x 2.00 (what its layout's trials measured over their estimate)") != std::string::npos) {
                ++pruned;
                QCOMPARE(c.rounds, 0);
            }
        QCOMPARE(pruned, 2);
        QCOMPARE(int(runner.ran.size()), 1); // the pruned ones never ran
        QVERIFY2(find(*all, "ZeRO-3, micro-batch 8 x 1")->dropped.rfind("measured ", 0) == 0,
                 find(*all, "ZeRO-3, micro-batch 8 x 1")->dropped.c_str());
    }

    void failedAndOverBudgetTrialsAreDroppedWithTheReason()
    {
        const config::Recipe recipe = llamaDemo();
        TuneRequest request = cpuRequest(1e12);
        request.layouts = {DataParallelLayout::Ddp};
        auto all = candidatesOf(recipe, request);
        QVERIFY(all.ok());
        FakeRunner runner;
        runner.measure = [&](const Trial& t) {
            if (t.candidate.microBatch == 8) {
                TrialResult failed;
                failed.outcome = "failed: rank 1 ran out of memory";
                failed.launcherWords = "shardscope launch: error: out of memory";
                return failed;
            }
            if (t.candidate.microBatch == 2)
                return completed(2e12, 500); // over the budget, whatever its estimate
            return completed(1, 100);
        };
        TuneSession session(request, runner, [&] { return runner.clock; });
        session.race(*all, recipe);
        const Candidate* failed = find(*all, "DDP, micro-batch 8 x 1");
        QCOMPARE(failed->dropped,
                 std::string("its trial did not complete (failed: rank 1 ran out of memory; shardscope launch: error: out of "
                             "memory)"));
        QCOMPARE(failed->rounds, 1);
        QVERIFY2(find(*all, "DDP, micro-batch 2 x 4")->dropped.rfind("measured 1.82 TB per rank, over the budget", 0) == 0,
                 find(*all, "DDP, micro-batch 2 x 4")->dropped.c_str());
        const Candidate* best = bestOf(*all);
        QVERIFY(best);
        QCOMPARE(best->label(), std::string("DDP, micro-batch 4 x 2"));
        QCOMPARE(int(runner.ran.size()), 3); // one left after round 1: it won
    }

    void timeBudgetStopsTheRaceAndKeepsWhatWasMeasured()
    {
        const config::Recipe recipe = llamaDemo();
        TuneRequest request = cpuRequest(1e12);
        request.layouts = {DataParallelLayout::Ddp, DataParallelLayout::Zero1};
        request.timeBudget = 20; // a trial of 3 steps takes 6 s of the fake clock: three of them fit
        auto all = candidatesOf(recipe, request);
        QVERIFY(all.ok());
        FakeRunner runner;
        runner.secondsPerStep = 2;
        runner.measure = [&](const Trial& t) { return completed(1, 100 + t.candidate.microBatch); };
        TuneSession session(request, runner, [&] { return runner.clock; });
        session.race(*all, recipe);
        QVERIFY(session.outOfTime());
        QCOMPARE(int(runner.ran.size()), 4); // three measured, the fourth cut by the budget
        int measured = 0, cut = 0;
        for (const Candidate& c : *all) {
            measured += c.rounds > 0 ? 1 : 0;
            cut += c.dropped == "stopped: the time budget ran out during its trial" ? 1 : 0;
        }
        QCOMPARE(measured, 3);
        QCOMPARE(cut, 1);
        QVERIFY(bestOf(*all)); // the report keeps what the trials measured
        QVERIFY(runner.clock <= request.timeBudget);

        // A later round's trial the time left cannot hold (as long as the last took per step) is
        // not started at all.
        auto again = candidatesOf(recipe, request);
        FakeRunner slow;
        slow.secondsPerStep = 1;
        slow.measure = [&](const Trial& t) { return completed(1, 100 + t.candidate.microBatch); };
        TuneRequest roomy = request;
        roomy.timeBudget = 6 * 3 + 5; // round 1's six trials (3 s each), then 5 s: round 2's 6 s trials do not fit
        TuneSession second(roomy, slow, [&] { return slow.clock; });
        second.race(*again, recipe);
        QVERIFY(second.outOfTime());
        QCOMPARE(int(slow.ran.size()), 6);
        QVERIFY(bestOf(*again));
    }

    void memoryBudgetsAreReadAsSizes()
    {
        double bytes = 0;
        QVERIFY(byteSizeProblem("14MB", &bytes).empty());
        QCOMPARE(bytes, 14.0 * 1024 * 1024);
        QVERIFY(byteSizeProblem("1.5 GiB", &bytes).empty());
        QCOMPARE(bytes, 1.5 * 1024 * 1024 * 1024);
        QVERIFY(byteSizeProblem("300mb", &bytes).empty());
        QCOMPARE(bytes, 300.0 * 1024 * 1024);
        QVERIFY(byteSizeProblem("4096", &bytes).empty());
        QCOMPARE(bytes, 4096.0);
        for (const char* bad : {"", "abc", "MB", "-1MB", "0", "nanMB", "infGB", "1e400", "12 parsecs", "1.5.2MB"})
            QVERIFY2(byteSizeProblem(bad, &bytes)
                         == "'" + std::string(bad) + "' is not a size; write e.g. 300MB, 40GB or a number of bytes",
                     bad);
    }

    void aTrialsRunFolderIsRead()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const RunLayout run(dir.path().toStdString());
        std::ofstream(run.outcomeFile()) << R"({"status": "completed", "error": ""})";
        std::ofstream events(run.eventsFile());
        for (int step = 1; step <= 4; ++step)
            for (int rank = 0; rank < 2; ++rank)
                events << R"({"type": "step", "rank": )" << rank << R"(, "step": )" << step << R"(, "tokens_per_s": )"
                       << 100 * step << R"(, "mem": {"params": 10, "peak_params": 30, "grads": )" << 20 + rank
                       << R"(, "peak_grads": 25, "optimizer": 40, "peak_allocated": 999}})"
                       << "\n";
        events << "not json\n";
        events.close();
        const TrialResult cpu = readTrialRun(run.dir(), DataParallelLayout::Ddp, false);
        QCOMPARE(cpu.outcome, std::string("completed"));
        QCOMPARE(cpu.measured.peak, 30.0 + 25 + 40);
        QCOMPARE(cpu.measured.params, 10.0);
        QCOMPARE(cpu.measured.grads, 21.0);
        QCOMPARE(cpu.measured.optimizer, 40.0);
        QCOMPARE(cpu.measured.tokensPerS, (300.0 + 400) / 2); // rank 0, after the first two steps
        // SHARD_GRAD_OP books its gathered parameters as parameters; a GPU's peak is the allocator's.
        QCOMPARE(readTrialRun(run.dir(), DataParallelLayout::FsdpShardGradOp, false).measured.params, 30.0);
        QCOMPARE(readTrialRun(run.dir(), DataParallelLayout::Ddp, true).measured.peak, 999.0);
        std::ofstream(run.outcomeFile()) << R"({"status": "failed", "error": "rank 1 ran out of memory"})";
        QCOMPARE(readTrialRun(run.dir(), DataParallelLayout::Ddp, false).outcome,
                 std::string("failed: rank 1 ran out of memory"));
        std::filesystem::remove(run.outcomeFile());
        QCOMPARE(readTrialRun(run.dir(), DataParallelLayout::Ddp, false).outcome, std::string("no outcome"));
    }

    // The chosen setup is written as new files; the user's are never overwritten.
    void theChoiceIsWrittenAsNewFiles()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const std::string folder = dir.path().toStdString();
        std::ofstream(folder + "/my.yaml") << "# mine\n" << config::recipeToYaml(llamaDemo());
        std::ofstream(folder + "/my.tuned.yaml") << "an earlier choice\n";
        TuneRequest request = cpuRequest(1e12);
        request.recipeFile = folder + "/my.yaml";
        auto all = candidatesOf(llamaDemo(), request);
        QVERIFY(all.ok());
        Candidate& best = all->back();
        auto written = writeTunedFiles(request, best);
        QVERIFY2(written.ok(), written.ok() ? "" : written.error().message.c_str());
        QCOMPARE(written->second, folder + "/my.tuned-2.yaml");
        auto recipe = config::loadRecipe(written->second);
        QVERIFY(recipe.ok());
        QCOMPARE(recipe->perDeviceBatchSize, best.microBatch);
        QCOMPARE(recipe->gradientAccumulationSteps, best.accumulation);
        std::ifstream earlier(folder + "/my.tuned.yaml");
        std::string line;
        std::getline(earlier, line);
        QCOMPARE(line, std::string("an earlier choice"));
        auto config = config::loadAccelerateConfig(written->first);
        QVERIFY(config.ok());
        QVERIFY(*config == best.config);
    }
};

QTEST_APPLESS_MAIN(TestTuner)
#include "tst_tuner.moc"
