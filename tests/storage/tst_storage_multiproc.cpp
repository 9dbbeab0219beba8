// The store under real processes (tests/storage/storage_ingest_helper is the writer):
//  - killing the writer with SIGKILL in the middle of ingestion, again and again on one file,
//    leaves a database that passes integrity_check and holds every row the writer had seen
//    committed, never a part of an event, with the run marked interrupted on the next open;
//  - a reader polling while the writer ingests never sees a partial batch (rows, blocks and the
//    run's last_step always agree in one read transaction) and never blocks the writer (which
//    runs with a busy timeout of 0, so any lock wait would fail its commit);
//  - a full disk (the writer's file size capped with RLIMIT_FSIZE, SIGXFSZ ignored, in the helper
//    process: as root a read-only folder would not stop anything) is an error that says what
//    failed, where and what to do, never a crash; the file reopened afterwards passes
//    integrity_check, holds every row committed before the failure and takes new runs.

#include "storage/run_store.h"
#include "storage/run_writer.h"
#include "storage_test_util.h"

#include <QElapsedTimer>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <set>
#include <thread>

using namespace shardscope::storage;
using namespace storage_test;

namespace {

const QString kHelper = SHARDSCOPE_BINARY_DIR "/tests/storage/storage_ingest_helper";
constexpr int kRanks = 4;
constexpr int kKeys = 20;

struct Snapshot {
    std::int64_t rows = 0;
    std::int64_t blockRows = 0;
    std::int64_t maxStep = -1;
    std::int64_t lastStep = -1; // runs.last_step, -1 when NULL
};

// One read transaction, so the four numbers come from the same snapshot.
Snapshot snapshot(Database& db, std::int64_t runId)
{
    const std::string run = std::to_string(runId);
    if (!db.exec("BEGIN"))
        qFatal("BEGIN failed");
    Snapshot s;
    s.rows = queryInt(db, "SELECT count(*) FROM metrics WHERE run_id = " + run);
    s.blockRows = queryInt(db, "SELECT coalesce(sum(count), 0) FROM metric_blocks WHERE run_id = " + run);
    s.maxStep = queryInt(db, "SELECT coalesce(max(step), -1) FROM metrics WHERE run_id = " + run);
    s.lastStep = queryInt(db, "SELECT coalesce(last_step, -1) FROM runs WHERE id = " + run);
    if (!db.exec("COMMIT"))
        qFatal("COMMIT failed");
    return s;
}

// Events whose rows are not all there (any (rank, step) without exactly kKeys rows).
std::int64_t brokenEvents(Database& db, std::int64_t runId)
{
    return queryInt(db, "SELECT count(*) FROM (SELECT count(*) AS c FROM metrics WHERE run_id = " + std::to_string(runId)
                            + " GROUP BY rank, step HAVING c != " + std::to_string(kKeys) + ")");
}

std::int64_t runIdFrom(QProcess& process)
{
    if (!process.waitForReadyRead(10000))
        return 0;
    while (!process.canReadLine())
        process.waitForReadyRead(1000);
    const QByteArray line = process.readLine().trimmed();
    return line.startsWith("run ") ? line.mid(4).toLongLong() : 0;
}

} // namespace

class TestStorageMultiproc : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_dir;

    std::string killDb() const { return m_dir.filePath("killed.sqlite").toStdString(); }

private slots:
    void killMidIngestionRepeatedly_data()
    {
        QTest::addColumn<int>("delayMs"); // after the writer's first line, before SIGKILL
        for (int delay : {15, 40, 75, 120, 180, 250, 330, 420})
            QTest::newRow(qPrintable(QString("kill after %1 ms").arg(delay))) << delay;
    }

    // Every row runs on the same file: each kill leaves a hot WAL that the next writer and
    // reader must recover from.
    void killMidIngestionRepeatedly()
    {
        QFETCH(int, delayMs);
        QProcess writer;
        writer.start(kHelper, {"--db", QString::fromStdString(killDb()), "--ranks", QString::number(kRanks), "--keys",
                               QString::number(kKeys), "--flush-every", "3", "--interval-ms", "20"});
        QVERIFY2(writer.waitForStarted(), qPrintable(writer.errorString()));
        const std::int64_t runId = runIdFrom(writer);
        QVERIFY2(runId > 0, writer.readAllStandardError().constData());
        std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
        writer.kill(); // SIGKILL
        QVERIFY(writer.waitForFinished(10000));
        QCOMPARE(writer.exitStatus(), QProcess::CrashExit);

        // The last count the writer printed after a flush() returned: committed for sure.
        std::int64_t committed = 0;
        const auto lines = writer.readAllStandardOutput().split('\n');
        for (const auto& line : lines) {
            if (line.startsWith("committed ") && !line.isEmpty())
                committed = line.mid(10).toLongLong();
        }

        auto store = RunStore::open(killDb()); // recovers the WAL, marks the run interrupted
        SS_VERIFY_OK(store);
        Database& db = store->database();
        QCOMPARE(queryText(db, "PRAGMA integrity_check"), std::string("ok"));
        QCOMPARE(queryInt(db, "SELECT count(*) FROM pragma_foreign_key_check"), std::int64_t(0));
        const Snapshot s = snapshot(db, runId);
        QVERIFY2(s.rows >= committed, qPrintable(QString("%1 rows stored, %2 reported committed").arg(s.rows).arg(committed)));
        QCOMPARE(s.rows % kKeys, std::int64_t(0));
        QCOMPARE(brokenEvents(db, runId), std::int64_t(0));
        QCOMPARE(s.blockRows, s.rows);
        QCOMPARE(s.lastStep, s.maxStep);
        QCOMPARE(store->run(runId)->summary.status, RunStatus::Interrupted);
        qInfo("killed after %d ms: %lld rows stored, %lld reported committed", delayMs, static_cast<long long>(s.rows),
              static_cast<long long>(committed));
    }

    void readerNeverSeesPartialBatchAndNeverBlocksWriter()
    {
        const std::string db = m_dir.filePath("live.sqlite").toStdString();
        constexpr int kSteps = 3000;
        QProcess writer;
        writer.start(kHelper, {"--db", QString::fromStdString(db), "--ranks", QString::number(kRanks), "--keys",
                               QString::number(kKeys), "--steps", QString::number(kSteps), "--interval-ms", "10",
                               "--max-buffered", "3000", "--busy-timeout-ms", "0", "--step-sleep-us", "600"});
        QVERIFY2(writer.waitForStarted(), qPrintable(writer.errorString()));
        const std::int64_t runId = runIdFrom(writer);
        QVERIFY2(runId > 0, writer.readAllStandardError().constData());

        Database reader = rawOpen(db);
        int polls = 0;
        std::set<std::int64_t> intermediate;
        const std::int64_t total = std::int64_t(kSteps) * kRanks * kKeys;
        QElapsedTimer timer;
        timer.start();
        while (writer.state() != QProcess::NotRunning && timer.elapsed() < 60000) {
            const Snapshot s = snapshot(reader, runId);
            QCOMPARE(s.rows % kKeys, std::int64_t(0));
            QCOMPARE(s.blockRows, s.rows);
            QCOMPARE(s.lastStep, s.maxStep);
            if (s.rows > 0 && s.rows < total)
                intermediate.insert(s.rows);
            if (polls % 10 == 0)
                QCOMPARE(brokenEvents(reader, runId), std::int64_t(0));
            if (polls % 5 == 0) {
                // The full open path of a GUI or CLI reader, while the writer is busy.
                auto store = RunStore::open(db);
                SS_VERIFY_OK(store);
                SS_VERIFY_OK(store->listRuns());
                SS_VERIFY_OK(store->downsampledSeries(runId, 0, "loss", 100));
            }
            ++polls;
            writer.waitForFinished(5);
        }
        if (writer.state() != QProcess::NotRunning)
            QVERIFY(writer.waitForFinished(30000));
        const QByteArray err = writer.readAllStandardError();
        QVERIFY2(writer.exitStatus() == QProcess::NormalExit && writer.exitCode() == 0, err.constData());
        QVERIFY(writer.readAllStandardOutput().contains("done"));
        QVERIFY2(polls >= 20, qPrintable(QString::number(polls)));
        // The reader really ran during ingestion, not only before or after it.
        QVERIFY2(intermediate.size() >= 3, qPrintable(QString::number(intermediate.size())));
        const Snapshot last = snapshot(reader, runId);
        QCOMPARE(last.rows, total);
        QCOMPARE(last.lastStep, std::int64_t(kSteps - 1));
        qInfo("%d polls, %zu distinct intermediate states", polls, intermediate.size());
    }

    void fullDiskIsAnErrorNotACrash()
    {
        const std::string db = m_dir.filePath("full.sqlite").toStdString();
        constexpr int kStepsBeforeLimit = 20;
        QProcess writer;
        // --steps 0: it writes until a commit fails, then exits 3 with the error on stderr.
        writer.start(kHelper, {"--db", QString::fromStdString(db), "--ranks", QString::number(kRanks), "--keys",
                               QString::number(kKeys), "--steps", "0", "--flush-every", "1", "--interval-ms", "10000",
                               "--fsize-after", QString::number(kStepsBeforeLimit), "--fsize-slack", "65536"});
        QVERIFY2(writer.waitForStarted(), qPrintable(writer.errorString()));
        const std::int64_t runId = runIdFrom(writer);
        QVERIFY2(runId > 0, writer.readAllStandardError().constData());
        QVERIFY2(writer.waitForFinished(60000), "the writer neither failed nor stopped within 60 s");
        const QString err = QString::fromUtf8(writer.readAllStandardError());
        QCOMPARE(writer.exitStatus(), QProcess::NormalExit); // no crash, no SIGXFSZ
        QVERIFY2(writer.exitCode() == 3, qPrintable(QString("exit %1: %2").arg(writer.exitCode()).arg(err)));

        std::int64_t committed = 0;
        std::int64_t committedAtLimit = -1;
        for (const auto& line : writer.readAllStandardOutput().split('\n')) {
            if (line.startsWith("committed "))
                committed = line.mid(10).toLongLong();
            else if (line.startsWith("limited "))
                committedAtLimit = committed;
        }
        QCOMPARE(committedAtLimit, std::int64_t(kStepsBeforeLimit) * kRanks * kKeys);
        // What failed, where, and what to do about it.
        QVERIFY2(err.contains("committing") && err.contains("failed"), qPrintable(err));
        QVERIFY2(err.contains(QString::fromStdString(db)), qPrintable(err));
        QVERIFY2(err.contains("may be full") && err.contains("free space"), qPrintable(err));
        QVERIFY2(err.contains("stay buffered"), qPrintable(err));

        auto store = RunStore::open(db);
        SS_VERIFY_OK(store);
        Database& database = store->database();
        QCOMPARE(queryText(database, "PRAGMA integrity_check"), std::string("ok"));
        QCOMPARE(queryInt(database, "SELECT count(*) FROM pragma_foreign_key_check"), std::int64_t(0));
        const Snapshot s = snapshot(database, runId);
        QVERIFY2(s.rows >= committed, qPrintable(QString("%1 rows stored, %2 reported committed").arg(s.rows).arg(committed)));
        QCOMPARE(s.rows % (kRanks * kKeys), std::int64_t(0)); // whole steps only
        QCOMPARE(brokenEvents(database, runId), std::int64_t(0));
        QCOMPARE(s.blockRows, s.rows);
        QCOMPARE(s.lastStep, s.maxStep);
        // Every committed step is there for every rank.
        QCOMPARE(queryInt(database, "SELECT count(DISTINCT step) FROM metrics WHERE run_id = " + std::to_string(runId)),
                 s.maxStep + 1);

        // With space again, the same file takes a new run.
        NewRun next;
        next.name = "after the full disk";
        auto nextId = store->createRun(next);
        SS_VERIFY_OK(nextId);
        SS_VERIFY_OK(store->markRunning(*nextId));
        auto nextWriter = RunWriter::open(db, *nextId);
        SS_VERIFY_OK(nextWriter);
        (*nextWriter)->addMetrics(0, 0, 0, {{"loss", 1.0}});
        SS_VERIFY_OK((*nextWriter)->flush());
        QCOMPARE(queryInt(database, "SELECT count(*) FROM metrics WHERE run_id = " + std::to_string(*nextId)), std::int64_t(1));
        qInfo("limit after %lld rows; %lld committed before the failure, %lld stored; error: %s",
              static_cast<long long>(committedAtLimit), static_cast<long long>(committed), static_cast<long long>(s.rows),
              qPrintable(err.trimmed()));
    }
};

QTEST_GUILESS_MAIN(TestStorageMultiproc)
#include "tst_storage_multiproc.moc"
