// #23 mixed_precision fp8 in real runs through `shardscope launch` (Gloo, CPU, where _scaled_mm
// runs emulated):
//  - the engine's fp8 MLP under DDP equals PyTorch's DDP with the same fp8 recipe
//    (tests/tools/ddp_reference.py --mixed-precision fp8, which calls fp8_reference.py's fp8
//    matmuls from torchao-style Float8Linear layers chosen by Accelerate's filter) bit for bit:
//    every step's loss over 20 SGD steps, for tensorwise (AO) and delayed (TE) scaling, at 1 and
//    2 ranks;
//  - which layers run in fp8 is Accelerate's rule (first, last and dims not divisible by 16 kept);
//  - the step events' bytes (parameters, gradients, optimizer, fp8 scaling state) equal the
//    memory estimator's for fp8;
//  - fp8 against bf16 on the demo GPT stays within a stated band;
//  - FSDP's fp8 all-gather (enable_fsdp_float8_all_gather, AO) changes no number and moves
//    fewer bytes, for a GPT and a Llama, FULL_SHARD, SHARD_GRAD_OP and activation checkpointing.

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include "tests/common/recipe_run.h"

#include "engine/estimate/memory_estimate.h"
#include "engine/recipe/recipe.h"

#include <cmath>

namespace testing = shardscope::testing;

namespace {

const QString kPython = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/.venv/bin/python");
const QString kReference = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/tests/tools/ddp_reference.py");

// Four linear layers: 16x32 (first, kept), 32x32, 32x32 (fp8), 32x1 (last, kept).
const char* kMlpRecipe = "name: fp8-mlp\n"
                         "seed: 7\n"
                         "model: {type: mlp, input_dim: 16, hidden_dim: 32, depth: 3, output_dim: 1}\n"
                         "data: {type: synthetic_regression, num_samples: 512, noise: 0.1, eval_fraction: 0}\n"
                         "optimizer: {type: sgd, lr: 0.05}\n"
                         "training: {per_device_batch_size: 8, max_steps: 20}\n";

// Transformer Engine's delayed scaling with a history shorter than the run (the ring wraps), the
// max over it, a margin and a scale update every other call.
QString teConfig(int ranks)
{
    return QStringLiteral("compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nmixed_precision: fp8\n"
                          "num_machines: 1\nnum_processes: %1\nuse_cpu: true\nfp8_config:\n  backend: TE\n"
                          "  amax_history_len: 4\n  amax_compute_algo: max\n  margin: 1\n  interval: 2\n")
        .arg(ranks);
}

// FSDP FULL_SHARD on the CPU engine with fp8's default recipe (AO, tensorwise).
QString fsdpConfig(int ranks)
{
    return QStringLiteral("compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nmixed_precision: fp8\n"
                          "num_machines: 1\nnum_processes: %1\nuse_cpu: true\nfsdp_config:\n"
                          "  fsdp_sharding_strategy: FULL_SHARD\n  fsdp_auto_wrap_policy: NO_WRAP\n")
        .arg(ranks);
}

// Every eval event's loss, in order.
QVector<double> evalLosses(const testing::RecipeRun& run)
{
    QVector<double> losses;
    for (const auto& e : run.events)
        if (e["type"].toString() == "eval")
            losses.push_back(e["loss"].toDouble());
    return losses;
}

// Bytes rank 0's steps all-gathered, summed over the run.
double allGatheredBytes(const testing::RecipeRun& run)
{
    double bytes = 0;
    for (const auto& e : run.events)
        if (e["type"].toString() == "step" && e["rank"].toInt() == 0)
            bytes += e["comm"].toObject()["all_gather"].toDouble();
    return bytes;
}

QStringList logs(const testing::RecipeRun& run)
{
    QStringList messages;
    for (const auto& e : run.events)
        if (e["type"].toString() == "log")
            messages << e["message"].toString();
    return messages;
}

QJsonObject lastStepMemory(const testing::RecipeRun& run)
{
    QJsonObject mem;
    for (const auto& e : run.events)
        if (e["type"].toString() == "step" && e["rank"].toInt() == 0)
            mem = e["mem"].toObject();
    return mem;
}

} // namespace

class TestFloat8Training : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { QVERIFY(m_dir.isValid()); }

    void matchesPytorchBitForBit_data()
    {
        QTest::addColumn<bool>("delayed");
        QTest::addColumn<int>("ranks");
        QTest::addColumn<bool>("fsdp");
        QTest::newRow("tensorwise, 1 rank") << false << 1 << false;
        QTest::newRow("tensorwise, 2 ranks") << false << 2 << false;
        QTest::newRow("delayed, 1 rank") << true << 1 << false;
        QTest::newRow("delayed, 2 ranks") << true << 2 << false;
        // FSDP all-gathers the fp8 layers' weights in e4m3 (AO's default), each rank's part
        // quantized with the whole weight's scale: the same numbers as DDP's.
        QTest::newRow("tensorwise, 2 ranks, FSDP FULL_SHARD") << false << 2 << true;
    }
    void matchesPytorchBitForBit()
    {
        QFETCH(bool, delayed);
        QFETCH(int, ranks);
        QFETCH(bool, fsdp);
        if (!QFile::exists(kPython))
            QSKIP("no project Python environment (.venv); run ./scripts/setup.sh");
        const QString name =
            QStringLiteral("ref-%1-%2%3").arg(delayed ? "delayed" : "tensorwise").arg(ranks).arg(fsdp ? "-fsdp" : "");
        const QString initial = m_dir.path() + "/" + name + "-init.safetensors";
        QStringList launchArgs;
        QStringList workerArgs{"--dump-initial", initial};
        if (delayed || fsdp) {
            const QString config = m_dir.path() + "/" + name + "-config.yaml";
            QFile file(config);
            QVERIFY(file.open(QIODevice::WriteOnly));
            file.write((fsdp ? fsdpConfig(ranks) : teConfig(ranks)).toUtf8());
            file.close();
            launchArgs << "--config_file" << config;
        } else {
            workerArgs << "--mixed_precision"
                       << "fp8";
        }
        const auto ours = testing::launchRecipe(m_dir.path(), name, kMlpRecipe, ranks, launchArgs, workerArgs);
        QVERIFY2(ours.exitCode == 0, qPrintable(ours.output));
        const QString converted = logs(ours).filter("fp8: ").join('\n');
        QVERIFY2(converted.contains("2 of 4 linear layers run their matmuls in fp8")
                     && converted.contains("kept in bf16: layers.0 (first), layers.3 (last)"),
                 qPrintable(converted));
        QVERIFY2(converted.contains(delayed ? "delayed scaling (fp8_config.backend TE: HYBRID, amax_history_len 4, "
                                              "amax_compute_algo max, margin 1, interval 2)"
                                            : "tensorwise dynamic scaling"),
                 qPrintable(converted));
        QVERIFY2(ours.output.contains("emulated"), qPrintable(ours.output));

        QStringList args{kReference,
                         "--recipe",
                         m_dir.path() + "/" + name + ".yaml",
                         "--initial",
                         initial,
                         "--ranks",
                         QString::number(ranks),
                         "--out",
                         m_dir.path() + "/" + name + ".json",
                         "--mixed-precision",
                         "fp8"};
        if (delayed)
            args << "--fp8"
                 << "delayed"
                 << "--fp8-history"
                 << "4"
                 << "--fp8-algo"
                 << "max"
                 << "--fp8-margin"
                 << "1"
                 << "--fp8-interval"
                 << "2";
        QProcess python;
        python.setProcessChannelMode(QProcess::MergedChannels);
        python.start(kPython, args);
        QVERIFY(python.waitForFinished(300000));
        QVERIFY2(python.exitCode() == 0, python.readAll().constData());
        QFile file(m_dir.path() + "/" + name + ".json");
        QVERIFY(file.open(QIODevice::ReadOnly));
        QVector<double> reference;
        for (const auto v : QJsonDocument::fromJson(file.readAll()).object()["losses"].toArray())
            reference.push_back(v.toDouble());
        const QVector<double> losses = testing::rankZeroLosses(ours);
        QCOMPARE(losses.size(), 20);
        QCOMPARE(reference.size(), 20);
        for (int i = 0; i < losses.size(); ++i)
            QVERIFY2(losses[i] == reference[i], qPrintable(QStringLiteral("step %1: ours %2, PyTorch's %3")
                                                               .arg(i + 1)
                                                               .arg(losses[i], 0, 'g', 17)
                                                               .arg(reference[i], 0, 'g', 17)));
        QVERIFY2(losses.back() < losses.front(), "the fp8 MLP does not learn");
    }

    // Bytes per rank of parameters, gradients, optimizer state and the fp8 scaling state, as the
    // step events report them, equal the estimator's for fp8 (DDP: autocast over fp32 states).
    void memoryMatchesTheEstimate_data()
    {
        QTest::addColumn<bool>("delayed");
        QTest::newRow("tensorwise") << false;
        QTest::newRow("delayed") << true;
    }
    void memoryMatchesTheEstimate()
    {
        QFETCH(bool, delayed);
        const QString name = delayed ? "mem-delayed" : "mem-tensorwise";
        const char* recipeText = "name: mem\nmodel: {type: mlp, input_dim: 32, hidden_dim: 64, depth: 3, output_dim: 1}\n"
                                 "data: {type: synthetic_regression, num_samples: 512}\noptimizer: {type: adamw, lr: 0.001}\n"
                                 "training: {per_device_batch_size: 8, max_steps: 2}\n";
        QStringList launchArgs, workerArgs;
        if (delayed) {
            QFile file(m_dir.path() + "/" + name + "-config.yaml");
            QVERIFY(file.open(QIODevice::WriteOnly));
            file.write(teConfig(2).toUtf8());
            file.close();
            launchArgs << "--config_file" << file.fileName();
        } else {
            workerArgs << "--mixed_precision"
                       << "fp8";
        }
        const auto run = testing::launchRecipe(m_dir.path(), name, recipeText, 2, launchArgs, workerArgs);
        QVERIFY2(run.exitCode == 0, qPrintable(run.output));
        auto recipe = shardscope::config::parseRecipe(recipeText, "mem.yaml");
        QVERIFY(recipe.ok());
        shardscope::config::ModelStateLayout ddp;
        ddp.shardRanks = 2;
        ddp.autocast = true;
        const auto shape = shardscope::config::modelShapeOf(*recipe);
        QCOMPARE(shape.fp8Linears, 2);
        const auto estimate = shardscope::config::estimateMemory(shape, shardscope::config::PrecisionMode::Fp8, ddp,
                                                                 shardscope::config::OptimizerKind::Adam, {delayed, 4});
        const QJsonObject mem = lastStepMemory(run);
        QCOMPARE(double(mem["params"].toInteger()), estimate.parameters);
        QCOMPARE(double(mem["grads"].toInteger()), estimate.gradients);
        QCOMPARE(double(mem["optimizer"].toInteger()), estimate.optimizer);
        QCOMPARE(double(mem["fp8_scaling"].toInteger()), estimate.fp8Scaling);
        QCOMPARE(estimate.fp8Scaling, delayed ? 2 * 3 * 4.0 * (4 + 1) : 0.0); // 2 layers x 3 operands x (scale + 4 amaxes)
    }

    // fp8 against bf16 on the demo GPT (n_embd 128: 14 of 16 linear layers in fp8), 1 rank, 60
    // steps of the demo recipe: the mean loss of the last 10 steps within 5 % of bf16's, and every
    // step's loss within 10 % (docs/PRECISION.md has the 300-step curves, scripts/precision-table.sh).
    void fp8StaysWithinTheBandOfBf16()
    {
        QFile demo(QStringLiteral(SHARDSCOPE_SOURCE_DIR "/resources/recipes/demo-gpt.yaml"));
        QVERIFY(demo.open(QIODevice::ReadOnly));
        const QString recipe = QString::fromUtf8(demo.readAll());
        // One intra-op thread: a rank with two on CI's two cores, beside another test's ranks, spent
        // its time waiting at OpenMP barriers (19 s alone, 99 s beside two busy threads, over 300 s
        // in a CI run); one thread only shares the cores.
        const auto bf16 = testing::launchRecipe(m_dir.path(), "band-bf16", recipe, 1, {"--max_steps", "60"},
                                                {"--mixed_precision", "bf16", "--threads", "1"}, 600000);
        const auto fp8 = testing::launchRecipe(m_dir.path(), "band-fp8", recipe, 1, {"--max_steps", "60"},
                                               {"--mixed_precision", "fp8", "--threads", "1"}, 600000);
        QVERIFY2(bf16.exitCode == 0, qPrintable(bf16.output));
        QVERIFY2(fp8.exitCode == 0, qPrintable(fp8.output));
        QVERIFY2(logs(fp8).filter("14 of 16 linear layers run their matmuls in fp8").size() == 1,
                 qPrintable(logs(fp8).join('\n')));
        const auto a = testing::rankZeroLosses(bf16), b = testing::rankZeroLosses(fp8);
        QCOMPARE(a.size(), 60);
        QCOMPARE(b.size(), 60);
        double meanA = 0, meanB = 0, worst = 0;
        for (int i = 0; i < 60; ++i) {
            worst = std::max(worst, std::abs(b[i] - a[i]) / a[i]);
            if (i >= 50) {
                meanA += a[i] / 10;
                meanB += b[i] / 10;
            }
        }
        QVERIFY2(std::abs(meanB - meanA) / meanA <= 0.05,
                 qPrintable(QStringLiteral("last 10 steps: fp8 %1, bf16 %2").arg(meanB).arg(meanA)));
        QVERIFY2(worst <= 0.10, qPrintable(QStringLiteral("a step differs by %1").arg(worst)));
        QVERIFY2(meanB < 0.8 * b.front(), qPrintable(QStringLiteral("fp8 does not learn: %1 -> %2").arg(b.front()).arg(meanB)));
    }

    // FSDP's fp8 all-gather: each rank quantizes its part of each fp8 weight with the whole
    // weight's scale and the bytes are gathered in e4m3. Against the same run gathering in fp32
    // (enable_fsdp_float8_all_gather: false), every loss, training and evaluation, is the same
    // bit for bit, the units' all-gathers move fewer bytes, and the log says what was gathered so.
    void fsdpFloat8AllGatherChangesNoNumber_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("fsdp");
        QTest::addColumn<int>("float8Weights"); // the linear layers but the model's first and last
        const QString gpt = "{type: gpt, vocab_size: 256, n_layer: 2, n_embd: 64, n_head: 4, block_size: 32}";
        const QString llama = "{type: llama, vocab_size: 256, block_size: 32, hidden_size: 64, intermediate_size: 128, "
                              "num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2}";
        QTest::newRow("gpt, FULL_SHARD") << gpt << "fsdp_sharding_strategy: FULL_SHARD" << 6;
        QTest::newRow("gpt, SHARD_GRAD_OP, prefetch")
            << gpt
            << "fsdp_sharding_strategy: SHARD_GRAD_OP\n  fsdp_forward_prefetch: true\n  fsdp_backward_prefetch: BACKWARD_PRE"
            << 6;
        QTest::newRow("gpt, FULL_SHARD, activation checkpointing")
            << gpt << "fsdp_sharding_strategy: FULL_SHARD\n  fsdp_activation_checkpointing: true" << 6;
        QTest::newRow("llama (GQA), FULL_SHARD") << llama << "fsdp_sharding_strategy: FULL_SHARD" << 13;
    }
    void fsdpFloat8AllGatherChangesNoNumber()
    {
        QFETCH(QString, model);
        QFETCH(QString, fsdp);
        QFETCH(int, float8Weights);
        const QString recipe = "name: fp8-gather\nseed: 3\nmodel: " + model
                               + "\ndata: {type: text, eval_fraction: 0.1}\noptimizer: {type: adamw, lr: 0.002}\n"
                                 "training: {per_device_batch_size: 4, max_steps: 6, eval_every: 3, max_grad_norm: 1.0}\n";
        const QString tag = QString::fromLatin1(QTest::currentDataTag()).replace(QRegularExpression("[^a-zA-Z0-9]+"), "-");
        testing::RecipeRun runs[2];
        for (int fp8Gather = 0; fp8Gather < 2; ++fp8Gather) {
            const QString name = "gather-" + tag + (fp8Gather ? "-fp8" : "-fp32");
            QFile file(m_dir.path() + "/" + name + "-config.yaml");
            QVERIFY(file.open(QIODevice::WriteOnly));
            file.write(QStringLiteral("compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nmixed_precision: fp8\n"
                                      "num_machines: 1\nnum_processes: 2\nuse_cpu: true\nfsdp_config:\n"
                                      "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n  %1\n"
                                      "fp8_config:\n  backend: AO\n  enable_fsdp_float8_all_gather: %2\n")
                           .arg(fsdp, fp8Gather ? "true" : "false")
                           .toUtf8());
            file.close();
            runs[fp8Gather] = testing::launchRecipe(m_dir.path(), name, recipe, 2, {"--config_file", file.fileName()}, {});
            QVERIFY2(runs[fp8Gather].exitCode == 0, qPrintable(runs[fp8Gather].output));
        }
        const auto& [full, fp8] = runs;
        const QStringList said = logs(fp8).filter("all-gathered in fp8");
        QVERIFY2(!said.isEmpty() && said.front().contains("sharding: 3 units")
                     && said.front().contains(QStringLiteral("; %1 fp8 weights").arg(float8Weights)),
                 qPrintable(logs(fp8).join('\n')));
        QVERIFY2(logs(full).filter("all-gathered in fp8").isEmpty(), qPrintable(logs(full).join('\n')));
        const QVector<double> a = testing::rankZeroLosses(full), b = testing::rankZeroLosses(fp8);
        QCOMPARE(a.size(), 6);
        QCOMPARE(b, a);
        QVERIFY(!evalLosses(fp8).isEmpty());
        QCOMPARE(evalLosses(fp8), evalLosses(full));
        // The blocks' fp8 weights (all their linear layers but the model's first) make most of
        // the bytes: e4m3 quarters them. The root unit's embeddings and norms still travel in fp32.
        const double ratio = allGatheredBytes(fp8) / allGatheredBytes(full);
        qInfo("all-gathered bytes over the run, rank 0: %.0f in fp8, %.0f in fp32 (%.3f)", allGatheredBytes(fp8),
              allGatheredBytes(full), ratio);
        QVERIFY2(ratio > 0.25 && ratio < 0.8, qPrintable(QStringLiteral("all-gathered bytes, fp8 / fp32: %1").arg(ratio)));
    }

private:
    QTemporaryDir m_dir;
};

QTEST_GUILESS_MAIN(TestFloat8Training)
#include "tst_float8_training.moc"
