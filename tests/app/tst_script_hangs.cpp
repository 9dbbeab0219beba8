// Hangs in users' own scripts (#44), through the real `accelerate launch` of the project's venv on
// 2 and 4 CPU ranks, with tests/tools/misbehaving_train.py misbehaving on command: a rank that
// skips one all_reduce ends the run as hung within the heartbeat timeout + 10 s, the report naming
// that rank and the collective's number and kind (from torch's Flight Recorder, read by the
// reporter); a rank stuck in a Python loop has its stack (the loop's file and line) in the report;
// a rank that calls all_gather where the others call all_reduce is reported as the mismatch; the
// same run without faults is not flagged; `runs diagnose` asks a live script run's ranks.

#include "storage/run_store.h"
#include "storage/store_paths.h"
#include "tests/common/files.h"

#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

using namespace shardscope::storage;

namespace {

const QString kShardscope = QStringLiteral(SHARDSCOPE_BINARY_DIR "/app/shardscope");
const QString kVenvPython = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/.venv/bin/python");
const QString kScript = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/tests/tools/misbehaving_train.py");
constexpr int kHeartbeatTimeout = 5; // s

struct ScriptRun {
    int exitCode = -1;
    QString output;
    QString report; // hang_report.txt, empty when there is none
    qint64 hangToEndMs = -1; // from the fault's line in the rank's log to the launcher's exit
};

// A MULTI_CPU config of `ranks` ranks in `home`, as `shardscope config` writes it for a CPU machine.
QString cpuConfig(const QTemporaryDir& home, int ranks)
{
    const QString config = home.filePath("config.yaml");
    shardscope::testing::writeFile(config, "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\n"
                                           "mixed_precision: 'no'\nnum_machines: 1\nnum_processes: "
                                               + QByteArray::number(ranks) + "\nuse_cpu: true\n");
    return config;
}

// `process` set up to run shardscope with `home`'s history and the project's venv.
void useHome(QProcess& process, const QTemporaryDir& home)
{
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("SHARDSCOPE_HOME", home.path());
    env.insert("VIRTUAL_ENV", QFileInfo(kVenvPython).dir().absoluteFilePath(".."));
    process.setProcessEnvironment(env);
    process.setProcessChannelMode(QProcess::MergedChannels);
}

// `misbehaving_train.py ARGS` on `ranks` CPU ranks under `shardscope launch`, in `home`. `faultLine`
// is what the misbehaving rank prints when its fault begins (empty: no fault to time).
ScriptRun launchScript(const QTemporaryDir& home, int ranks, const QStringList& args, const QString& faultLine = {})
{
    QProcess process;
    useHome(process, home);
    process.start(kShardscope, QStringList{"launch", "--config_file", cpuConfig(home, ranks), "--script", kScript, "--run_name",
                                           "run", "--heartbeat_timeout", QString::number(kHeartbeatTimeout), "--"}
                                   + args + QStringList{"--data-folder", home.path()});
    ScriptRun run;
    QElapsedTimer sinceFault;
    const QString logs = home.filePath("runs/run/logs");
    while (!process.waitForFinished(200)) {
        if (process.state() == QProcess::NotRunning)
            break;
        if (!faultLine.isEmpty() && !sinceFault.isValid())
            for (int rank = 0; rank < ranks; ++rank)
                if (shardscope::testing::readFile(logs + QStringLiteral("/rank%1.log").arg(rank)).contains(faultLine.toUtf8()))
                    sinceFault.start();
        if (sinceFault.isValid() && sinceFault.elapsed() > 120000) {
            process.kill();
            process.waitForFinished();
            break;
        }
    }
    run.hangToEndMs = sinceFault.isValid() ? sinceFault.elapsed() : -1;
    run.exitCode = process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -1;
    run.output = QString::fromUtf8(process.readAll());
    run.report = QString::fromUtf8(shardscope::testing::readFile(home.filePath("runs/run/hang_report.txt")));
    return run;
}

// The one run of `home`'s history, checked to have ended as `status` with `rootCause`.
void expectRun(const QTemporaryDir& home, RunStatus status, std::optional<int> rootCause)
{
    auto store = RunStore::open(historyFile(home.path().toStdString()));
    QVERIFY(store.ok());
    auto details = store->run(*store->resolveRun("run"));
    QVERIFY(details.ok());
    QCOMPARE(details->summary.status, status);
    QCOMPARE(details->rootCauseRank, rootCause);
}

// The number of the line of misbehaving_train.py that holds `text`.
int scriptLineOf(const QString& text)
{
    const QStringList lines = QString::fromUtf8(shardscope::testing::readFile(kScript)).split('\n');
    for (int i = 0; i < lines.size(); ++i)
        if (lines[i].contains(text))
            return i + 1;
    return -1;
}

} // namespace

class TestScriptHangs : public QObject {
    Q_OBJECT
private slots:
    void skippedAllReduceIsNamed_data()
    {
        QTest::addColumn<int>("ranks");
        QTest::addColumn<int>("skipper");
        QTest::newRow("2 ranks") << 2 << 1;
        QTest::newRow("4 ranks") << 4 << 2;
    }
    void skippedAllReduceIsNamed()
    {
        QFETCH(int, ranks);
        QFETCH(int, skipper);
        QTemporaryDir home;
        const auto run = launchScript(home, ranks,
                                      {"--steps", "40", "--step_sleep", "0.05", "--skip", QStringLiteral("%1:5").arg(skipper)},
                                      QStringLiteral("rank %1 skips the all_reduce").arg(skipper));
        QVERIFY2(run.exitCode == 124, qPrintable(run.output)); // hung, as timeout(1) says
        QVERIFY2(run.hangToEndMs >= 0 && run.hangToEndMs <= (kHeartbeatTimeout + 10) * 1000,
                 qPrintable(QString::number(run.hangToEndMs) + " ms\n" + run.output));
        // The collective the others wait in, by number and kind, and the rank that never entered it.
        static const QRegularExpression waits(QStringLiteral("wait[s]? in all_reduce #(\\d+) of default_pg"));
        const auto match = waits.match(run.report);
        QVERIFY2(match.hasMatch(), qPrintable(run.report + run.output));
        const int seq = match.captured(1).toInt();
        QVERIFY2(
            run.report.contains(QStringLiteral("rank %1 never entered it: the last collective it issued in default_pg is #%2")
                                    .arg(skipper)
                                    .arg(seq - 1)),
            qPrintable(run.report));
        QVERIFY2(run.report.contains(QStringLiteral("%1 of %1 ranks answered").arg(ranks)), qPrintable(run.report));
        // The skipper idles where the script sleeps; the others wait in the all_reduce.
        QVERIFY2(run.report.contains(QStringLiteral("stacks of rank %1 (Python").arg(skipper)), qPrintable(run.report));
        QVERIFY2(
            run.report.contains(
                QStringLiteral("misbehaving_train.py\", line %1, in averaged_loss").arg(scriptLineOf("idle: waiting for data"))),
            qPrintable(run.report));
        QVERIFY2(run.output.contains(QStringLiteral("rank %1 failed first (root cause)").arg(skipper)), qPrintable(run.output));
        expectRun(home, RunStatus::Failed, skipper);
    }

    void loopingRanksStackShowsTheLoop()
    {
        QTemporaryDir home;
        const auto run = launchScript(home, 2, {"--steps", "40", "--step_sleep", "0.05", "--loop", "1:5"},
                                      QStringLiteral("rank 1 spins before"));
        QVERIFY2(run.exitCode == 124, qPrintable(run.output));
        QVERIFY2(run.output.contains("in no collective but busy"), qPrintable(run.output));
        const qsizetype stacks = run.report.indexOf("stacks of rank 1 (Python");
        QVERIFY2(stacks >= 0, qPrintable(run.report));
        const QString loopFrame =
            QStringLiteral("misbehaving_train.py\", line %1, in busy_loop").arg(scriptLineOf("the rank --loop names spins here"));
        QVERIFY2(run.report.indexOf(loopFrame, stacks) > stacks, qPrintable(run.report));
        expectRun(home, RunStatus::Failed, 1);
    }

    void mismatchedCollectiveIsReported()
    {
        QTemporaryDir home;
        const auto run = launchScript(home, 4, {"--steps", "40", "--step_sleep", "0.05", "--mismatch", "1:5"},
                                      QStringLiteral("rank 1 leaves")); // nothing to time: ranks wait on each other
        QVERIFY2(run.exitCode == 124, qPrintable(run.output));
        static const QRegularExpression astray(QStringLiteral(
            "rank 1 issued all_gather #(\\d+) of default_pg \\(4 B float32\\) under the same number as the others' all_reduce"));
        QVERIFY2(astray.match(run.report).hasMatch(), qPrintable(run.report + run.output));
        QVERIFY2(!run.report.contains("rank 0 issued") && !run.report.contains("rank 2 issued"), qPrintable(run.report));
    }

    // "Where is each rank now?" of a live script run: `runs diagnose` (the Run page's Diagnose)
    // asks its ranks, whose reporter answers with its collectives and stacks.
    void diagnoseAsksALiveScriptRun()
    {
        QTemporaryDir home;
        QProcess launcher;
        useHome(launcher, home);
        launcher.start(kShardscope,
                       {"launch", "--config_file", cpuConfig(home, 2), "--script", kScript, "--run_name", "run",
                        "--heartbeat_timeout", "600", "--", "--steps", "40", "--skip", "1:5", "--data-folder", home.path()});
        QTRY_VERIFY_WITH_TIMEOUT(shardscope::testing::readFile(home.filePath("runs/run/logs/rank1.log")).contains("skips"),
                                 120000);
        QProcess diagnose;
        useHome(diagnose, home);
        diagnose.start(kShardscope, {"runs", "diagnose", "run", "--timeout", "20"});
        QVERIFY(diagnose.waitForFinished(60000));
        const QString out = QString::fromUtf8(diagnose.readAll());
        launcher.terminate(); // the workbench's Stop
        QVERIFY(launcher.waitForFinished(60000));
        QVERIFY2(diagnose.exitCode() == 0, qPrintable(out));
        QVERIFY2(out.contains("2 of 2 ranks answered") && out.contains("rank 1 never entered it"), qPrintable(out));
        QVERIFY2(
            out.contains(
                QStringLiteral("misbehaving_train.py\", line %1, in averaged_loss").arg(scriptLineOf("idle: waiting for data"))),
            qPrintable(out));
    }

    // #45 point 4, script side: a run whose loss goes NaN is stopped and failed (it was a green
    // "completed"), saying from which step.
    void divergedScriptRunStopsAsFailed()
    {
        QTemporaryDir home;
        const auto run = launchScript(home, 2, {"--steps", "40", "--nan_from", "6"});
        QVERIFY2(run.exitCode == 1, qPrintable(run.output));
        QVERIFY2(run.output.contains("the run diverged: its loss is NaN from step 6 on (3 steps in a row by step 8;"),
                 qPrintable(run.output));
        expectRun(home, RunStatus::Failed, std::nullopt);
        auto store = RunStore::open(historyFile(home.path().toStdString()));
        QVERIFY(store.ok());
        auto details = store->run(*store->resolveRun("run"));
        QVERIFY(details.ok());
        QVERIFY2(QString::fromStdString(details->error).contains("diverged"), details->error.c_str());
        QVERIFY(details->summary.lastStep.value_or(40) < 40); // stopped, not trained to the end
    }

    void healthyRunIsNotFlagged()
    {
        QTemporaryDir home;
        const auto run = launchScript(home, 2, {"--steps", "30", "--step_sleep", "0.05"});
        QVERIFY2(run.exitCode == 0, qPrintable(run.output));
        QVERIFY2(run.report.isEmpty(), qPrintable(run.report));
        QVERIFY2(!run.output.contains("a rank hangs"), qPrintable(run.output));
        expectRun(home, RunStatus::Completed, std::nullopt);
    }
};

QTEST_GUILESS_MAIN(TestScriptHangs)
#include "tst_script_hangs.moc"
