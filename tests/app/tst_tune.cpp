// #47: `shardscope tune` on CPU ranks with the Llama demo. A budget between FULL_SHARD's and DDP's
// estimates rules DDP out with the reason, the winner's measured memory stays within it, its
// written config and recipe launch and train to the losses of its trial, and no two trials ever
// ran at once (each is a run of the history, tagged with the session). A budget below every
// estimate is refused with the smallest one; a time budget stops the trials and the report
// keeps what they measured.

#include "storage/run_store.h"
#include "storage/store_paths.h"
#include "tests/common/demo_recipes.h"
#include "tests/common/recipe_run.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QElapsedTimer>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

namespace testing = shardscope::testing;
using namespace shardscope::storage;

namespace {

struct Tuned {
    int exitCode = -1;
    QJsonObject report; // --json's
    QString errors;
};

Tuned tune(const QString& home, const QString& recipe, const QStringList& extra)
{
    QProcess process;
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("SHARDSCOPE_HOME", home);
    process.setProcessEnvironment(env);
    process.start(testing::shardscopeBinary(), QStringList{"tune", "--recipe", recipe, "--num_processes", "2", "--trial_steps",
                                                           "3", "--runs_dir", home + "/runs", "--json"}
                                                   + extra);
    Tuned t;
    if (!process.waitForFinished(600000))
        return t;
    t.exitCode = process.exitCode();
    t.report = QJsonDocument::fromJson(process.readAllStandardOutput()).object();
    t.errors = QString::fromUtf8(process.readAllStandardError());
    return t;
}

QVector<double> rankZeroLosses(const QString& eventsFile)
{
    QVector<double> losses;
    for (const auto& e : testing::readEvents(eventsFile))
        if (e["type"] == "step" && e["rank"] == 0)
            losses.push_back(e["loss"].toDouble());
    return losses;
}

} // namespace

class TestTune : public QObject {
    Q_OBJECT

private:
    QTemporaryDir m_home;
    QString m_recipe;

private slots:
    void initTestCase()
    {
        QVERIFY(m_home.isValid());
        // The demo recipe with its relative paths (../data, ../tokenizers), as a user's would be.
        QVERIFY(QDir(m_home.path()).mkpath("recipes"));
        const QString resources = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/resources/");
        QVERIFY(QFile::link(resources + "data", m_home.path() + "/data"));
        QVERIFY(QFile::link(resources + "tokenizers", m_home.path() + "/tokenizers"));
        QString text = testing::llamaDemoRecipe(40);
        text.replace(resources, "../");
        QVERIFY(text.contains("../data/"));
        m_recipe = m_home.path() + "/recipes/llama.yaml";
        QFile file(m_recipe);
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.write(text.toUtf8());
    }

    void fastestSetupWithinTheBudget()
    {
        // Model states per rank at 2 ranks (fp32 AdamW): DDP 15.08 MB, ZeRO-1 13.2 MB, FSDP 7.54 MB.
        const double budget = 14.0 * 1024 * 1024;
        // The chosen files go to another folder than the recipe's: their paths must still resolve.
        const Tuned t = tune(m_home.path(), m_recipe, {"--memory_budget", "14MB", "--out", m_home.path() + "/chosen"});
        QVERIFY2(t.exitCode == 0, qPrintable(t.errors));
        const QJsonObject& r = t.report;
        QCOMPARE(r["budget_bytes"].toDouble(), budget);
        QVERIFY(!r["best"].isNull());
        int ddp = 0;
        QJsonObject best;
        for (const auto v : r["candidates"].toArray()) {
            const QJsonObject c = v.toObject();
            if (c["layout"] == "DDP") {
                ++ddp;
                QVERIFY2(c["dropped"].toString().contains("exceeds the budget"), qPrintable(c["dropped"].toString()));
                QCOMPARE(c["rounds"].toInt(), 0);
            }
            if (c["run"] == r["best_run"])
                best = c;
            if (c["rounds"].toInt() > 0) // every trial: the estimate beside what it measured
                QVERIFY(c["measured_bytes"].toDouble() > 0 && c["estimate_bytes"].toDouble() > 0);
        }
        QVERIFY(ddp > 0);
        QVERIFY(!best.isEmpty());
        QVERIFY2(best["measured_bytes"].toDouble() <= budget, qPrintable(QString::number(best["measured_bytes"].toDouble())));

        // Every trial is a run of the history, tagged with the session, and none overlapped another.
        auto store = RunStore::open(historyFile(m_home.path().toStdString()));
        QVERIFY(store.ok());
        RunFilter filter;
        filter.tag = r["session"].toString().toStdString();
        filter.descending = false;
        auto runs = store->listRuns(filter);
        QVERIFY(runs.ok());
        QCOMPARE(int(runs->size()), r["trials_run"].toInt());
        for (std::size_t i = 1; i < runs->size(); ++i) {
            const auto& before = (*runs)[i - 1];
            const auto& after = (*runs)[i];
            QVERIFY(before.endedAt && after.startedAt);
            QVERIFY2(*before.endedAt <= *after.startedAt,
                     qPrintable(QStringLiteral("%1 and %2 overlap").arg(before.name.c_str(), after.name.c_str())));
        }

        // The written setup (new files) trains to the winning trial's losses.
        const QString config = r["config"].toString(), recipe = r["recipe"].toString();
        QVERIFY(QFile::exists(config) && QFile::exists(recipe) && recipe != m_recipe);
        const int steps = r["best_steps"].toInt();
        QProcess launch;
        auto env = QProcessEnvironment::systemEnvironment();
        env.insert("SHARDSCOPE_HOME", m_home.path());
        launch.setProcessEnvironment(env);
        launch.setProcessChannelMode(QProcess::MergedChannels);
        launch.start(testing::shardscopeBinary(),
                     {"launch", "--config_file", config, "--recipe", recipe, "--max_steps", QString::number(steps), "--runs_dir",
                      m_home.path() + "/runs", "--run_name", "tuned"});
        QVERIFY(launch.waitForFinished(300000));
        QVERIFY2(launch.exitCode() == 0, launch.readAll().constData());
        const auto trial = rankZeroLosses(m_home.path() + "/runs/" + r["best_run"].toString() + "/events.jsonl");
        const auto tuned = rankZeroLosses(m_home.path() + "/runs/tuned/events.jsonl");
        QCOMPARE(tuned.size(), steps);
        QCOMPARE(trial, tuned);
        QFile written(config); // says which session chose it
        QVERIFY(written.open(QIODevice::ReadOnly));
        QVERIFY(written.readAll().contains(r["session"].toString().toUtf8()));
    }

    void budgetBelowEveryEstimateIsRefused()
    {
        const Tuned t = tune(m_home.path(), m_recipe, {"--memory_budget", "1MB"});
        QCOMPARE(t.exitCode, 2);
        QVERIFY2(t.errors.contains("below every candidate's estimate") && t.errors.contains("the smallest is 7.54 MB")
                     && t.errors.contains("would fit"),
                 qPrintable(t.errors));
        // No budget on a machine without a GPU (whose memory would be the default): asked for.
        const Tuned none = tune(m_home.path(), m_recipe, {});
        QCOMPARE(none.exitCode, 2);
        QVERIFY2(none.errors.contains("give --memory_budget"), qPrintable(none.errors));
    }

    void timeBudgetIsKept()
    {
        QElapsedTimer clock;
        clock.start();
        const Tuned t = tune(m_home.path(), m_recipe, {"--memory_budget", "14MB", "--time_budget", "8"});
        const double seconds = clock.elapsed() / 1000.0;
        QVERIFY2(t.report["out_of_time"].toBool(), qPrintable(t.errors));
        // The budget, plus the trial in flight's stop (up to 5 s) and the start and the report.
        QVERIFY2(seconds < 8 + 15, qPrintable(QString::number(seconds)));
        int measured = 0;
        for (const auto v : t.report["candidates"].toArray())
            measured += v.toObject()["tokens_per_s"].toDouble() > 0 ? 1 : 0;
        QVERIFY2(measured >= 1, "the report keeps what the trials measured");
        QVERIFY(t.report["trials_run"].toInt() >= measured);
    }
};

QTEST_GUILESS_MAIN(TestTune)
#include "tst_tune.moc"
