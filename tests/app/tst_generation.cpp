// Trying the trained model (#45 point 11): `shardscope runs generate` continues a prompt with a
// run's export. The Llama demo, trained 30 steps on two ranks (FSDP FULL_SHARD) and exported, continues a prompt
// greedily as transformers does on the same export (tests/tools/generation_reference.py: the
// prompt's ids are AutoTokenizer's, each token is transformers' most likely one, the text is
// tokenizer.decode's); sampling follows its seed; a run without an export or without a recipe is
// refused with the reason. The same run's evals continue the recipe's eval_prompts (rank 0's
// samples), the last one as `runs generate` does on the export.

#include "tests/common/demo_recipes.h"
#include "tests/common/files.h"
#include "tests/common/python_tool.h"
#include "tests/common/recipe_run.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMap>
#include <QTemporaryDir>
#include <QtTest>

namespace testing = shardscope::testing;

namespace {

const QString kPrompt = QStringLiteral("This program is free software");

// The Llama demo recipe for `steps` steps, with three evals continuing two prompts.
QString llamaDemo(int steps)
{
    QString text = testing::llamaDemoRecipe(steps);
    text.replace("eval_every: 50", QStringLiteral("eval_every: %1\n  eval_sample_tokens: 12\n  eval_prompts: [\"%2\", "
                                                  "\"Everyone is permitted\"]")
                                       .arg(steps / 3)
                                       .arg(kPrompt));
    return text;
}

// The JSON object on the last line of `output`.
QJsonObject lastJsonLine(const QString& output)
{
    const QStringList lines = output.trimmed().split('\n');
    return lines.isEmpty() ? QJsonObject() : QJsonDocument::fromJson(lines.back().toUtf8()).object();
}

} // namespace

class TestGeneration : public QObject {
    Q_OBJECT
private:
    testing::CliRun generate(const QStringList& extra)
    {
        return testing::runShardscope(m_dir.path(), QStringList{"runs", "generate", m_runDir, "--prompt", kPrompt} + extra,
                                      120000);
    }

private slots:
    void initTestCase()
    {
        // Under FULL_SHARD: the evals' samples run on sharded units, gathered by every rank together.
        const auto run = testing::launchRecipe(m_dir.path(), "llama", llamaDemo(30), 2, {},
                                               {"--fsdp_sharding_strategy", "FULL_SHARD"});
        QVERIFY2(run.exitCode == 0, qPrintable(run.output));
        m_runDir = run.runDir;
        QVERIFY(QFile::exists(m_runDir + "/export/config.json"));
    }

    void greedyEqualsTransformers()
    {
        const auto run = generate({"--max_new_tokens", "12", "--json"});
        QVERIFY2(run.exitCode == 0, qPrintable(run.output));
        const QJsonObject engine = lastJsonLine(run.output);
        QCOMPARE(engine["ids"].toArray().size() == 12 || engine["ended_at_eos"].toBool(), true);
        const QString engineFile = m_dir.filePath("greedy.json");
        testing::writeFile(engineFile, QJsonDocument(engine).toJson());
        QString why;
        const QByteArray printed = testing::runTool({testing::toolsDir() + "generation_reference.py", "--export",
                                                     m_runDir + "/export", "--prompt", kPrompt, "--engine", engineFile,
                                                     "--greedy"},
                                                    why);
        QVERIFY2(!printed.isEmpty(), qPrintable(why));
        const QJsonObject reference = lastJsonLine(QString::fromUtf8(printed));
        QVERIFY2(reference["ok"].toBool(), qPrintable(reference["why"].toString()));
        qInfo() << "engine" << engine["ids"].toArray() << "transformers' generate" << reference["hf_ids"].toArray();

        // Without --json: the prompt and its continuation, as a user reads them.
        const auto plain = generate({"--max_new_tokens", "12"});
        QVERIFY2(plain.exitCode == 0, qPrintable(plain.output));
        QCOMPARE(plain.output.trimmed(), (kPrompt + engine["text"].toString()).trimmed());
    }

    void samplingFollowsTheSeed()
    {
        auto sampled = [this](const QString& seed) {
            const auto run = generate(
                {"--max_new_tokens", "16", "--temperature", "1.0", "--top_k", "50", "--seed", seed, "--json"});
            return run.exitCode == 0 ? lastJsonLine(run.output)["ids"].toArray() : QJsonArray();
        };
        const QJsonArray first = sampled("7");
        QVERIFY(!first.isEmpty());
        QCOMPARE(sampled("7"), first);
        QVERIFY(sampled("8") != first);
    }

    // #45 point 11: each eval continues the recipe's eval_prompts on rank 0 (the other ranks run
    // the same forwards and record none); the last eval's text is the export's greedy text.
    void evalsWriteSamplesOfThePrompts()
    {
        const QList<QJsonObject> events = testing::readEvents(m_runDir + "/events.jsonl");
        QMap<int, QJsonArray> rankZeroSamples;
        for (const auto& e : events) {
            if (e["type"].toString() != "eval")
                continue;
            if (e["rank"].toInt() != 0) {
                QVERIFY(!e.contains("samples"));
                continue;
            }
            rankZeroSamples[e["step"].toInt()] = e["samples"].toArray();
        }
        QCOMPARE(rankZeroSamples.keys(), (QList<int>{10, 20, 30}));
        for (const QJsonArray& samples : rankZeroSamples) {
            QCOMPARE(samples.size(), 2);
            QCOMPARE(samples[0].toObject()["prompt"].toString(), kPrompt);
            QCOMPARE(samples[1].toObject()["prompt"].toString(), QStringLiteral("Everyone is permitted"));
        }
        const auto run = generate({"--max_new_tokens", "12", "--json"});
        QVERIFY2(run.exitCode == 0, qPrintable(run.output));
        QCOMPARE(rankZeroSamples[30][0].toObject()["text"].toString(), lastJsonLine(run.output)["text"].toString());
    }

    // #57 item 8: a run that went on (Resume: `launch --continue_run`; a requeued SLURM job)
    // exported from its last attempt's folder; Try model (`runs generate`) finds the model there,
    // in the run's own recipe, as it finds a run's that never stopped.
    void triesTheModelOfTheLastAttempt()
    {
        const auto whole = generate({"--max_new_tokens", "12", "--json"});
        QVERIFY2(whole.exitCode == 0, qPrintable(whole.output));
        const QString resumed = m_dir.filePath("resumed");
        const QString cluster = m_dir.filePath("cluster");
        for (const QString& exportDir : {resumed + "/attempts/1/export", cluster + "/attempts/1/node0/export"}) {
            const QString run = exportDir.left(exportDir.indexOf("/attempts/"));
            QVERIFY(QDir().mkpath(exportDir));
            QVERIFY(QDir().mkpath(run + "/attempts/0"));
            QVERIFY(QFile::copy(m_runDir + "/recipe.yaml", run + "/recipe.yaml"));
            for (const QString& file : QDir(m_runDir + "/export").entryList(QDir::Files))
                QVERIFY(QFile::copy(m_runDir + "/export/" + file, exportDir + "/" + file));
            const auto tried = testing::runShardscope(
                m_dir.path(), {"runs", "generate", run, "--prompt", kPrompt, "--max_new_tokens", "12", "--json"}, 120000);
            QVERIFY2(tried.exitCode == 0, qPrintable(tried.output));
            QCOMPARE(lastJsonLine(tried.output)["text"].toString(), lastJsonLine(whole.output)["text"].toString());
        }
    }

    void refusesWhatCannotBeTried()
    {
        // A run whose model was not exported (yet): said, with what to do.
        const QString copy = m_dir.filePath("no-export");
        QVERIFY(QDir().mkpath(copy));
        QVERIFY(QFile::copy(m_runDir + "/recipe.yaml", copy + "/recipe.yaml"));
        auto run = testing::runShardscope(m_dir.path(), {"runs", "generate", copy, "--prompt", kPrompt});
        QCOMPARE(run.exitCode, 1);
        QVERIFY2(run.output.contains("has no exported model yet") && run.output.contains("--continue_run"),
                 qPrintable(run.output));
        // A script run's directory: no recipe.
        QVERIFY(QFile::remove(copy + "/recipe.yaml"));
        run = testing::runShardscope(m_dir.path(), {"runs", "generate", copy, "--prompt", kPrompt});
        QVERIFY2(run.exitCode == 1 && run.output.contains("only the engine's runs can be tried here"), qPrintable(run.output));
        // An MLP run writes no text.
        const QString mlp = m_dir.filePath("mlp-run");
        QVERIFY(QDir().mkpath(mlp + "/export"));
        testing::writeFile(mlp + "/recipe.yaml", "name: m\nmodel: {type: mlp}\ndata: {type: synthetic_regression}\n");
        testing::writeFile(mlp + "/export/config.json", "{}");
        run = testing::runShardscope(m_dir.path(), {"runs", "generate", mlp, "--prompt", kPrompt});
        QVERIFY2(run.exitCode == 1 && run.output.contains("it writes no text"), qPrintable(run.output));
        run = generate({"--max_new_tokens", "0"});
        QVERIFY2(run.exitCode != 0 && run.output.contains("--max_new_tokens"), qPrintable(run.output));
    }

private:
    QTemporaryDir m_dir;
    QString m_runDir;
};

QTEST_GUILESS_MAIN(TestGeneration)
#include "tst_generation.moc"
