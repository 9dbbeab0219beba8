// Two and four real ranks of shardscope-worker, started by `shardscope launch`, rendezvous through
// c10d's TCPStore and run Gloo collectives whose results each rank checks against closed forms.
// The fault-injection rows prove the check can fail: a perturbed input must be reported as a
// wrong result, and a failing rank must fail the launch with its own exit code.

#include <QProcess>
#include <QtTest>

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
    QStringList args{QStringLiteral("launch"), QStringLiteral("--num_processes"), QString::number(ranks),
                     QStringLiteral("--")};
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
        const Run run = launch(4, {QStringLiteral("--fail-rank"), QStringLiteral("2"), QStringLiteral("--fail-code"),
                                   QStringLiteral("7")});
        QCOMPARE(run.exitCode, 7);
        QVERIFY2(run.err.contains(QStringLiteral("rank 2 failed first (root cause)")), qPrintable(run.err));
        QVERIFY(run.err.contains(QStringLiteral("exited with code 7")));
        // The other ranks were waiting in the rendezvous and were stopped, not left running.
        QCOMPARE(run.err.count(QStringLiteral("stopped by the launcher")), 3);
    }
};

QTEST_GUILESS_MAIN(TestCollectives)
#include "tst_collectives.moc"
