// A Hugging Face Llama (GQA, from a folder transformers saved: tests/tools/hf_decoder_reference.py)
// trained for real through `shardscope launch` on 2 Gloo ranks with accumulation and clipping:
// DDP, FSDP FULL_SHARD (wrapping LlamaDecoderLayer, the model's own class, as Accelerate does
// when the config names none) and ZeRO-3 each give, step for step, the losses PyTorch's own
// DistributedDataParallel gives training transformers' LlamaForCausalLM on the same data order
// from the same weights (tests/tools/ddp_reference.py), within 1e-5. Also: a wrap class the
// model lacks is refused by name, and a recipe the engine cannot run as transformers would is
// refused before any rank starts.

#include "tests/common/demo_recipes.h"
#include "tests/common/recipe_run.h"
#include "tests/common/safetensors_reader.h"
#include "tests/common/python_tool.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

namespace testing = shardscope::testing;

namespace {

const QString kPython = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/.venv/bin/python");
const QString kTools = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/tests/tools/");

// Runs a tests/tools script on the project venv: its standard output, or empty with the reason.
using testing::runTool;

// PyTorch DDP's per-step losses for the recipe file, from our initial weights (ddp_reference.py).
QVector<double> pytorchDdpLosses(const QString& recipePath, const QString& initial, QString& why)
{
    const QString out = recipePath + ".reference.json";
    runTool({kTools + "ddp_reference.py", "--recipe", recipePath, "--initial", initial, "--ranks", "2", "--out", out}, why);
    if (!why.isEmpty())
        return {};
    QFile file(out);
    QVector<double> losses;
    if (file.open(QIODevice::ReadOnly))
        for (const auto v : QJsonDocument::fromJson(file.readAll()).object()["losses"].toArray())
            losses.push_back(v.toDouble());
    return losses;
}

// The engine's logits of a model folder on the demo text (shardscope-worker logits); the file
// written, or empty with the reason.
QString engineLogits(const QString& recipePath, const QString& weights, QString& why)
{
    const QString out = recipePath + ".logits.safetensors";
    QProcess worker;
    worker.setProcessChannelMode(QProcess::MergedChannels);
    worker.start(QStringLiteral(SHARDSCOPE_BINARY_DIR "/app/shardscope-worker"),
                 {"logits", "--recipe", recipePath, "--weights", weights, "--input",
                  QStringLiteral(SHARDSCOPE_SOURCE_DIR "/resources/data/demo.txt"), "--out", out});
    if (!worker.waitForFinished(60000) || worker.exitCode() != 0) {
        why = "shardscope-worker logits failed: " + QString::fromUtf8(worker.readAll());
        return {};
    }
    return out;
}

} // namespace

class TestDecoderTraining : public QObject {
    Q_OBJECT

private:
    QTemporaryDir m_dir;
    QString m_model;
    QVector<double> m_reference;

    QString recipe(int blockSize = 16) const
    {
        return QStringLiteral("name: llama\n"
                              "seed: 5\n"
                              "model: {pretrained: '%1', block_size: %2}\n"
                              "data: {type: text}\n"
                              "optimizer: {type: adamw, lr: 0.002, weight_decay: 0.01}\n"
                              "schedule: {type: cosine, warmup_steps: 2}\n"
                              "training: {per_device_batch_size: 4, gradient_accumulation_steps: 2, max_steps: 20, "
                              "max_grad_norm: 1.0}\n")
            .arg(m_model)
            .arg(blockSize);
    }

    // The run's 20 losses (rank 0's, the mean over ranks) and gradient norms against a
    // ddp_reference.py result file, within 1e-5 relative.
    void matchesReference(const testing::RecipeRun& run, const QString& out, const QString& what) const
    {
        QFile result(out);
        QVERIFY(result.open(QIODevice::ReadOnly));
        const QJsonObject reference = QJsonDocument::fromJson(result.readAll()).object();
        QVector<double> referenceLosses, referenceNorms, norms;
        for (const auto v : reference["losses"].toArray())
            referenceLosses.push_back(v.toDouble());
        for (const auto v : reference["grad_norms"].toArray())
            referenceNorms.push_back(v.toDouble());
        for (const auto& e : run.events)
            if (e["type"] == "step" && e["rank"] == 0)
                norms.push_back(e["grad_norm"].toDouble());
        QCOMPARE(referenceLosses.size(), 20);
        QCOMPARE(norms.size(), 20);
        const double lossDiff = testing::maxRelativeDifference(testing::rankZeroLosses(run), referenceLosses);
        const double normDiff = testing::maxRelativeDifference(norms, referenceNorms);
        qInfo("%s: losses %.2e, gradient norms %.2e", qPrintable(what), lossDiff, normDiff);
        QVERIFY2(lossDiff <= 1e-5, qPrintable(QStringLiteral("losses differ by %1").arg(lossDiff)));
        QVERIFY2(normDiff <= 1e-5, qPrintable(QStringLiteral("gradient norms differ by %1").arg(normDiff)));
    }

    // The folder of one hf_decoder_reference.py case (llama_gqa, qwen2_bias, mistral_linear),
    // made on first use; empty with the reason in `why` when it could not be.
    QString familyFolder(const QString& family, QString& why) const
    {
        const QString folder = m_dir.path() + "/models/" + family;
        if (!QFile::exists(folder + "/config.json"))
            runTool({kTools + "hf_decoder_reference.py", "--out", m_dir.path() + "/models", "--case", family}, why);
        return why.isEmpty() ? folder : QString();
    }

    // An Accelerate config of dp_shard_size `shard` x tp_size `tp` on CPU ranks: FSDP2 over
    // dp_shard (2D), or tp alone under MULTI_GPU (Accelerate runs both so with use_cpu). Its path,
    // or empty when it could not be written.
    QString writeTensorParallelConfig(const QString& name, int shard, int tp) const
    {
        const QString path = m_dir.path() + "/" + name + "-accelerate.yaml";
        QFile file(path);
        if (!file.open(QIODevice::WriteOnly))
            return {};
        const QString head =
            QStringLiteral("compute_environment: LOCAL_MACHINE\nnum_processes: %1\nuse_cpu: true\n").arg(shard * tp);
        const QString mesh = QStringLiteral("parallelism_config:\n  parallelism_config_tp_size: %1\n").arg(tp);
        const QString text = shard > 1 ? head + "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n" + mesh
                                             + QStringLiteral("  parallelism_config_dp_shard_size: %1\n").arg(shard)
                                       : head + "distributed_type: MULTI_GPU\n" + mesh;
        return file.write(text.toUtf8()) > 0 ? path : QString();
    }

    QVector<double> m_loraLosses;

    QString loraRecipe() const
    {
        return QStringLiteral("name: lora\n"
                              "seed: 9\n"
                              "model:\n"
                              "  pretrained: '%1'\n"
                              "  block_size: 16\n"
                              "  lora: {r: 4, alpha: 8, target_modules: [q_proj, v_proj, down_proj]}\n"
                              "data: {type: text}\n"
                              "optimizer: {type: adamw, lr: 0.01}\n"
                              "training: {per_device_batch_size: 4, gradient_accumulation_steps: 2, max_steps: 10, "
                              "max_grad_norm: 1.0}\n"
                              "export: {merge_lora: true}\n")
            .arg(m_model);
    }

private slots:
    void initTestCase()
    {
        if (!QFile::exists(kPython))
            QSKIP("no project Python environment (.venv); run ./scripts/setup.sh");
        QVERIFY(m_dir.isValid());
        QProcess make;
        make.setProcessChannelMode(QProcess::MergedChannels);
        make.start(kPython, {kTools + "hf_decoder_reference.py", "--out", m_dir.path() + "/models", "--case", "llama_gqa"});
        QVERIFY(make.waitForFinished(300000));
        QVERIFY2(make.exitCode() == 0, make.readAll().right(3000).constData());
        m_model = m_dir.path() + "/models/llama_gqa";

        // Our DDP, with its initial weights written out for the reference.
        const QString initial = m_dir.path() + "/initial.safetensors";
        const auto ours = testing::launchRecipe(m_dir.path(), "ddp", recipe(), 2, {}, {"--dump-initial", initial});
        QVERIFY2(ours.exitCode == 0, qPrintable(ours.output));
        QString why;
        m_reference = pytorchDdpLosses(m_dir.path() + "/ddp.yaml", initial, why);
        QVERIFY2(why.isEmpty(), qPrintable(why));
        QCOMPARE(m_reference.size(), 20);
        const auto losses = testing::rankZeroLosses(ours);
        const double diff = testing::maxRelativeDifference(losses, m_reference);
        qInfo("DDP vs PyTorch DDP: loss %.6f -> %.6f (reference %.6f -> %.6f), max relative difference %.2e", losses.front(),
              losses.back(), m_reference.front(), m_reference.back(), diff);
        QVERIFY2(diff <= 1e-5,
                 qPrintable(QStringLiteral("our DDP differs from PyTorch DDP on LlamaForCausalLM by %1").arg(diff)));
        QVERIFY2(losses.back() < losses.front() - 0.1, "the Llama did not learn");
    }

    void shardedTrainingMatchesPytorch_data()
    {
        QTest::addColumn<QStringList>("strategy");
        QTest::newRow("FULL_SHARD") << QStringList{"--fsdp_sharding_strategy", "FULL_SHARD"};
        QTest::newRow("FULL_SHARD, activation checkpointing")
            << QStringList{"--fsdp_sharding_strategy", "FULL_SHARD", "--fsdp_activation_checkpointing"};
        QTest::newRow("ZeRO-3") << QStringList{"--zero_stage", "3"};
        QTest::newRow("SHARD_GRAD_OP") << QStringList{"--fsdp_sharding_strategy", "SHARD_GRAD_OP"};
        QTest::newRow("FULL_SHARD, offload") << QStringList{"--fsdp_sharding_strategy", "FULL_SHARD", "--fsdp_offload_params"};
        QTest::newRow("FULL_SHARD, cpu_ram_efficient_loading")
            << QStringList{"--fsdp_sharding_strategy", "FULL_SHARD", "--fsdp_cpu_ram_efficient_loading"};
        QTest::newRow("ZeRO-2, optimizer offload") << QStringList{"--zero_stage", "2", "--offload_optimizer_device", "cpu"};
    }

    void shardedTrainingMatchesPytorch()
    {
        QFETCH(QStringList, strategy);
        const QString name = QString(QTest::currentDataTag()).replace(QRegularExpression("[^A-Za-z0-9]"), "_");
        const auto run = testing::launchRecipe(m_dir.path(), name, recipe(), 2, {}, strategy);
        QVERIFY2(run.exitCode == 0, qPrintable(run.output));
        const double diff = testing::maxRelativeDifference(testing::rankZeroLosses(run), m_reference);
        qInfo("%s vs PyTorch DDP: max relative difference %.2e", qPrintable(name), diff);
        QVERIFY2(diff <= 1e-5, qPrintable(QStringLiteral("%1 differs from PyTorch DDP by %2").arg(name).arg(diff)));
        // The layers were units of their own, not one root unit.
        bool layersWrapped = false;
        for (const auto& e : run.events)
            layersWrapped = layersWrapped || (e["type"] == "log" && e["message"].toString().contains("3 units"));
        QVERIFY2(layersWrapped, qPrintable(run.output));

        // The export, gathered from the shards, loads in transformers and computes what the
        // engine computes from it.
        if (strategy != QStringList{"--zero_stage", "3"})
            return;
        const QString exportDir = run.runDir + "/export";
        QString why;
        const QString logits = engineLogits(m_dir.path() + "/" + name + ".yaml", exportDir, why);
        QVERIFY2(!logits.isEmpty(), qPrintable(why));
        const auto report = QJsonDocument::fromJson(
                                runTool({kTools + "hf_decoder_reference.py", "--check-export", exportDir, "--reference", logits},
                                        why))
                                .object();
        QVERIFY2(why.isEmpty(), qPrintable(why));
        QCOMPARE(report["class"].toString(), QStringLiteral("LlamaForCausalLM"));
        QVERIFY2(report["max_logit_difference"].toDouble(1.0) <= 1e-5, qPrintable(QJsonDocument(report).toJson()));
    }

    // #46: HSDP from parallelism_config (dp_replicate_size 2 x dp_shard_size 2, 4 ranks) trains
    // transformers' model of each family as PyTorch's own fully_shard does over Accelerate's own device
    // mesh for the same sizes (ddp_reference.py --hsdp 2,2: ParallelismConfig.get_device_mesh),
    // from the same weights on the same data: 20 steps, losses and gradient norms within 1e-5.
    void hsdpMatchesFullyShardOnAcceleratesMesh_data()
    {
        QTest::addColumn<QString>("family");
        QTest::newRow("llama") << "llama_gqa";
        QTest::newRow("qwen2") << "qwen2_bias";
        QTest::newRow("mistral") << "mistral_linear";
    }
    void hsdpMatchesFullyShardOnAcceleratesMesh()
    {
        QFETCH(QString, family);
        QString made;
        const QString folder = familyFolder(family, made);
        QVERIFY2(made.isEmpty(), qPrintable(made));
        const QString name = "hsdp-" + family;
        const QString config = m_dir.path() + "/" + name + "-accelerate.yaml";
        QVERIFY(shardscope::testing::writeHsdpConfig(config));
        const QString initial = m_dir.path() + "/" + name + "-initial.safetensors";
        QString recipeText = recipe();
        recipeText.replace(m_model, folder);
        const auto run = testing::launchRecipe(m_dir.path(), name, recipeText, 4, {"--config_file", config},
                                               {"--dump-initial", initial});
        QVERIFY2(run.exitCode == 0, qPrintable(run.output));
        QString why;
        const QString out = m_dir.path() + "/" + name + ".reference.json";
        runTool({kTools + "ddp_reference.py", "--recipe", m_dir.path() + "/" + name + ".yaml", "--initial", initial, "--ranks",
                 "4", "--hsdp", "2,2", "--out", out},
                why);
        QVERIFY2(why.isEmpty(), qPrintable(why));
        matchesReference(run, out, family + ": HSDP 2 x 2 vs fully_shard on Accelerate's mesh");
    }

    // #46: tensor parallelism against PyTorch's own: the same Accelerate config's mesh, the
    // projections split with parallelize_module's ColwiseParallel / RowwiseParallel on the
    // transformers model of each family, FSDP2 over dp_shard in 2D (ddp_reference.py --tp); 20
    // steps with accumulation and clipping, the same losses and gradient norms within 1e-5. The
    // engine's initial weights are dumped gathered whole across the split, so the gather is held
    // to the reference too.
    void tensorParallelMatchesParallelizeModule_data()
    {
        QTest::addColumn<QString>("family");
        QTest::addColumn<int>("shard");
        QTest::newRow("llama tp 2") << "llama_gqa" << 1;
        QTest::newRow("qwen2 tp 2") << "qwen2_bias" << 1;
        QTest::newRow("mistral tp 2") << "mistral_linear" << 1;
        QTest::newRow("llama dp_shard 2 x tp 2") << "llama_gqa" << 2;
        QTest::newRow("qwen2 dp_shard 2 x tp 2") << "qwen2_bias" << 2;
        QTest::newRow("mistral dp_shard 2 x tp 2") << "mistral_linear" << 2;
    }
    void tensorParallelMatchesParallelizeModule()
    {
        QFETCH(QString, family);
        QFETCH(int, shard);
        const int tp = 2, ranks = shard * tp;
        QString made;
        const QString folder = familyFolder(family, made);
        QVERIFY2(made.isEmpty(), qPrintable(made));
        const QString name = QStringLiteral("tp-%1-%2").arg(family).arg(shard);
        const QString config = writeTensorParallelConfig(name, shard, tp);
        QVERIFY(!config.isEmpty());
        QString recipeText = recipe();
        recipeText.replace(m_model, folder);
        const QString initial = m_dir.path() + "/" + name + "-initial.safetensors";
        const auto run = testing::launchRecipe(m_dir.path(), name, recipeText, ranks, {"--config_file", config},
                                               {"--dump-initial", initial});
        QVERIFY2(run.exitCode == 0, qPrintable(run.output));
        QString why;
        const QString out = m_dir.path() + "/" + name + ".reference.json";
        runTool({kTools + "ddp_reference.py", "--recipe", m_dir.path() + "/" + name + ".yaml", "--initial", initial, "--ranks",
                 QString::number(ranks), "--tp", QStringLiteral("%1,%2").arg(shard).arg(tp), "--out", out},
                why);
        QVERIFY2(why.isEmpty(), qPrintable(why));
        matchesReference(run, out, name + " vs parallelize_module");
    }

    // #46: checkpoints and the Hugging Face export across tp sizes. With one data-parallel
    // position, tp 2 on 2 ranks trains what one process trains: the same losses, and exports of
    // the same weights (each gathered whole). A FULL_STATE_DICT checkpoint of either resumes in
    // the other (the model and the optimizer state sliced or joined on loading) and continues its
    // losses.
    void tensorParallelCheckpointsAndExportsAcrossSizes()
    {
        const QString recipeText = recipe().replace("max_grad_norm: 1.0}", "max_grad_norm: 1.0, checkpoint_every: 10}");
        const QString config = writeTensorParallelConfig("tp-resume", 1, 2);
        QVERIFY(!config.isEmpty());
        const auto split = testing::launchRecipe(m_dir.path(), "tp-resume-split", recipeText, 2, {"--config_file", config});
        QVERIFY2(split.exitCode == 0, qPrintable(split.output));
        const auto whole = testing::launchRecipe(m_dir.path(), "tp-resume-whole", recipeText, 1);
        QVERIFY2(whole.exitCode == 0, qPrintable(whole.output));
        const auto splitLosses = testing::rankZeroLosses(split), wholeLosses = testing::rankZeroLosses(whole);
        QCOMPARE(splitLosses.size(), 20);
        QVERIFY(testing::maxRelativeDifference(splitLosses, wholeLosses) <= 1e-5);
        const auto splitExport = testing::readFloatSafetensors(split.runDir + "/export/model.safetensors");
        const auto wholeExport = testing::readFloatSafetensors(whole.runDir + "/export/model.safetensors");
        QVERIFY(!wholeExport.empty());
        QCOMPARE(splitExport.size(), wholeExport.size());
        double largest = 0;
        for (const auto& [name, values] : wholeExport) {
            const auto it = splitExport.find(name);
            QVERIFY2(it != splitExport.end() && it->second.size() == values.size(), qPrintable(name));
            for (int i = 0; i < values.size(); ++i)
                largest = std::max(largest, double(std::abs(it->second[i] - values[i])));
        }
        qInfo("export of tp 2 vs one process: largest weight difference %.2e", largest);
        QVERIFY2(largest <= 1e-5, qPrintable(QString::number(largest)));

        const auto toWhole = testing::launchRecipe(m_dir.path(), "tp-resume-to-whole", recipeText, 1,
                                                   {"--resume_from_checkpoint", split.runDir + "/checkpoints/step_10"});
        QVERIFY2(toWhole.exitCode == 0, qPrintable(toWhole.output));
        const auto toSplit = testing::launchRecipe(
            m_dir.path(), "tp-resume-to-split", recipeText, 2,
            {"--config_file", config, "--resume_from_checkpoint", whole.runDir + "/checkpoints/step_10"});
        QVERIFY2(toSplit.exitCode == 0, qPrintable(toSplit.output));
        for (const auto* resumed : {&toWhole, &toSplit}) {
            const auto losses = testing::rankZeroLosses(*resumed);
            QCOMPARE(losses.size(), 10);
            QVERIFY2(testing::maxRelativeDifference(losses, splitLosses.mid(10)) <= 1e-5, qPrintable(resumed->output));
        }
        bool said = false;
        for (const auto& e : toSplit.events)
            said = said || e["message"].toString().contains("resharded the checkpoint from 1 to 2 (tp_size 2) ranks");
        QVERIFY2(said, "the resume says it resharded across tp sizes");
    }

    // #45 point 10: the export of a run on tokenized text carries its tokenizer, so
    // AutoTokenizer.from_pretrained(export) works (it failed: no tokenizer files) and gives the ids
    // of the tokenizer the run trained with. The bundled Llama demo, 10 steps.
    void exportCarriesTheTokenizer()
    {
        QProcess launch;
        launch.setProcessChannelMode(QProcess::MergedChannels);
        launch.start(testing::shardscopeBinary(),
                     {"launch", "--num_processes", "2", "--recipe", SHARDSCOPE_SOURCE_DIR "/resources/recipes/demo-llama.yaml",
                      "--max_steps", "10", "--runs_dir", m_dir.path() + "/runs", "--run_name", "tokenizer-export"});
        QVERIFY(launch.waitForFinished(300000));
        QVERIFY2(launch.exitCode() == 0, launch.readAll().constData());
        const QString exportDir = m_dir.path() + "/runs/tokenizer-export/export";
        QVERIFY(QFile::exists(exportDir + "/tokenizer.json") && QFile::exists(exportDir + "/tokenizer_config.json"));
        QString why;
        const auto report = QJsonDocument::fromJson(runTool({kTools + "hf_decoder_reference.py", "--check-tokenizer", exportDir,
                                                             "--source", SHARDSCOPE_SOURCE_DIR "/resources/tokenizers/demo"},
                                                            why))
                                .object();
        QVERIFY2(why.isEmpty(), qPrintable(why));
        QVERIFY2(report["same_ids"].toBool(), qPrintable(QJsonDocument(report).toJson()));
        QCOMPARE(report["decoded"].toString(), QStringLiteral("The quick brown fox jumps over the lazy dog."));
    }

    // Checkpoints resume exactly, under FSDP as under the demo GPT (bitwise equal losses).
    void resumeIsExact()
    {
        const QString recipeText = recipe().replace("max_grad_norm: 1.0}", "max_grad_norm: 1.0, checkpoint_every: 10}");
        const QStringList strategy{"--fsdp_sharding_strategy", "FULL_SHARD"};
        const auto full = testing::launchRecipe(m_dir.path(), "resume-full", recipeText, 2, {}, strategy);
        QVERIFY2(full.exitCode == 0, qPrintable(full.output));
        const QString checkpoint = full.runDir + "/checkpoints/step_10";
        QVERIFY(QFile::exists(checkpoint + "/manifest.json"));
        const auto resumed = testing::launchRecipe(m_dir.path(), "resume-second-half", recipeText, 2,
                                                   {"--resume_from_checkpoint", checkpoint}, strategy);
        QVERIFY2(resumed.exitCode == 0, qPrintable(resumed.output));
        const auto all = testing::rankZeroLosses(full), second = testing::rankZeroLosses(resumed);
        QCOMPARE(second.size(), 10);
        for (int i = 0; i < 10; ++i)
            QVERIFY2(second[i] == all[10 + i],
                     qPrintable(QStringLiteral("step %1: %2 vs %3").arg(11 + i).arg(second[i]).arg(all[10 + i])));
    }

    // The shipped Llama demo (resources/recipes/demo-llama.yaml): its corpus tokenized at start
    // with the shipped tokenizer (2048 ids, checked against the architecture's vocab_size on the
    // ranks too), packed, and trained; the loss falls from near ln(2048).
    void llamaDemoTrainsOnItsTokenizedCorpus()
    {
        QFile demo(QStringLiteral(SHARDSCOPE_SOURCE_DIR "/resources/recipes/demo-llama.yaml"));
        QVERIFY(demo.open(QIODevice::ReadOnly));
        QString text = QString::fromUtf8(demo.readAll());
        text.replace("../", SHARDSCOPE_SOURCE_DIR "/resources/"); // its paths are its folder's
        const auto run = testing::launchRecipe(m_dir.path(), "demo-llama", text, 2, {"--max_steps", "30"});
        QVERIFY2(run.exitCode == 0, qPrintable(run.output));
        bool described = false;
        for (const auto& e : run.events)
            described = described || (e["type"] == "log" && e["message"].toString().contains("sequences of 64"));
        QVERIFY2(described, "rank 0 logs the data's statistics");
        const auto losses = testing::rankZeroLosses(run);
        QCOMPARE(losses.size(), 30);
        QVERIFY2(std::abs(losses.front() - std::log(2048.0)) < 0.5, qPrintable(QString::number(losses.front())));
        QVERIFY2(losses.back() < losses.front() - 1.0, qPrintable(QString("%1 -> %2").arg(losses.front()).arg(losses.back())));
    }

    // Every precision mode trains the Llama, and a profiled window writes its trace.
    void precisionModesAndProfiling_data()
    {
        QTest::addColumn<QString>("mode");
        QTest::newRow("bf16") << "bf16";
        QTest::newRow("fp16") << "fp16";
        QTest::newRow("bf16-pure") << "bf16-pure";
    }

    void precisionModesAndProfiling()
    {
        QFETCH(QString, mode);
        const auto run = testing::launchRecipe(m_dir.path(), "precision-" + mode, recipe(), 2, {"--mixed_precision", mode},
                                               {"--profile_start_step", "3", "--profile_steps", "2"});
        QVERIFY2(run.exitCode == 0, qPrintable(run.output));
        const auto losses = testing::rankZeroLosses(run);
        QCOMPARE(losses.size(), 20);
        for (double loss : losses)
            QVERIFY(std::isfinite(loss));
        QVERIFY2(losses.back() < losses.front() - 0.1, qPrintable(QStringLiteral("%1 did not learn").arg(mode)));
        // Mixed precision keeps fp32 master weights: within a few percent of fp32's curve.
        if (mode != "bf16-pure")
            QVERIFY2(std::abs(losses.back() - m_reference.back()) < 0.05 * m_reference.back(),
                     qPrintable(QString::number(losses.back())));
        int traces = 0;
        for (const auto& e : run.events)
            traces += e["type"] == "trace";
        QCOMPARE(traces, 2); // one per rank
    }

    // LoRA under DDP, FSDP (use_orig_params, as Accelerate requires for FSDP1) and ZeRO-3: the same
    // losses, base weights bit-identical to the initial ones, and the adapter loads in PEFT.
    void loraTrainsOnlyTheAdapters_data()
    {
        QTest::addColumn<QStringList>("strategy");
        QTest::newRow("DDP") << QStringList{};
        QTest::newRow("FULL_SHARD, use_orig_params")
            << QStringList{"--fsdp_sharding_strategy", "FULL_SHARD", "--fsdp_use_orig_params"};
        QTest::newRow("ZeRO-3") << QStringList{"--zero_stage", "3"};
    }

    void loraTrainsOnlyTheAdapters()
    {
        QFETCH(QStringList, strategy);
        const QString name = "lora_" + QString(QTest::currentDataTag()).replace(QRegularExpression("[^A-Za-z0-9]"), "_");
        const QString initial = m_dir.path() + "/" + name + "-initial.safetensors";
        const QString final = m_dir.path() + "/" + name + "-final.safetensors";
        const auto run = testing::launchRecipe(m_dir.path(), name, loraRecipe(), 2, {},
                                               QStringList{"--dump-initial", initial, "--dump-params", final} + strategy);
        QVERIFY2(run.exitCode == 0, qPrintable(run.output));
        const auto losses = testing::rankZeroLosses(run);
        QCOMPARE(losses.size(), 10);
        if (m_loraLosses.isEmpty()) { // the DDP row, first: also against PyTorch DDP training PEFT's LoRA
            m_loraLosses = losses;
            QString why;
            const auto reference = pytorchDdpLosses(m_dir.path() + "/" + name + ".yaml", initial, why);
            QVERIFY2(why.isEmpty(), qPrintable(why));
            const double peftDiff = testing::maxRelativeDifference(losses, reference);
            qInfo("LoRA under DDP vs PyTorch DDP + PEFT: max relative difference %.2e", peftDiff);
            QVERIFY2(peftDiff <= 1e-5, qPrintable(QStringLiteral("LoRA differs from PyTorch DDP + PEFT by %1").arg(peftDiff)));
        }
        const double diff = testing::maxRelativeDifference(losses, m_loraLosses);
        QVERIFY2(diff <= 1e-5, qPrintable(QStringLiteral("%1 differs from LoRA under DDP by %2").arg(name).arg(diff)));

        const auto before = testing::readFloatSafetensors(initial), after = testing::readFloatSafetensors(final);
        QCOMPARE(after.size(), before.size());
        int adapters = 0;
        for (const auto& [key, values] : before) {
            const bool adapter = key.contains(".lora_");
            adapters += adapter;
            if (!adapter)
                QVERIFY2(after.at(key) == values, qPrintable(key + " changed: base weights must stay frozen"));
            else if (key.contains(".lora_B."))
                QVERIFY2(after.at(key) != values, qPrintable(key + " did not train"));
        }
        QCOMPARE(adapters, 2 * 2 * 3); // A and B, 2 layers, q_proj, v_proj and down_proj

        // The merged export run through the engine, and PEFT on the base with the adapter, agree.
        const QString exportDir = run.runDir + "/export";
        QVERIFY(QFile::exists(exportDir + "/adapter/adapter_config.json"));
        QVERIFY(QFile::exists(exportDir + "/config.json"));
        QString why;
        const QString logits = engineLogits(m_dir.path() + "/" + name + ".yaml", exportDir, why);
        QVERIFY2(!logits.isEmpty(), qPrintable(why));
        const auto report = QJsonDocument::fromJson(
                                runTool({kTools + "hf_decoder_reference.py", "--check-adapter", exportDir + "/adapter", "--base",
                                         m_model, "--engine-logits", logits},
                                        why))
                                .object();
        QVERIFY2(why.isEmpty(), qPrintable(why));
        QVERIFY2(report["keys_missing"].toArray().isEmpty() && report["keys_extra"].toArray().isEmpty(),
                 qPrintable(QJsonDocument(report).toJson()));
        // The merge sums W + BA in another order than PEFT's Wx + B(Ax): fp32 rounding, not 1e-5.
        const double logitDiff = report["max_logit_difference"].toDouble(1.0);
        QVERIFY2(logitDiff <= 1e-4,
                 qPrintable(QStringLiteral("PEFT's logits differ from the merged export's by %1").arg(logitDiff)));
    }

    void loraUnderFsdpWithoutOrigParamsIsRefused()
    {
        const auto run = testing::launchRecipe(m_dir.path(), "lora-flat", loraRecipe(), 2, {},
                                               {"--fsdp_sharding_strategy", "FULL_SHARD"});
        QVERIFY(run.exitCode != 0);
        QVERIFY2(run.output.contains("fsdp_use_orig_params"), qPrintable(run.output));
    }

    void wrapClassTheModelLacksIsNamed()
    {
        const auto run = testing::launchRecipe(
            m_dir.path(), "wrong-class", recipe(), 2, {},
            {"--fsdp_sharding_strategy", "FULL_SHARD", "--fsdp_transformer_layer_cls_to_wrap", "GPTBlock"});
        QVERIFY(run.exitCode != 0);
        QVERIFY2(run.output.contains("GPTBlock") && run.output.contains("LlamaDecoderLayer"), qPrintable(run.output));
    }

    void unsupportedArchitectureIsRefusedBeforeLaunch()
    {
        // 200 tokens exceed the model's 128 positions (default RoPE).
        const auto run = testing::launchRecipe(m_dir.path(), "too-long", recipe(200), 2);
        QVERIFY(run.exitCode != 0);
        QVERIFY2(run.output.contains("max_position_embeddings"), qPrintable(run.output));
        for (const auto& e : run.events)
            QVERIFY2(e["type"] != "step", "a rank trained");
    }
};

QTEST_GUILESS_MAIN(TestDecoderTraining)
#include "tst_decoder_training.moc"
