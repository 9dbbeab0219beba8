// Sharded training in real runs (fp32, CPU, Gloo), against DDP on the same ranks:
//  - equivalence: every FSDP strategy and ZeRO stage, with gradient accumulation (and, for the
//    stages and FULL_SHARD / SHARD_GRAD_OP, without) and clipping, gives DDP's loss curve and,
//    gathered, DDP's final parameters (relative 1e-5), at 2 and 4 ranks, with DDP's gradient norm
//    (the global one: at the first step within 1e-6), also with frozen parameters and hybrid;
//  - memory: per-rank model states equal the ZeRO formulas for fp32 AdamW: optimizer 8 bytes x Psi / N
//    (the two moments of the shard) plus, at stages 1-2, the 4 x Psi / N fp32 master shard;
//    parameters 4 x Psi at stages 1-2, the shard at stage 3 (peak: plus the units gathered at
//    once); gradients 4 x Psi at stage 1, the shard from stage 2 on; on the Llama demo they equal
//    the memory estimate's and PyTorch's own fully_shard's (tests/tools/fsdp_memory_reference.py);
//  - communication per step: ZeRO-1/2 move what DDP moves, ZeRO-3 1.5 times as much.
//
// The model: GPT with 2 blocks, n_embd 32, block_size 32: Psi = 34688 parameters, a block 12704,
// the root (embeddings, final norm) 9280, all multiples of 4, so no padding at 2 or 4 ranks.

#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include "engine/estimate/memory_estimate.h"
#include "engine/plan/parallelism.h"
#include "engine/recipe/recipe.h"
#include "profiler/analysis.h"
#include "profiler/chrome_trace.h"
#include "tests/common/demo_recipes.h"
#include "tests/common/python_tool.h"
#include "tests/common/recipe_run.h"
#include "tests/common/safetensors_reader.h"

#include <cmath>
#include <map>

namespace {

constexpr qint64 kPsi = 34688;
constexpr qint64 kBlock = 12704;
constexpr qint64 kRoot = 9280;

// `model` and `optimizer` add keys to those sections, `extra` whole sections.
QString recipe(int accumulation, const QString& model = {}, const QString& optimizer = {}, const QString& extra = {})
{
    return QStringLiteral("name: shard\n"
                          "seed: 11\n"
                          "model: {type: gpt, n_layer: 2, n_embd: 32, n_head: 4, block_size: 32%2}\n"
                          "data: {type: text}\n"
                          "optimizer: {type: adamw, lr: 0.003, weight_decay: 0.01%3}\n"
                          "schedule: {type: cosine, warmup_steps: 2}\n"
                          "training: {per_device_batch_size: 2, gradient_accumulation_steps: %1, max_steps: 8, "
                          "max_grad_norm: 0.5}\n")
               .arg(accumulation)
               .arg(model.isEmpty() ? QString() : ", " + model)
               .arg(optimizer.isEmpty() ? QString() : ", " + optimizer)
           + extra;
}

// An FSDP config's reading with this strategy, as config::interpretParallelism gives it.
shardscope::config::ParallelismSpec fsdpStrategy(const std::string& strategy)
{
    shardscope::config::ParallelismSpec spec;
    spec.fsdpShardingStrategy = strategy;
    return spec;
}

bool closeRelative(double a, double b, double tolerance) { return std::abs(a - b) <= tolerance * std::max(1.0, std::abs(b)); }

struct Run {
    int exitCode = -1;
    QString output;
    QVector<double> losses;
    QVector<double> gradNorms; // before clipping, as clip_grad_norm_ returns it
    QJsonObject lastStep;
    QString params; // safetensors with the gathered final parameters
    QString runDir;
};

// #22: the gradient norm every strategy reports is the global one, the norm of the whole
// (unsharded) gradient, as the reference (DDP: every rank holds all of it) reports it; the norm of
// a rank's shard alone would be off by about sqrt(ranks). At the first step (same parameters, same
// batches: only the order of the sums differs) within 1e-6, later steps within `tolerance`.
void compareGradNorms(const Run& run, const Run& reference, double tolerance)
{
    QCOMPARE(run.gradNorms.size(), reference.gradNorms.size());
    QVERIFY(!run.gradNorms.isEmpty());
    for (int i = 0; i < run.gradNorms.size(); ++i) {
        const double allowed = (i == 0 ? std::min(tolerance, 1e-6) : tolerance) * std::abs(reference.gradNorms[i]);
        QVERIFY2(reference.gradNorms[i] > 0, "the reference's gradient norm is missing");
        QVERIFY2(std::abs(run.gradNorms[i] - reference.gradNorms[i]) <= allowed,
                 qPrintable(QStringLiteral("grad_norm at step %1: %2 vs %3")
                                .arg(i + 1)
                                .arg(run.gradNorms[i], 0, 'g', 12)
                                .arg(reference.gradNorms[i], 0, 'g', 12)));
    }
}

// Same loss curve and gradient norms (relative `tolerance`) and, when `compareParams`, the same
// final parameters.
void compareRuns(const Run& run, const Run& reference, double tolerance, bool compareParams = true)
{
    QVERIFY2(run.exitCode == 0, qPrintable(run.output));
    QVERIFY2(reference.exitCode == 0, qPrintable(reference.output));
    QCOMPARE(run.losses.size(), reference.losses.size());
    for (int i = 0; i < run.losses.size(); ++i)
        QVERIFY2(std::abs(run.losses[i] - reference.losses[i]) <= tolerance * std::abs(reference.losses[i]),
                 qPrintable(QStringLiteral("step %1: %2 vs %3").arg(i + 1).arg(run.losses[i]).arg(reference.losses[i])));
    compareGradNorms(run, reference, tolerance);
    if (QTest::currentTestFailed())
        return;
    if (!compareParams)
        return;
    const auto ours = shardscope::testing::readFloatSafetensors(run.params);
    const auto theirs = shardscope::testing::readFloatSafetensors(reference.params);
    QCOMPARE(ours.size(), theirs.size());
    for (const auto& [key, values] : theirs) {
        QVERIFY2(ours.count(key), qPrintable(key));
        const auto& mine = ours.at(key);
        QCOMPARE(mine.size(), values.size());
        for (int i = 0; i < values.size(); ++i)
            QVERIFY2(closeRelative(mine[i], values[i], tolerance), qPrintable(key));
    }
}

} // namespace

class TestSharding : public QObject {
    Q_OBJECT
private:
    Run launch(const QString& name, int ranks, int accumulation, const QStringList& strategy)
    {
        return launchText(name, ranks, recipe(accumulation), strategy);
    }

    Run launchText(const QString& name, int ranks, const QString& recipeText, const QStringList& strategy,
                   const QStringList& launchArgs = {})
    {
        Run run;
        run.params = m_dir.path() + "/" + name + ".safetensors";
        auto launched = shardscope::testing::launchRecipe(
            m_dir.path(), name, recipeText, ranks, launchArgs,
            QStringList{"--dump-params", run.params, "--dump-initial", m_dir.path() + "/" + name + "-initial.safetensors"}
                + strategy);
        run.runDir = launched.runDir;
        run.exitCode = launched.exitCode;
        run.output = launched.output;
        for (const auto& e : launched.events) {
            if (e["type"] == "step" && e["rank"] == 0) {
                run.losses.push_back(e["loss"].toDouble());
                run.gradNorms.push_back(e["grad_norm"].toDouble());
                run.lastStep = e;
            }
        }
        return run;
    }

    const Run& ddp(int ranks, int accumulation)
    {
        const auto key = std::make_pair(ranks, accumulation);
        if (!m_ddp.count(key))
            m_ddp[key] = launch(QStringLiteral("ddp-%1-%2").arg(ranks).arg(accumulation), ranks, accumulation, {});
        return m_ddp[key];
    }

private slots:
    void matchesDdp_data()
    {
        QTest::addColumn<int>("ranks");
        QTest::addColumn<QStringList>("strategy");
        const std::vector<std::pair<const char*, QStringList>> strategies = {
            {"ZeRO-1", {"--zero_stage", "1"}},
            {"ZeRO-2", {"--zero_stage", "2"}},
            {"ZeRO-3", {"--zero_stage", "3"}},
            {"FULL_SHARD", {"--fsdp_sharding_strategy", "FULL_SHARD"}},
            {"SHARD_GRAD_OP", {"--fsdp_sharding_strategy", "SHARD_GRAD_OP"}},
            {"FULL_SHARD, backward and forward prefetch",
             {"--fsdp_sharding_strategy", "FULL_SHARD", "--fsdp_backward_prefetch", "BACKWARD_PRE", "--fsdp_forward_prefetch"}},
            {"ZeRO-3, backward prefetch", {"--zero_stage", "3", "--fsdp_backward_prefetch", "BACKWARD_POST"}},
            {"FULL_SHARD, NO_WRAP", {"--fsdp_sharding_strategy", "FULL_SHARD", "--fsdp_auto_wrap_policy", "NO_WRAP"}},
            {"FULL_SHARD, SIZE_BASED_WRAP",
             {"--fsdp_sharding_strategy", "FULL_SHARD", "--fsdp_auto_wrap_policy", "SIZE_BASED_WRAP", "--fsdp_min_num_params",
              "10000"}},
            {"FULL_SHARD, activation checkpointing",
             {"--fsdp_sharding_strategy", "FULL_SHARD", "--fsdp_activation_checkpointing"}},
            {"SHARD_GRAD_OP, activation checkpointing, use_orig_params",
             {"--fsdp_sharding_strategy", "SHARD_GRAD_OP", "--fsdp_activation_checkpointing", "--fsdp_use_orig_params"}},
            {"ZeRO-3, activation checkpointing, backward prefetch",
             {"--zero_stage", "3", "--fsdp_activation_checkpointing", "--fsdp_backward_prefetch", "BACKWARD_PRE"}},
            {"ZeRO-1, activation checkpointing", {"--zero_stage", "1", "--fsdp_activation_checkpointing"}},
            {"FULL_SHARD, offload", {"--fsdp_sharding_strategy", "FULL_SHARD", "--fsdp_offload_params"}},
            {"ZeRO-2, optimizer offload", {"--zero_stage", "2", "--offload_optimizer_device", "cpu"}},
            {"ZeRO-3, optimizer and parameter offload",
             {"--zero_stage", "3", "--offload_optimizer_device", "cpu", "--offload_param_device", "cpu"}},
            {"FULL_SHARD, cpu_ram_efficient_loading",
             {"--fsdp_sharding_strategy", "FULL_SHARD", "--fsdp_cpu_ram_efficient_loading"}},
            {"SHARD_GRAD_OP, cpu_ram_efficient_loading",
             {"--fsdp_sharding_strategy", "SHARD_GRAD_OP", "--fsdp_cpu_ram_efficient_loading"}},
        };
        for (int ranks : {2, 4})
            for (const auto& [name, args] : strategies)
                QTest::newRow(qPrintable(QStringLiteral("%1, %2 ranks").arg(QLatin1String(name)).arg(ranks))) << ranks << args;
    }
    void matchesDdp()
    {
        QFETCH(int, ranks);
        QFETCH(QStringList, strategy);
        const Run& reference = ddp(ranks, 2);
        QVERIFY2(reference.exitCode == 0, qPrintable(reference.output));
        const QString name = QStringLiteral("eq-%1").arg(m_counter++);
        const Run run = launch(name, ranks, 2, strategy);
        QVERIFY2(run.exitCode == 0, qPrintable(run.output));
        QCOMPARE(run.losses.size(), reference.losses.size());
        for (int i = 0; i < run.losses.size(); ++i)
            QVERIFY2(std::abs(run.losses[i] - reference.losses[i]) <= 1e-5 * std::abs(reference.losses[i]),
                     qPrintable(QStringLiteral("step %1: %2 vs DDP %3").arg(i + 1).arg(run.losses[i]).arg(reference.losses[i])));
        compareGradNorms(run, reference, 1e-5);
        if (QTest::currentTestFailed())
            return;
        const auto ours = shardscope::testing::readFloatSafetensors(run.params),
                   theirs = shardscope::testing::readFloatSafetensors(reference.params);
        QCOMPARE(ours.size(), theirs.size());
        QCOMPARE(ours.size(), size_t(4 + 2 * 12)); // every parameter, by its model name
        for (const auto& [key, values] : theirs) {
            QVERIFY2(ours.count(key), qPrintable(key));
            const auto& mine = ours.at(key);
            QCOMPARE(mine.size(), values.size());
            for (int i = 0; i < values.size(); ++i)
                QVERIFY2(std::abs(mine[i] - values[i]) <= 1e-5 * std::max(1.0f, std::abs(values[i])), qPrintable(key));
        }
    }

    // Activation checkpointing recomputes each unit in backward (the trace shows the
    // recomputation) with the first run's RNG and autocast state: with dropout, and in bf16, the
    // curve is the one without checkpointing.
    void activationCheckpointingRecomputesExactly_data()
    {
        QTest::addColumn<QStringList>("strategy");
        QTest::addColumn<QStringList>("launchArgs");
        QTest::newRow("FULL_SHARD, dropout 0.1") << QStringList{"--fsdp_sharding_strategy", "FULL_SHARD"} << QStringList{};
        QTest::newRow("ZeRO-2, dropout 0.1, bf16")
            << QStringList{"--zero_stage", "2"} << QStringList{"--mixed_precision", "bf16"};
    }
    void activationCheckpointingRecomputesExactly()
    {
        QFETCH(QStringList, strategy);
        QFETCH(QStringList, launchArgs);
        const QString text = recipe(2, "dropout: 0.1", {}, "profile: {start_step: 2, steps: 1}\n");
        const QString tag = QString::number(m_counter++);
        const Run plain = launchText("ac-off-" + tag, 2, text, strategy, launchArgs);
        const Run checkpointed = launchText("ac-on-" + tag, 2, text, strategy + QStringList{"--fsdp_activation_checkpointing"},
                                            launchArgs);
        compareRuns(checkpointed, plain, 1e-6);
        if (QTest::currentTestFailed())
            return;
        // Dropout is on: a different mask in the recomputation would change the curve, and the
        // recomputation did run, once per block and micro-step in the profiled step (2 micro-steps).
        QFile trace(checkpointed.runDir + "/traces/rank0.json");
        QVERIFY2(trace.open(QIODevice::ReadOnly), qPrintable(trace.fileName()));
        const QByteArray json = trace.readAll();
        QCOMPARE(json.count("\"recompute h.0\""), 2);
        QCOMPARE(json.count("\"recompute h.1\""), 2);
        QFile plainTrace(plain.runDir + "/traces/rank0.json");
        QVERIFY(plainTrace.open(QIODevice::ReadOnly));
        QVERIFY(!plainTrace.readAll().contains("recompute"));
    }

    // fsdp_use_orig_params (and DeepSpeed): frozen parameters and a weight-decay-free group work
    // as in DDP; without use_orig_params both are refused with the fix.
    void frozenParametersAndGroups()
    {
        const QString text = recipe(2, "frozen: [wpe, h.0.attn]", "no_weight_decay: [bias, ln_]");
        const Run reference = launchText("groups-ddp", 2, text, {});
        QVERIFY2(reference.exitCode == 0, qPrintable(reference.output));
        const std::vector<QStringList> strategies = {
            {"--fsdp_sharding_strategy", "FULL_SHARD", "--fsdp_use_orig_params"},
            {"--fsdp_sharding_strategy", "SHARD_GRAD_OP", "--fsdp_use_orig_params", "--fsdp_activation_checkpointing"},
            {"--zero_stage", "2"},
            {"--zero_stage", "3"},
        };
        for (const auto& strategy : strategies) {
            const Run run = launchText("groups-" + QString::number(m_counter++), 2, text, strategy);
            compareRuns(run, reference, 1e-5);
            if (QTest::currentTestFailed()) {
                qWarning() << "strategy" << strategy;
                return;
            }
        }
        // Frozen parameters kept their initial values; trainable ones moved.
        const auto initial = shardscope::testing::readFloatSafetensors(m_dir.path() + "/groups-ddp-initial.safetensors");
        const auto final = shardscope::testing::readFloatSafetensors(reference.params);
        QVERIFY(initial.at("wpe.weight") == final.at("wpe.weight"));
        QVERIFY(initial.at("h.0.attn.c_attn.weight") == final.at("h.0.attn.c_attn.weight"));
        QVERIFY(initial.at("h.0.c_fc.weight") != final.at("h.0.c_fc.weight"));
        // The no-decay group took effect: with decay on everything, LayerNorm weights end elsewhere.
        const Run decayAll = launchText("groups-decay-all", 2, recipe(2, "frozen: [wpe, h.0.attn]"), {});
        QVERIFY2(decayAll.exitCode == 0, qPrintable(decayAll.output));
        const auto decayed = shardscope::testing::readFloatSafetensors(decayAll.params);
        double largest = 0;
        for (int i = 0; i < final.at("ln_f.weight").size(); ++i)
            largest = std::max(largest, double(std::abs(final.at("ln_f.weight")[i] - decayed.at("ln_f.weight")[i])));
        QVERIFY2(largest > 1e-5, qPrintable(QString::number(largest)));

        // Only the final LayerNorm trains: it sits at the end of the root unit, so at 4 ranks most
        // ranks own no trainable element (empty partitions, which FSDP and DeepSpeed accept).
        const QString lnOnly = recipe(2, "frozen: [wte, wpe, h.]");
        const Run lnDdp = launchText("ln-only-ddp", 4, lnOnly, {});
        const Run lnZero = launchText("ln-only-zero3", 4, lnOnly, {"--zero_stage", "3"});
        compareRuns(lnZero, lnDdp, 1e-5);
        if (QTest::currentTestFailed())
            return;

        const Run flatGroups = launchText("groups-flat", 2, recipe(2, {}, "no_weight_decay: [bias]"),
                                          {"--fsdp_sharding_strategy", "FULL_SHARD"});
        QVERIFY(flatGroups.exitCode != 0);
        QVERIFY2(flatGroups.output.contains("set fsdp_use_orig_params: true"), qPrintable(flatGroups.output));
        const Run flatFrozen = launchText("frozen-flat", 2, recipe(2, "frozen: [h.0.attn]"),
                                          {"--fsdp_sharding_strategy", "FULL_SHARD"});
        QVERIFY(flatFrozen.exitCode != 0);
        QVERIFY2(flatFrozen.output.contains("unit 'h.0' mixes frozen and trainable parameters"), qPrintable(flatFrozen.output));
        const Run typo = launchText("frozen-typo", 2, recipe(2, "frozen: [h.9]"), {});
        QVERIFY(typo.exitCode != 0);
        QVERIFY2(typo.output.contains("model.frozen: 'h.9' is the start of no parameter's name"), qPrintable(typo.output));
    }

    // FULL_SHARD's all-gathers hide behind compute with prefetch and not without (the unit waits
    // for its own gather at once; the wait is not compute), from the ranks' traces. The
    // reduce-scatters, issued from gradient hooks, overlap backward either way.
    void prefetchHidesAllGathers()
    {
        const QString text = "name: prefetch\nseed: 1\nmodel: {type: gpt, n_layer: 4, n_embd: 64, n_head: 4, block_size: 64}\n"
                             "data: {type: text}\noptimizer: {type: adamw, lr: 0.001}\n"
                             "training: {per_device_batch_size: 8, max_steps: 7}\nprofile: {start_step: 3, steps: 4}\n";
        auto allGatherOverlaps = [&](const QString& name, const QStringList& strategy) {
            QVector<double> overlaps;
            const Run run = launchText(name, 2, text, strategy);
            if (run.exitCode != 0) {
                qWarning().noquote() << run.output;
                return overlaps;
            }
            for (int rank = 0; rank < 2; ++rank) {
                auto traces = shardscope::profiler::readChromeTrace(
                    (run.runDir + "/traces/rank" + QString::number(rank) + ".json").toStdString());
                if (!traces || traces->size() != 1)
                    return QVector<double>{};
                for (const auto& c : shardscope::profiler::analyseRank(traces->front()).collectives)
                    if (c.kind == "all_gather")
                        overlaps << c.overlap;
            }
            return overlaps;
        };
        const auto without = allGatherOverlaps("no-prefetch", {"--fsdp_sharding_strategy", "FULL_SHARD"});
        const auto with = allGatherOverlaps("prefetch", {"--fsdp_sharding_strategy", "FULL_SHARD", "--fsdp_backward_prefetch",
                                                         "BACKWARD_PRE", "--fsdp_forward_prefetch"});
        qInfo() << "all-gather overlap without prefetch" << without << "with" << with;
        QCOMPARE(without.size(), 2);
        QCOMPARE(with.size(), 2);
        for (int rank = 0; rank < 2; ++rank) {
            QVERIFY2(without[rank] < 0.05, qPrintable(QString::number(without[rank])));
            QVERIFY2(with[rank] > 0.2, qPrintable(QString::number(with[rank])));
        }
    }

    // DeepSpeed's gradient_accumulation_steps and gradient_clipping (from its config, passed by the
    // launch plan) win over the recipe: a recipe without accumulation or clipping, given both,
    // trains as the DDP run whose recipe has them.
    void deepSpeedAccumulationAndClippingWinOverTheRecipe()
    {
        const Run& reference = ddp(2, 2); // accumulation 2, max_grad_norm 0.5
        QString plain = recipe(1);
        plain.replace(", max_grad_norm: 0.5", "");
        const Run run = launchText(
            "ds-knobs", 2, plain,
            {"--zero_stage", "3", "--zero3_init", "--gradient_accumulation_steps", "2", "--max_grad_norm", "0.5"});
        compareRuns(run, reference, 1e-5);
    }

    // fsdp_cpu_ram_efficient_loading from a pretrained folder: only rank 0 reads it, the others
    // get their shards from rank 0 — their own weights (the seed's random ones) would change the
    // curve — and the run equals DDP from the same folder.
    void cpuRamEfficientLoadingTakesRankZerosWeights()
    {
        const QString exportRun = "pretrain-source";
        const Run source = launchText(exportRun, 2, recipe(1), {});
        QVERIFY2(source.exitCode == 0, qPrintable(source.output));
        const QString folder = source.runDir + "/export";
        QVERIFY2(QFile::exists(folder + "/model.safetensors"), qPrintable(folder));
        const QString text = recipe(2, "pretrained: '" + folder + "'");
        const Run ddpRun = launchText("pretrained-ddp", 2, text, {});
        for (const QString& strategy : {QStringLiteral("FULL_SHARD"), QStringLiteral("SHARD_GRAD_OP")}) {
            const Run run = launchText("pretrained-" + strategy, 2, text,
                                       {"--fsdp_sharding_strategy", strategy, "--fsdp_cpu_ram_efficient_loading"});
            compareRuns(run, ddpRun, 1e-5);
            if (QTest::currentTestFailed())
                return;
            bool rankOneSkipped = false;
            for (const auto& e : shardscope::testing::readEvents(run.runDir + "/events.jsonl"))
                rankOneSkipped = rankOneSkipped
                                 || (e["type"] == "log" && e["rank"] == 1
                                     && e["message"].toString().contains(
                                         "its shards come from rank 0 (fsdp_cpu_ram_efficient_loading)"));
            QVERIFY(rankOneSkipped);
        }
        // A pretrained start differs from the random one: the check above could fail.
        const Run random = launchText("random-start", 2, recipe(2), {});
        QVERIFY(std::abs(random.losses.value(0) - ddpRun.losses.value(0)) > 1e-3);
    }

    // HYBRID_SHARD(_ZERO2) with two launchers on this host (2 "machines" x 2 ranks): shards
    // inside each machine, replicas across them; equals 4-rank DDP, holds half the optimizer
    // state per rank, and all-reduces the gradient shards between the machines.
    void hybridShardingAcrossTwoLaunchers_data()
    {
        QTest::addColumn<QString>("strategy");
        QTest::addColumn<int>("perMachine");
        QTest::newRow("HYBRID_SHARD, 2 x 2 ranks") << "HYBRID_SHARD" << 2;
        QTest::newRow("HYBRID_SHARD_ZERO2, 2 x 2 ranks") << "HYBRID_SHARD_ZERO2" << 2;
        QTest::newRow("HYBRID_SHARD, 2 x 1 rank") << "HYBRID_SHARD" << 1; // nothing to shard: replicas only
    }
    void hybridShardingAcrossTwoLaunchers()
    {
        QFETCH(QString, strategy);
        QFETCH(int, perMachine);
        const int ranks = 2 * perMachine;
        const Run& reference = ddp(ranks, 2);
        QVERIFY2(reference.exitCode == 0, qPrintable(reference.output));
        const QString name = QStringLiteral("hybrid-%1-%2").arg(strategy).arg(ranks);
        const QString recipePath = m_dir.path() + "/" + name + ".yaml";
        QFile file(recipePath);
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.write(recipe(2).toUtf8());
        file.close();
        const int port = shardscope::testing::freeLoopbackPort();
        Run run;
        run.params = m_dir.path() + "/" + name + ".safetensors";
        QProcess machines[2];
        for (int m = 1; m >= 0; --m) {
            machines[m].setProcessChannelMode(QProcess::MergedChannels);
            machines[m].start(shardscope::testing::shardscopeBinary(), {"launch",
                                                                        "--num_processes",
                                                                        QString::number(ranks),
                                                                        "--num_machines",
                                                                        "2",
                                                                        "--machine_rank",
                                                                        QString::number(m),
                                                                        "--main_process_port",
                                                                        QString::number(port),
                                                                        "--recipe",
                                                                        recipePath,
                                                                        "--runs_dir",
                                                                        m_dir.path() + "/machine" + QString::number(m),
                                                                        "--run_name",
                                                                        name,
                                                                        "--",
                                                                        "--dump-params",
                                                                        run.params,
                                                                        "--fsdp_sharding_strategy",
                                                                        strategy});
            QVERIFY(machines[m].waitForStarted());
        }
        run.exitCode = 0;
        for (auto& machine : machines) {
            QVERIFY(machine.waitForFinished(180000));
            run.output += QString::fromUtf8(machine.readAll());
            run.exitCode = std::max(run.exitCode, machine.exitCode());
        }
        for (const auto& e : shardscope::testing::readEvents(m_dir.path() + "/machine0/" + name + "/events.jsonl"))
            if (e["type"] == "step" && e["rank"] == 0) {
                run.losses.push_back(e["loss"].toDouble());
                run.gradNorms.push_back(e["grad_norm"].toDouble());
                run.lastStep = e;
            }
        compareRuns(run, reference, 1e-5);
        if (QTest::currentTestFailed())
            return;
        const auto mem = run.lastStep["mem"].toObject();
        const auto comm = run.lastStep["comm"].toObject();
        QCOMPARE(mem["optimizer"].toInteger(), 8 * kPsi / perMachine); // AdamW's moments of one of the machine's shards
        QCOMPARE(comm["reduce_scatter"].toInteger(), 4 * kPsi); // inside the machine, on the syncing micro-step
        QCOMPARE(comm["all_reduce"].toInteger(), 4 * kPsi / perMachine); // the shard, once per step, between machines
    }

    // parallelism_config's dp_replicate_size x dp_shard_size under FSDP2 (Accelerate's HSDP mesh:
    // dp_shard groups of consecutive ranks, replicated) runs on one machine as the engine's hybrid
    // sharding over groups of dp_shard_size: equal to 4-rank DDP, half the optimizer state per
    // rank, the gradient shard all-reduced between the two replicas. It used to run as plain
    // FSDP over all four ranks while the estimate sharded over two (#41).
    void hsdpFromParallelismConfig()
    {
        const Run& reference = ddp(4, 2);
        QVERIFY2(reference.exitCode == 0, qPrintable(reference.output));
        const QString config = m_dir.path() + "/hsdp-accelerate-config.yaml"; // not <run name>.yaml: the recipe goes there
        QVERIFY(shardscope::testing::writeHsdpConfig(config));
        const Run run = launchText(QStringLiteral("hsdp"), 4, recipe(2), {}, {"--config_file", config});
        QVERIFY2(run.exitCode == 0, qPrintable(run.output));
        compareRuns(run, reference, 1e-5);
        if (QTest::currentTestFailed())
            return;
        const auto mem = run.lastStep["mem"].toObject();
        const auto comm = run.lastStep["comm"].toObject();
        QCOMPARE(mem["optimizer"].toInteger(), 8 * kPsi / 2);
        QCOMPARE(comm["all_reduce"].toInteger(), 4 * kPsi / 2);
        // #46: the memory per rank equals the estimate of the same config, field by field (the
        // Configure page's, shardscope estimate-memory's).
        auto loaded = shardscope::config::loadAccelerateConfig(config.toStdString());
        QVERIFY(loaded.ok());
        auto setup = shardscope::config::memorySetupFromConfig(*loaded);
        QVERIFY(setup.ok());
        auto parsed = shardscope::config::parseRecipe(recipe(2).toStdString(), "hsdp");
        QVERIFY(parsed.ok());
        const auto estimate = shardscope::config::estimateMemory(shardscope::config::modelShapeOf(*parsed),
                                                                 shardscope::config::PrecisionMode::No, setup->sharding);
        QCOMPARE(double(mem["params"].toInteger()), estimate.parameters);
        QCOMPARE(double(mem["grads"].toInteger()), estimate.gradients);
        QCOMPARE(double(mem["optimizer"].toInteger()), estimate.optimizer);
    }

    // #46: tensor parallelism's memory per rank equals the estimate of the same config field by
    // field: tp 2 alone (each rank its half of every projection, the rest whole) and dp_shard 2 x
    // tp 2 (those halves sharded again by FSDP over the data group), on the Llama demo.
    void tensorParallelMemoryEqualsTheEstimate_data()
    {
        QTest::addColumn<int>("shard");
        QTest::newRow("tp 2") << 1;
        QTest::newRow("dp_shard 2 x tp 2") << 2;
    }
    void tensorParallelMemoryEqualsTheEstimate()
    {
        QFETCH(int, shard);
        const int ranks = 2 * shard;
        const QString config = m_dir.path() + QStringLiteral("/tp-%1-accelerate-config.yaml").arg(shard);
        {
            QFile file(config);
            QVERIFY(file.open(QIODevice::WriteOnly));
            const QByteArray mesh = "parallelism_config:\n  parallelism_config_tp_size: 2\n";
            file.write(shard > 1 ? "distributed_type: FSDP\nnum_processes: 4\nuse_cpu: true\nfsdp_config:\n  fsdp_version: 2\n"
                                       + mesh + "  parallelism_config_dp_shard_size: 2\n"
                                 : "distributed_type: MULTI_GPU\nnum_processes: 2\nuse_cpu: true\n" + mesh);
        }
        const QString text = shardscope::testing::llamaDemoRecipe(2) + "profile: {start_step: 2, steps: 1}\n";
        const Run run = launchText(QStringLiteral("tp-memory-%1").arg(shard), ranks, text, {}, {"--config_file", config});
        QVERIFY2(run.exitCode == 0, qPrintable(run.output));
        const auto mem = run.lastStep["mem"].toObject();
        auto loaded = shardscope::config::loadAccelerateConfig(config.toStdString());
        QVERIFY(loaded.ok());
        auto setup = shardscope::config::memorySetupFromConfig(*loaded);
        QVERIFY(setup.ok());
        QCOMPARE(setup->sharding.tensorParallel, 2);
        auto parsed = shardscope::config::parseRecipe(text.toStdString(), "tp");
        QVERIFY(parsed.ok());
        const auto shape = shardscope::config::modelShapeOf(*parsed);
        QVERIFY(shape.splitParameters > 0 && shape.splitParameters < shape.parameters);
        const auto estimate = shardscope::config::estimateMemory(shape, shardscope::config::PrecisionMode::No, setup->sharding);
        QCOMPARE(double(mem["params"].toInteger()), estimate.parameters);
        QCOMPARE(double(mem["grads"].toInteger()), estimate.gradients);
        QCOMPARE(double(mem["optimizer"].toInteger()), estimate.optimizer);
        // The split halves the projections: fp32 parameters of the whole part plus half the split.
        const qint64 perRank = 4 * (shape.parameters - shape.splitParameters / 2) / shard;
        QCOMPARE(mem["params"].toInteger(), perRank);
        // Communication per mesh dimension: over the tensor group, per layer and micro-step, the
        // two row-parallel outputs forward and the five column-parallel inputs' gradients backward,
        // each an fp32 [batch, sequence, hidden] activation; over dp_shard, FSDP's collectives.
        const auto comm = run.lastStep["comm"].toObject();
        const qint64 activation = 4 * parsed->perDeviceBatchSize * shape.sequence * shape.hidden;
        QCOMPARE(comm["tp_all_reduce"].toInteger(), 7 * shape.layers * activation * parsed->gradientAccumulationSteps);
        QCOMPARE(comm["reduce_scatter"].toInteger() > 0, shard > 1);
        QCOMPARE(comm["all_gather"].toInteger() > 0, shard > 1);
        // Each rank's tokens are its share (the tensor group splits each batch), so tokens x ranks,
        // MFU and tokens/s count every token once.
        QCOMPARE(run.lastStep["tokens"].toInteger(),
                 parsed->perDeviceBatchSize * shape.sequence * parsed->gradientAccumulationSteps / 2);
        // The trace of the profiled (last) step: the tensor group's all-reduces, one span each, as a
        // collective of their own beside FSDP's (the window also holds the final eval's forwards).
        auto traces = shardscope::profiler::readChromeTrace((run.runDir + "/traces/rank0.json").toStdString());
        QVERIFY(traces && traces->size() == 1);
        const auto analysis = shardscope::profiler::analyseRank(traces->front());
        std::map<std::string, shardscope::profiler::CollectiveStats> kinds;
        for (const auto& c : analysis.collectives)
            kinds[c.kind] = c;
        QVERIFY(kinds.count("all_reduce tp"));
        QCOMPARE(kinds.count("all_gather") > 0, shard > 1);
        QCOMPARE(analysis.steps.size(), std::size_t(1));
        const auto window = analysis.steps.front().window;
        qint64 count = 0, bytes = 0;
        for (const auto& span : traces->front().spans)
            if (span.category == "all_reduce tp" && span.startNs >= window.startNs && span.endNs <= window.endNs) {
                ++count;
                bytes += span.bytes;
            }
        QCOMPARE(count, 7 * shape.layers * parsed->gradientAccumulationSteps);
        QCOMPARE(bytes, comm["tp_all_reduce"].toInteger());
    }

    void memoryAndCommunicationFollowTheStage_data()
    {
        QTest::addColumn<int>("ranks");
        QTest::newRow("2 ranks") << 2;
        QTest::newRow("4 ranks") << 4;
    }
    void memoryAndCommunicationFollowTheStage()
    {
        QFETCH(int, ranks);
        const qint64 n = ranks;
        const Run& plain = ddp(ranks, 1);
        QVERIFY(plain.exitCode == 0);
        const auto ddpMem = plain.lastStep["mem"].toObject();
        const qint64 ddpAllReduce = plain.lastStep["comm"].toObject()["all_reduce"].toInteger();
        QCOMPARE(ddpMem["params"].toInteger(), 4 * kPsi);
        QCOMPARE(ddpMem["optimizer"].toInteger(), 8 * kPsi);
        QCOMPARE(ddpAllReduce, 4 * kPsi);
        const qint64 ddpVolume = 2 * ddpAllReduce; // an all-reduce is a reduce-scatter plus an all-gather

        std::map<int, QJsonObject> byStage;
        for (int stage : {1, 2, 3}) {
            const Run run = launch(QStringLiteral("mem-%1-%2").arg(stage).arg(ranks), ranks, 1,
                                   {"--zero_stage", QString::number(stage)});
            QVERIFY2(run.exitCode == 0, qPrintable(run.output));
            compareRuns(run, plain, 1e-5); // without gradient accumulation, too, the curve is DDP's
            if (QTest::currentTestFailed())
                return;
            byStage[stage] = run.lastStep;
            const auto mem = run.lastStep["mem"].toObject();
            const auto comm = run.lastStep["comm"].toObject();
            // Optimizer state: AdamW's two fp32 moments of this rank's shard only, plus at stages
            // 1-2 the fp32 master shard (at stage 3 the shard is the parameter itself).
            QCOMPARE(mem["optimizer"].toInteger(), (stage < 3 ? 12 : 8) * kPsi / n);
            const qint64 volume = comm["all_gather"].toInteger() + comm["reduce_scatter"].toInteger()
                                  + 2 * comm["all_reduce"].toInteger();
            QCOMPARE(comm["reduce_scatter"].toInteger(), 4 * kPsi);
            // Gradients: every full one until the step's reduction at stage 1, the reduced shard
            // from stage 2 on.
            QCOMPARE(mem["grads"].toInteger(), stage == 1 ? 4 * kPsi : 4 * kPsi / n);
            if (stage < 3) {
                QCOMPARE(mem["params"].toInteger(), 4 * kPsi); // full parameters (the master shard is optimizer state)
                QCOMPARE(mem["peak_params"].toInteger(), 4 * kPsi);
                QCOMPARE(volume, ddpVolume); // stages 1-2 move what DDP moves
            } else {
                QCOMPARE(mem["params"].toInteger(), 4 * kPsi / n);
                QCOMPARE(mem["peak_params"].toInteger(), 4 * kPsi / n + 4 * (kRoot + kBlock)); // + root + one block
                QCOMPARE(volume * 2, ddpVolume * 3); // ZeRO-3: 1.5x DDP
            }
        }
        for (const QStringList& fsdp :
             {QStringList{"--fsdp_sharding_strategy", "FULL_SHARD"}, QStringList{"--fsdp_sharding_strategy", "SHARD_GRAD_OP"}}) {
            compareRuns(launch(QStringLiteral("mem-%1-%2").arg(fsdp.last()).arg(ranks), ranks, 1, fsdp), plain, 1e-5);
            if (QTest::currentTestFailed())
                return;
        }
        // ZeRO-1 holds every full gradient at once (stage 2's unsharded ones go unit by unit:
        // memoryPerRankMatchesFullyShard, on a model of more than three units).
        QVERIFY(byStage[1]["mem"].toObject()["peak_grads"].toInteger() >= 4 * kPsi);
    }

    // #45 point 7: per-rank memory of the Llama demo under FSDP, as the step events report it,
    // equals the memory estimate's and PyTorch's own fully_shard's on the same model (fp32 AdamW,
    // 2 ranks), field by field. FULL_SHARD: this rank's shards of parameters, gradients and
    // moments. SHARD_GRAD_OP (fully_shard's reshard_after_forward false): the same shards are
    // kept, and every parameter is unsharded from forward to backward, which the estimate counts
    // as parameters (the peak's). At their peak the unsharded gradients waiting for a
    // reduce-scatter are a unit's or two, never the whole model's (all of them were kept until
    // backward ended: 1.5x the model's gradients per rank).
    void memoryPerRankMatchesFullyShard_data()
    {
        QTest::addColumn<QString>("strategy");
        QTest::newRow("FULL_SHARD") << "FULL_SHARD";
        QTest::newRow("SHARD_GRAD_OP") << "SHARD_GRAD_OP";
    }
    void memoryPerRankMatchesFullyShard()
    {
        QFETCH(QString, strategy);
        const bool fullShard = strategy == "FULL_SHARD";
        const QString text = shardscope::testing::llamaDemoRecipe(2);
        QVERIFY(text.contains("max_steps: 2"));
        const QString name = "llama-memory-" + strategy;
        const Run run = launchText(name, 2, text, {"--fsdp_sharding_strategy", strategy});
        QVERIFY2(run.exitCode == 0, qPrintable(run.output));
        const QJsonObject mem = run.lastStep["mem"].toObject();
        const auto field = [&mem](const char* key) { return mem[QLatin1String(key)].toInteger(); };

        QString why;
        const QByteArray printed = shardscope::testing::runTool({shardscope::testing::toolsDir() + "fsdp_memory_reference.py",
                                                                 "--recipe", m_dir.path() + "/" + name + ".yaml",
                                                                 "--reshard-after-forward", fullShard ? "true" : "false"},
                                                                why);
        QVERIFY2(!printed.isEmpty(), qPrintable(why));
        const QJsonObject torch = QJsonDocument::fromJson(printed.split('\n').front()).object(); // rank 0
        const auto reference = [&torch](const char* key) { return torch[QLatin1String(key)].toInteger(); };

        auto recipe = shardscope::config::parseRecipe(text.toStdString(), name.toStdString());
        QVERIFY(recipe.ok());
        const auto layout = shardscope::config::stateLayoutOf(fsdpStrategy(strategy.toStdString()), 2, 1);
        QCOMPARE(layout.fullParamsForwardToBackward, !fullShard);
        const auto estimate = shardscope::config::estimateMemory(shardscope::config::modelShapeOf(*recipe),
                                                                 shardscope::config::PrecisionMode::No, layout);
        const qint64 fullModel = reference("full_params");
        QCOMPARE(fullModel, qint64(4 * shardscope::config::modelShapeOf(*recipe).parameters));

        QCOMPARE(field("params"), reference("params"));
        QCOMPARE(field("grads"), reference("grads"));
        QCOMPARE(field("optimizer"), reference("optimizer"));
        QCOMPARE(double(field(fullShard ? "params" : "peak_params")), estimate.parameters);
        QCOMPARE(double(field("grads")), estimate.gradients);
        QCOMPARE(double(field("optimizer")), estimate.optimizer);
        if (!fullShard)
            QCOMPARE(field("peak_params"), reference("unsharded_after_forward") + reference("params"));
        const qint64 peakGrads = field("peak_grads");
        QVERIFY2(peakGrads < fullModel, qPrintable(QStringLiteral("peak gradients %1 of %2").arg(peakGrads).arg(fullModel)));
        QVERIFY(peakGrads > field("grads"));
    }

private:
    QTemporaryDir m_dir;
    std::map<std::pair<int, int>, Run> m_ddp;
    int m_counter = 0;
};

QTEST_GUILESS_MAIN(TestSharding)
#include "tst_sharding.moc"
