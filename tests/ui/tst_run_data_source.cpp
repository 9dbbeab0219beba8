// The files the Run page shows beside a run's rows, read through its data source: a script run's
// command line (the last of command.sh), no mesh without a plan.json, the selected rank's log
// from an offset (from the newest attempt's logs when the run names them), a log that shrank
// said so, at most 4 MiB a read, nothing before the run directory is known.

#include "tests/common/files.h"
#include "ui/run_data_source.h"

#include <QDir>
#include <QTemporaryDir>
#include <QtTest>

using namespace shardscope;
using ui::RunFiles;
using ui::RunInfo;

class TestRunDataSource : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;

    RunInfo runIn(const QString& name)
    {
        RunInfo info;
        info.runDir = m_dir.filePath(name).toStdString();
        QDir(m_dir.path()).mkpath(name + QStringLiteral("/logs"));
        return info;
    }

private slots:
    void theCommandAndTheLog()
    {
        const RunInfo info = runIn(QStringLiteral("script-run"));
        const QString dir = QString::fromStdString(info.runDir);
        testing::writeFile(dir + QStringLiteral("/command.sh"),
                           "#!/bin/sh\n# run by shardscope launch --script\ncd /work\n\nACCELERATE_USE_CPU=1 accelerate launch "
                           "train.py --steps 5\n");
        testing::writeFile(dir + QStringLiteral("/logs/rank1.log"), "step 1\nstep 2\n");
        ui::EventFileRunSource source(info.runDir);
        const RunFiles files = source.readFiles(info, 1, 0, true);
        QVERIFY(files.command);
        QCOMPARE(QString::fromStdString(*files.command),
                 QStringLiteral("ACCELERATE_USE_CPU=1 accelerate launch train.py --steps 5"));
        QVERIFY(files.mesh && files.mesh->empty()); // a script run has no plan.json
        QCOMPARE(QString::fromStdString(files.logsDir), dir + QStringLiteral("/logs"));
        QCOMPARE(files.logOffset, std::uint64_t{0});
        QCOMPARE(QByteArray::fromStdString(files.log), QByteArray("step 1\nstep 2\n"));
        QVERIFY(!files.logShrunk);

        // Asked for once: later reads leave the command alone, and go on from the offset.
        const RunFiles later = source.readFiles(info, 1, 7, false);
        QVERIFY(!later.command && !later.mesh);
        QCOMPARE(later.logOffset, std::uint64_t{7});
        QCOMPARE(QByteArray::fromStdString(later.log), QByteArray("step 2\n"));
        // Read further than the file is long: it was rewritten.
        const RunFiles shrunk = source.readFiles(info, 1, 1000, false);
        QVERIFY(shrunk.logShrunk);
        QVERIFY(shrunk.log.empty());
        // A rank without a log yet: nothing, from offset 0.
        const RunFiles none = source.readFiles(info, 3, 0, false);
        QVERIFY(none.log.empty());
        QCOMPARE(none.logOffset, std::uint64_t{0});
        QVERIFY(!none.logShrunk);
    }

    void theNewestAttemptsLogs()
    {
        RunInfo info = runIn(QStringLiteral("resumed"));
        const QString dir = QString::fromStdString(info.runDir);
        QDir(dir).mkpath(QStringLiteral("attempts/1/logs"));
        testing::writeFile(dir + QStringLiteral("/logs/rank0.log"), "first attempt\n");
        testing::writeFile(dir + QStringLiteral("/attempts/1/logs/rank0.log"), "second attempt\n");
        info.logsDir = (dir + QStringLiteral("/attempts/1/logs")).toStdString();
        ui::EventFileRunSource source(info.runDir);
        const RunFiles files = source.readFiles(info, 0, 0, false);
        QCOMPARE(QString::fromStdString(files.logsDir), dir + QStringLiteral("/attempts/1/logs"));
        QCOMPARE(QByteArray::fromStdString(files.log), QByteArray("second attempt\n"));
    }

    // #57 item 10: a SLURM run's ranks log in their node's folder of the newest attempt
    // (attempts/<N>/node<M>/logs/), and the Run page shows them from there.
    void aClusterRunsRankLogs()
    {
        RunInfo info = runIn(QStringLiteral("on-slurm"));
        info.job = "slurm:12";
        const QString dir = QString::fromStdString(info.runDir);
        QDir(dir).mkpath(QStringLiteral("attempts/0/node0/logs"));
        QDir(dir).mkpath(QStringLiteral("attempts/0/node1/logs"));
        QDir(dir).mkpath(QStringLiteral("attempts/1/node0/logs"));
        QDir(dir).mkpath(QStringLiteral("attempts/1/node1/logs"));
        testing::writeFile(dir + QStringLiteral("/attempts/0/node1/logs/rank1.log"), "attempt 0, node 1\n");
        testing::writeFile(dir + QStringLiteral("/attempts/1/node0/logs/rank0.log"), "attempt 1, node 0\n");
        testing::writeFile(dir + QStringLiteral("/attempts/1/node1/logs/rank1.log"), "attempt 1, node 1\n");
        ui::EventFileRunSource source(info.runDir);
        QCOMPARE(QByteArray::fromStdString(source.readFiles(info, 1, 0, false).log), QByteArray("attempt 1, node 1\n"));
        QCOMPARE(QByteArray::fromStdString(source.readFiles(info, 0, 0, false).log), QByteArray("attempt 1, node 0\n"));
        QFile::remove(dir + QStringLiteral("/attempts/1/node1/logs/rank1.log")); // not written yet: the attempt before
        QCOMPARE(QByteArray::fromStdString(source.readFiles(info, 1, 0, false).log), QByteArray("attempt 0, node 1\n"));
    }

    void aLongLogComesInParts()
    {
        const RunInfo info = runIn(QStringLiteral("long"));
        const QByteArray big(5 * 1024 * 1024, 'x');
        testing::writeFile(QString::fromStdString(info.runDir) + QStringLiteral("/logs/rank0.log"), big);
        ui::EventFileRunSource source(info.runDir);
        const RunFiles first = source.readFiles(info, 0, 0, false);
        QCOMPARE(first.log.size(), std::size_t{4 * 1024 * 1024});
        const RunFiles rest = source.readFiles(info, 0, first.log.size(), false);
        QCOMPARE(rest.log.size(), std::size_t{1024 * 1024});
    }

    void nothingBeforeTheRunDirectoryIsKnown()
    {
        ui::EventFileRunSource source(m_dir.filePath(QStringLiteral("x")).toStdString());
        const RunFiles files = source.readFiles(RunInfo{}, 0, 0, true);
        QVERIFY(!files.command && !files.mesh);
        QVERIFY(files.logsDir.empty() && files.log.empty());
    }
};

QTEST_MAIN(TestRunDataSource)
#include "tst_run_data_source.moc"
