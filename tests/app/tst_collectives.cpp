// Two and four real ranks of shardscope-worker, started by `shardscope launch`, rendezvous through
// c10d's TCPStore and run Gloo collectives whose results each rank checks against closed forms.
// The fault-injection rows prove the check can fail: a perturbed input must be reported as a
// wrong result, and a failing rank must fail the launch with its own exit code.

#include <QProcess>
#include <QtTest>

#include "tests/common/recipe_run.h"

namespace {

const QString kShardscope = QStringLiteral(SHARDSCOPE_BINARY_DIR "/app/shardscope");

struct Run {
    int exitCode = -1;
    QString out;
    QString err;
};

Run launch(int ranks, const QStringList& workerArgs)
{
    QProcess process;
    QStringList args{QStringLiteral("launch"), QStringLiteral("--num_processes"), QString::number(ranks), QStringLiteral("--")};
    args << QStringLiteral("check-collectives") << workerArgs;
    process.start(kShardscope, args);
    if (!process.waitForFinished(90000)) {
        process.kill();
        process.waitForFinished();
    }
    return {process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -1,
            QString::fromUtf8(process.readAllStandardOutput()), QString::fromUtf8(process.readAllStandardError())};
}

} // namespace

class TestCollectives : public QObject {
    Q_OBJECT
private slots:
    void collectivesAreCorrect_data()
    {
        QTest::addColumn<int>("ranks");
        QTest::newRow("2 ranks") << 2;
        QTest::newRow("4 ranks") << 4;
    }
    void collectivesAreCorrect()
    {
        QFETCH(int, ranks);
        const Run run = launch(ranks, {});
        QVERIFY2(run.exitCode == 0, qPrintable(run.out + run.err));
        for (int rank = 0; rank < ranks; ++rank) {
            const QString line = QStringLiteral("rank %1/%2: 20 collective checks passed on cpu (gloo)").arg(rank).arg(ranks);
            QVERIFY2(run.out.contains(line), qPrintable(run.out + run.err));
        }
        QVERIFY(run.out.contains(QStringLiteral("%1 ranks finished successfully").arg(ranks)));
    }

    void wrongResultsAreCaught_data()
    {
        QTest::addColumn<int>("ranks");
        QTest::addColumn<int>("corruptRank");
        QTest::newRow("2 ranks, rank 0 corrupt") << 2 << 0;
        QTest::newRow("4 ranks, rank 3 corrupt") << 4 << 3;
    }
    void wrongResultsAreCaught()
    {
        QFETCH(int, ranks);
        QFETCH(int, corruptRank);
        const Run run = launch(ranks, {QStringLiteral("--corrupt-rank"), QString::number(corruptRank)});
        QCOMPARE(run.exitCode, 3);
        for (const char* collective : {"all_reduce sum", "all_reduce max", "all_gather", "reduce_scatter sum"})
            QVERIFY2(run.err.contains(QStringLiteral("WRONG %1 (Float").arg(QLatin1String(collective))), qPrintable(run.err));
        QVERIFY(run.err.contains(QStringLiteral("failed first (root cause)")));
    }

    void failingRankFailsTheLaunch()
    {
        const Run run = launch(
            4, {QStringLiteral("--fail-rank"), QStringLiteral("2"), QStringLiteral("--fail-code"), QStringLiteral("7")});
        QCOMPARE(run.exitCode, 7);
        QVERIFY2(run.err.contains(QStringLiteral("rank 2 failed first (root cause)")), qPrintable(run.err));
        QVERIFY(run.err.contains(QStringLiteral("exited with code 7")));
        // The other ranks were waiting in the rendezvous and were stopped, not left running.
        QCOMPARE(run.err.count(QStringLiteral("stopped by the launcher")), 3);
    }

    // num_machines 2: one launcher per "machine" (both on this host), machine 0 serving the
    // rendezvous, together forming one 4-rank job.
    void twoLaunchersFormOneJob()
    {
        const int port = shardscope::testing::freeLoopbackPort();
        QVERIFY(port > 0);
        QProcess machines[2];
        for (int m = 1; m >= 0; --m) {
            machines[m].start(kShardscope,
                              {"launch", "--num_processes", "4", "--num_machines", "2", "--machine_rank", QString::number(m),
                               "--main_process_port", QString::number(port), "--", "check-collectives"});
            QVERIFY(machines[m].waitForStarted());
        }
        QString out;
        for (auto& machine : machines) {
            QVERIFY(machine.waitForFinished(90000));
            out += QString::fromUtf8(machine.readAllStandardOutput() + machine.readAllStandardError());
            QCOMPARE(machine.exitCode(), 0);
        }
        for (int rank = 0; rank < 4; ++rank)
            QVERIFY2(out.contains(QStringLiteral("rank %1/4: 20 collective checks passed").arg(rank)), qPrintable(out));
        QVERIFY(out.contains("2 ranks on machine 0 finished successfully"));
        QVERIFY(out.contains("2 ranks on machine 1 finished successfully"));
    }
};

QTEST_GUILESS_MAIN(TestCollectives)
#include "tst_collectives.moc"
