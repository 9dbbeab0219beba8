// Every launched run lands in the run history: a completed run with each rank's every metric and
// its ranks, and a failed run with its status, root-cause rank, error message and log tail.

#include "storage/run_store.h"
#include "storage/store_paths.h"

#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>

#include <signal.h>
#include <QTemporaryDir>
#include <QtTest>

using namespace shardscope::storage;

namespace {

const QString kShardscope = QStringLiteral(SHARDSCOPE_BINARY_DIR "/app/shardscope");
const QString kRecipe = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/resources/recipes/demo-mlp.yaml");

int launch(const QString& home, const QStringList& extra, QString* output = nullptr, int ranks = 2, int steps = 12)
{
    QProcess process;
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("SHARDSCOPE_HOME", home);
    process.setProcessEnvironment(env);
    process.setProcessChannelMode(QProcess::MergedChannels);
    process.start(kShardscope, QStringList{"launch", "--num_processes", QString::number(ranks), "--recipe", kRecipe,
                                           "--max_steps", QString::number(steps)}
                                   + extra);
    process.waitForFinished(120000);
    if (output)
        *output = QString::fromUtf8(process.readAll());
    return process.exitCode();
}

} // namespace

class TestLaunchHistory : public QObject {
    Q_OBJECT
private slots:
    void completedRunIsRecorded()
    {
        QTemporaryDir home;
        const QString config = home.filePath(QStringLiteral("cpu.yaml"));
        QFile file(config);
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.write("compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nmixed_precision: 'no'\nnum_processes: 2\n"
                   "use_cpu: true\n");
        file.close();
        QString out;
        QCOMPARE(launch(home.path(),
                        {"--run_name", "ok", "--mixed_precision", "bf16", "--config_file", config, "--tag", "sweep:s"}, &out),
                 0);
        auto store = RunStore::open(historyFile(home.path().toStdString()));
        QVERIFY2(store.ok(), out.toUtf8().constData());
        auto runs = store->listRuns();
        QVERIFY(runs.ok());
        QCOMPARE(runs->size(), size_t(1));
        const auto& run = runs->front();
        QCOMPARE(QString::fromStdString(run.name), QStringLiteral("ok"));
        QCOMPARE(run.status, RunStatus::Completed);
        QCOMPARE(run.worldSize, 2);
        QCOMPARE(QString::fromStdString(run.mixedPrecision), QStringLiteral("bf16"));
        QCOMPARE(run.tags, std::vector<std::string>{"sweep:s"}); // --tag: a sweep's runs as one group
        QCOMPARE(run.lastStep.value_or(0), std::int64_t(12));
        for (int rank : {0, 1}) {
            auto loss = store->series(run.id, rank, "loss");
            QVERIFY(loss.ok());
            QCOMPARE(loss->size(), size_t(12));
            QCOMPARE(loss->back().step, std::int64_t(12));
        }
        auto details = store->run(run.id);
        QVERIFY(details.ok());
        QCOMPARE(details->ranks.size(), size_t(2));
        QVERIFY(details->recipeText.find("demo-mlp") != std::string::npos);
        // #21 problem 4: the history holds the config as the run used it, the flag merged in
        // (Accelerate's precedence), so that comparing a sweep's runs shows mixed_precision.
        QVERIFY2(details->configText.find("mixed_precision: bf16\n") != std::string::npos, details->configText.c_str());
        QVERIFY(details->configText.find("'no'") == std::string::npos);
    }

    // #21 problem 12: the demo's loss jumped from 3.1 to 8.4 (grad norm 33) at step 20, the end of
    // its warm-up, in every fp32 run (PyTorch's DDP did the same: the recipe, not the engine). Its
    // first 40 steps (the warm-up peak included) now never rise far above the best loss so far.
    void demoRecipeLearnsWithoutASpike()
    {
        QTemporaryDir home;
        QProcess process;
        auto env = QProcessEnvironment::systemEnvironment();
        env.insert("SHARDSCOPE_HOME", home.path());
        process.setProcessEnvironment(env);
        process.setProcessChannelMode(QProcess::MergedChannels);
        process.start(kShardscope,
                      {"launch", "--num_processes", "2", "--recipe", SHARDSCOPE_SOURCE_DIR "/resources/recipes/demo-gpt.yaml",
                       "--max_steps", "40", "--run_name", "demo"});
        QVERIFY(process.waitForFinished(180000));
        QVERIFY2(process.exitCode() == 0, process.readAll().constData());
        auto store = RunStore::open(historyFile(home.path().toStdString()));
        QVERIFY(store.ok());
        auto id = store->resolveRun("demo");
        QVERIFY(id.ok());
        auto loss = store->series(*id, 0, "loss");
        QVERIFY(loss.ok());
        QCOMPARE(loss->size(), std::size_t(40));
        double best = loss->front().value, worstRise = 0;
        std::int64_t at = 0;
        for (const auto& point : *loss) {
            if (point.value - best > worstRise) {
                worstRise = point.value - best;
                at = point.step;
            }
            best = std::min(best, point.value);
        }
        QVERIFY2(worstRise < 0.5,
                 qPrintable(QStringLiteral("the loss rose %1 above the best so far at step %2").arg(worstRise).arg(at)));
        QVERIFY2(loss->back().value < 3.0, qPrintable(QString::number(loss->back().value)));
    }

    // #22 fault injection: a rank made slower in forward is flagged as a straggler within the
    // window (its compute-only time; the step times stay equal under DDP), the others are not; the
    // flag is in the history (where the Run page reads it) and said on the terminal.
    void slowRankIsFlaggedAsAStraggler_data()
    {
        QTest::addColumn<int>("ranks");
        QTest::newRow("2 ranks") << 2;
        QTest::newRow("4 ranks") << 4;
    }
    void slowRankIsFlaggedAsAStraggler()
    {
        QFETCH(int, ranks);
        QTemporaryDir home;
        const int slow = ranks - 1;
        QString out;
        QCOMPARE(launch(home.path(),
                        // Four ranks share two cores here, under ctest -j2 with other tests: the other
                        // ranks' ~1 ms compute times jitter by several times, so the threshold is 10x
                        // (the slow rank's is ~200x).
                        {"--run_name", "slow", "--straggler_window", "7", "--straggler_threshold", "9", "--", "--slow-rank",
                         QString::number(slow), "--slow-forward-ms", "200"},
                        &out, ranks, 16),
                 0);
        QVERIFY2(out.contains(QStringLiteral("rank %1 is a straggler").arg(slow)), qPrintable(out));
        auto store = RunStore::open(historyFile(home.path().toStdString()));
        QVERIFY(store.ok());
        const auto id = store->listRuns()->front().id;
        for (int rank = 0; rank < ranks; ++rank) {
            auto flags = store->series(id, rank, "straggler");
            QVERIFY(flags.ok());
            QCOMPARE(int(flags->size()), rank == slow ? 1 : 0);
            if (rank == slow) {
                QVERIFY2(flags->front().step <= 16, "flagged within the run");
                QVERIFY2(flags->front().value > 10, qPrintable(QString::number(flags->front().value)));
            }
            auto compute = store->series(id, rank, "compute_time");
            QVERIFY(compute.ok());
            QCOMPARE(int(compute->size()), 16);
        }
    }

    // #22 fault injection: a spike injected into one step's batches is reported at that step, with
    // where its data was, in the history (the Run page marks it) and on the terminal.
    void injectedLossSpikeIsMarkedAtItsStep()
    {
        QTemporaryDir home;
        QString out;
        QCOMPARE(launch(home.path(), {"--run_name", "spiky", "--", "--spike-at-step", "9"}, &out, 2, 14), 0);
        QVERIFY2(out.contains(QStringLiteral("loss spike at step 9:")), qPrintable(out));
        auto store = RunStore::open(historyFile(home.path().toStdString()));
        QVERIFY(store.ok());
        const auto id = store->listRuns()->front().id;
        auto spikes = store->series(id, 0, "loss_spike");
        QVERIFY(spikes.ok());
        QVERIFY(!spikes->empty());
        QCOMPARE(spikes->front().step, std::int64_t(9)); // the first spike is the injected step
        auto loss = store->series(id, 0, "loss");
        QCOMPARE(spikes->front().value, (*loss)[8].value);
        auto batch = store->series(id, 0, "loss_spike.batch");
        QVERIFY(batch.ok() && !batch->empty());
        QVERIFY(batch->front().value >= 0);
        // Without the injection the demo has none.
        QTemporaryDir calmHome;
        QCOMPARE(launch(calmHome.path(), {"--run_name", "calm"}, &out, 2, 14), 0);
        auto calm = RunStore::open(historyFile(calmHome.path().toStdString()));
        QVERIFY(calm->series(calm->listRuns()->front().id, 0, "loss_spike")->empty());
    }

    void failedRunNamesTheRootCause()
    {
        QTemporaryDir home;
        // Every rank runs out of memory in step 3 (fault injection): the run fails with that message.
        QString out;
        QVERIFY(launch(home.path(), {"--run_name", "bad", "--", "--oom-at-step", "3"}, &out) != 0);
        auto store = RunStore::open(historyFile(home.path().toStdString()));
        QVERIFY(store.ok());
        auto runs = store->listRuns();
        QCOMPARE(runs->size(), size_t(1));
        QCOMPARE(runs->front().status, RunStatus::Failed);
        auto details = store->run(runs->front().id);
        QVERIFY(details->rootCauseRank.has_value());
        QVERIFY2(details->error.find("out of memory in forward of step 3") != std::string::npos, details->error.c_str());
        QVERIFY(details->error.find("last log lines") != std::string::npos);
        QVERIFY(details->exitCode.value_or(0) != 0);
    }

    // The launcher killed with SIGKILL: its ranks follow within seconds (parent-death signal),
    // and the next opening of the store marks the run interrupted.
    void killedLauncherLeavesNoRankAndAnInterruptedRun()
    {
        QTemporaryDir home;
        QFile recipe(home.filePath("long.yaml"));
        recipe.open(QIODevice::WriteOnly);
        recipe.write("name: long\nmodel: {type: mlp}\ndata: {type: synthetic_regression}\n"
                     "training: {per_device_batch_size: 8, max_steps: 1000000}\n");
        recipe.close();
        QProcess launcher;
        auto env = QProcessEnvironment::systemEnvironment();
        env.insert("SHARDSCOPE_HOME", home.path());
        launcher.setProcessEnvironment(env);
        launcher.start(kShardscope, {"launch", "--num_processes", "2", "--recipe", recipe.fileName(), "--run_name", "orphan"});
        QVERIFY(launcher.waitForStarted());
        QList<qint64> pids;
        QTRY_VERIFY_WITH_TIMEOUT(
            [&] {
                pids.clear();
                QFile events(home.filePath("runs/orphan/events.jsonl"));
                if (events.open(QIODevice::ReadOnly))
                    while (!events.atEnd()) {
                        const QByteArray line = events.readLine();
                        if (line.contains("\"type\":\"hello\""))
                            pids << QJsonDocument::fromJson(line).object()["pid"].toInteger();
                    }
                return pids.size() == 2;
            }(),
            60000);
        kill(pid_t(launcher.processId()), SIGKILL);
        launcher.waitForFinished(5000);
        QTRY_VERIFY_WITH_TIMEOUT(kill(pid_t(pids[0]), 0) != 0 && kill(pid_t(pids[1]), 0) != 0, 5000);
        auto store = RunStore::open(historyFile(home.path().toStdString()));
        QVERIFY(store.ok());
        auto runs = store->listRuns();
        QCOMPARE(runs->size(), size_t(1));
        QCOMPARE(runs->front().status, RunStatus::Interrupted);
        // Nothing lost: every step event on disk is in the store, including those the launcher
        // had not committed when it died (recovered from events.jsonl when the run was marked).
        QFile events(home.filePath("runs/orphan/events.jsonl"));
        QVERIFY(events.open(QIODevice::ReadOnly));
        std::map<int, std::int64_t> lastStep;
        while (!events.atEnd()) {
            const auto e = QJsonDocument::fromJson(events.readLine()).object();
            if (e["type"] == "step")
                lastStep[e["rank"].toInt()] = e["step"].toInteger();
        }
        for (const auto& [rank, step] : lastStep) {
            auto loss = store->series(runs->front().id, rank, "loss");
            QVERIFY(loss.ok());
            QCOMPARE(std::int64_t(loss->size()), step);
            QCOMPARE(loss->back().step, step);
        }
    }
};

QTEST_GUILESS_MAIN(TestLaunchHistory)
#include "tst_launch_history.moc"
