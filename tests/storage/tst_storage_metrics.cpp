// Metrics: the writer's batching (nothing visible before a commit, everything after flush, an
// automatic commit within the flush interval, nothing lost when a commit fails on a busy database
// and is retried), the run's end committed with the last rows, downsampling checked against a
// brute-force computation over the raw rows on both paths (rows and blocks), NaN handling, and
// the live-view cursor.

#include "storage/metric_blocks.h"
#include "storage/run_store.h"
#include "storage/run_writer.h"
#include "storage_test_util.h"

#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <random>
#include <thread>

using namespace shardscope::storage;
using namespace storage_test;
namespace fs = std::filesystem;

namespace {

// Timing margins grow under sanitizers, detected at compile time (GCC defines __SANITIZE_*__,
// clang answers __has_feature).
#if defined(__SANITIZE_THREAD__)
constexpr int kSanitizerSlowdown = 10;
#elif defined(__SANITIZE_ADDRESS__)
constexpr int kSanitizerSlowdown = 3;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr int kSanitizerSlowdown = 10;
#elif __has_feature(address_sanitizer)
constexpr int kSanitizerSlowdown = 3;
#else
constexpr int kSanitizerSlowdown = 1;
#endif
#else
constexpr int kSanitizerSlowdown = 1;
#endif

RunStore openOrDie(const fs::path& db)
{
    auto opened = RunStore::open(db);
    if (!opened)
        qFatal("%s", opened.error().message.c_str());
    return std::move(*opened);
}

struct Fixture {
    QTemporaryDir dir;
    fs::path db() const { return fs::path(dir.path().toStdString()) / "history.sqlite"; }
    RunStore store = openOrDie(db());
    std::int64_t runId = 0;

    Fixture()
    {
        NewRun run;
        run.name = "m";
        runId = *store.createRun(run);
        if (!store.markRunning(runId))
            qFatal("markRunning");
    }
    std::unique_ptr<RunWriter> writer(WriterOptions options = {}) const
    {
        auto w = RunWriter::open(db(), runId, options);
        if (!w)
            qFatal("%s", w.error().message.c_str());
        return std::move(*w);
    }
    std::int64_t rows() const
    {
        return queryInt(store.database(), "SELECT count(*) FROM metrics WHERE run_id = " + std::to_string(runId));
    }
};

} // namespace

class TestStorageMetrics : public QObject {
    Q_OBJECT
private slots:
    void nothingVisibleBeforeCommitEverythingAfterFlush()
    {
        Fixture f;
        WriterOptions options;
        options.flushInterval = std::chrono::seconds(30);
        auto writer = f.writer(options);
        for (int step = 0; step < 100; ++step)
            writer->addMetrics(0, step, step, {{"loss", 1.0}, {"lr", 0.1}, {"grad_norm", 2.0}});
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        QCOMPARE(f.rows(), std::int64_t(0));
        SS_VERIFY_OK(writer->flush());
        QCOMPARE(f.rows(), std::int64_t(300));
        QCOMPARE(writer->committedRows(), std::int64_t(300));
        SS_VERIFY_OK(writer->flush()); // an empty flush is fine
    }

    // Rows added to an idle writer (its thread waiting on an empty buffer, as between the steps
    // of a real run) are committed one flush interval later, unasked, every time. The upper bound
    // is the interval plus a scheduling margin, scaled under sanitizers (TSan slows the writer
    // thread and SQLite about tenfold); the lower bound is exact: nothing commits before the
    // interval has passed.
    void commitsWithinTheFlushInterval()
    {
        Fixture f;
        WriterOptions options;
        options.flushInterval = std::chrono::milliseconds(100);
        auto writer = f.writer(options);
        const qint64 interval = options.flushInterval.count();
        const qint64 bound = interval + 400 * kSanitizerSlowdown;
        for (int round = 0; round < 3; ++round) {
            std::this_thread::sleep_for(std::chrono::milliseconds(2 * interval)); // the writer goes idle
            QElapsedTimer timer;
            timer.start();
            writer->addMetrics(0, round, round, {{"loss", 1.0}});
            qint64 elapsed = 0;
            while (f.rows() == round && (elapsed = timer.elapsed()) < 10 * bound)
                std::this_thread::sleep_for(std::chrono::milliseconds(2));
            elapsed = timer.elapsed();
            QVERIFY2(
                f.rows() == round + 1,
                qPrintable(
                    QString("round %1: nothing committed after %2 ms (interval %3 ms)").arg(round).arg(elapsed).arg(interval)));
            QVERIFY2(elapsed >= interval,
                     qPrintable(QString("round %1: committed after %2 ms, before the interval").arg(round).arg(elapsed)));
            QVERIFY2(elapsed <= bound,
                     qPrintable(QString("round %1: committed after %2 ms, bound %3 ms").arg(round).arg(elapsed).arg(bound)));
        }
        QCOMPARE(writer->committedRows(), std::int64_t(3));
    }

    void commitsEarlyWhenTheBufferFills()
    {
        Fixture f;
        WriterOptions options;
        options.flushInterval = std::chrono::seconds(30);
        options.maxBufferedRows = 1000;
        auto writer = f.writer(options);
        for (int step = 0; step < 500; ++step)
            writer->addMetrics(0, step, step, {{"a", 1.0}, {"b", 2.0}, {"c", 3.0}});
        QElapsedTimer timer;
        timer.start();
        while (f.rows() < 1000 && timer.elapsed() < 5000)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        QVERIFY(f.rows() >= 1000);
        QCOMPARE(f.rows() % 3, std::int64_t(0)); // never a part of an event
    }

    void busyDatabaseLosesNothing()
    {
        Fixture f;
        WriterOptions options;
        options.busyTimeout = std::chrono::milliseconds(0);
        options.flushInterval = std::chrono::milliseconds(50);
        auto writer = f.writer(options);
        Database blocker = rawOpen(f.db().string());
        SS_VERIFY_OK(blocker.exec("BEGIN IMMEDIATE"));
        for (int step = 0; step < 10; ++step)
            writer->addMetrics(0, step, step, {{"loss", 1.0}});
        auto rc = writer->flush();
        QVERIFY(!rc.ok());
        QVERIFY2(rc.error().message.find("lock") != std::string::npos, rc.error().message.c_str());
        QVERIFY(writer->lastError().has_value());
        for (int step = 10; step < 20; ++step)
            writer->addMetrics(0, step, step, {{"loss", 1.0}});
        SS_VERIFY_OK(blocker.exec("COMMIT"));
        SS_VERIFY_OK(writer->flush());
        QCOMPARE(f.rows(), std::int64_t(20));
        auto points = f.store.series(f.runId, 0, "loss");
        for (int i = 0; i < 20; ++i)
            QCOMPARE((*points)[std::size_t(i)].step, std::int64_t(i)); // order kept across the retry
    }

    void finishCommitsRowsAndStatusTogether()
    {
        Fixture f;
        WriterOptions options;
        options.flushInterval = std::chrono::seconds(30);
        auto writer = f.writer(options);
        writer->addRank({0, 123, "host", "cpu", "2.5.1", 0, 0});
        writer->addMetrics(0, 7, 1.0, {{"loss", 0.25}});
        writer->addCheckpoint({0, 7, 1.0, "runs/1/checkpoints/step_7", "state", 1024});
        writer->addTrace({0, 1.0, "runs/1/traces/rank0.json", "host", 1, 2, 3, 4, 0.5});
        writer->addEval({0, 7, 1.0, "loss", 0.3});
        RunEnd end;
        end.status = RunStatus::Failed;
        end.exitCode = 1;
        end.rootCauseRank = 0;
        end.error = "boom";
        end.rankExitCodes = {{0, 1}};
        SS_VERIFY_OK(writer->finish(end));
        auto details = f.store.run(f.runId);
        SS_VERIFY_OK(details);
        QCOMPARE(details->summary.status, RunStatus::Failed);
        QCOMPARE(*details->summary.lastStep, std::int64_t(7));
        QCOMPARE(*details->summary.lastLoss, 0.25);
        QCOMPARE(details->ranks.size(), std::size_t(1));
        QCOMPARE(details->ranks[0].info.pid, std::int64_t(123));
        QCOMPARE(*details->ranks[0].exitCode, 1);
        QCOMPARE(details->checkpoints.size(), std::size_t(1));
        QCOMPARE(details->traces.size(), std::size_t(1));
        QCOMPARE(f.store.evals(f.runId)->size(), std::size_t(1));
        QVERIFY(!writer->finish(end).ok()); // only once
    }

    void downsample_data()
    {
        QTest::addColumn<int>("points");
        QTest::addColumn<int>("stride"); // steps between points
        QTest::addColumn<int>("firstStep");
        QTest::addColumn<int>("buckets");
        QTest::addColumn<int>("nanEvery"); // 0: none
        QTest::newRow("fewer points than buckets: raw") << 50 << 1 << 0 << 100 << 0;
        QTest::newRow("narrow buckets: rows path") << 5000 << 1 << 0 << 2000 << 0;
        QTest::newRow("wide buckets: blocks path") << 200000 << 1 << 0 << 2000 << 0;
        QTest::newRow("blocks path, odd start") << 100000 << 1 << 1234567 << 777 << 0;
        QTest::newRow("logging every 10 steps") << 50000 << 10 << 10 << 1000 << 0;
        QTest::newRow("every 7 steps, NaNs") << 30000 << 7 << 3 << 500 << 13;
        QTest::newRow("one bucket") << 10000 << 1 << 0 << 1 << 0;
    }

    void downsample()
    {
        QFETCH(int, points);
        QFETCH(int, stride);
        QFETCH(int, firstStep);
        QFETCH(int, buckets);
        QFETCH(int, nanEvery);
        Fixture f;
        {
            auto writer = f.writer();
            std::mt19937 rng(42);
            std::normal_distribution<double> noise(0, 0.1);
            for (int i = 0; i < points; ++i) {
                double value = 2.0 * std::exp(-i / double(points)) + noise(rng);
                if (i % 9973 == 4321)
                    value = 100.0 + i; // spikes must survive
                if (nanEvery && i % nanEvery == 0)
                    value = std::nan("");
                writer->addMetrics(0, std::int64_t(firstStep) + std::int64_t(i) * stride, i, {{"loss", value}});
                writer->addMetrics(1, std::int64_t(firstStep) + std::int64_t(i) * stride, i, {{"loss", -value}});
            }
            SS_VERIFY_OK(writer->finish({}));
        }
        auto raw = f.store.series(f.runId, 0, "loss");
        SS_VERIFY_OK(raw);
        QCOMPARE(int(raw->size()), points);
        auto result = f.store.downsampledSeries(f.runId, 0, "loss", buckets);
        SS_VERIFY_OK(result);
        const auto& got = *result;
        QVERIFY(int(got.size()) <= buckets);
        if (points > buckets)
            QVERIFY2(int(got.size()) >= std::min(points, buckets) / 2 || buckets == 1, qPrintable(QString::number(got.size())));

        // Brute force over the raw rows, bucket by bucket, with the bucket bounds the query chose.
        std::size_t next = 0;
        std::int64_t previousLast = std::numeric_limits<std::int64_t>::min();
        for (const auto& b : got) {
            QVERIFY(b.firstStep <= b.lastStep);
            QVERIFY(b.firstStep > previousLast);
            previousLast = b.lastStep;
            BlockAccumulator expected;
            while (next < raw->size() && (*raw)[next].step <= b.lastStep) {
                QVERIFY((*raw)[next].step >= b.firstStep); // no point falls between buckets
                expected.add((*raw)[next].step, (*raw)[next].value);
                ++next;
            }
            QCOMPARE(b.count, expected.count);
            if (std::isnan(expected.minValue)) {
                QVERIFY(std::isnan(b.minValue));
            } else {
                QCOMPARE(b.minValue, expected.minValue);
                QCOMPARE(b.maxValue, expected.maxValue);
                QCOMPARE(b.minStep, expected.minStep);
                QCOMPARE(b.maxStep, expected.maxStep);
            }
        }
        QCOMPARE(next, raw->size()); // every point is in a bucket
    }

    void metricsSinceIsACursor()
    {
        Fixture f;
        NewRun other;
        other.name = "other";
        const auto otherId = *f.store.createRun(other);
        auto writer = f.writer();
        auto otherWriter = RunWriter::open(f.db(), otherId);
        writer->addMetrics(0, 0, 0, {{"loss", 1.0}, {"lr", 0.5}});
        (*otherWriter)->addMetrics(0, 0, 0, {{"loss", 9.0}});
        SS_VERIFY_OK(writer->flush());
        SS_VERIFY_OK((*otherWriter)->flush());
        auto first = f.store.metricsSince(f.runId, 0);
        SS_VERIFY_OK(first);
        QCOMPARE(first->size(), std::size_t(2));
        QCOMPARE(first->at(0).key, std::string("loss"));
        QCOMPARE(first->at(1).key, std::string("lr"));
        QVERIFY(first->at(0).id < first->at(1).id);
        writer->addMetrics(1, 1, 1, {{"loss", 0.5}});
        SS_VERIFY_OK(writer->flush());
        auto second = f.store.metricsSince(f.runId, first->back().id);
        SS_VERIFY_OK(second);
        QCOMPARE(second->size(), std::size_t(1));
        QCOMPARE(second->at(0).rank, 1);
        QCOMPARE(second->at(0).value, 0.5);
        auto limited = f.store.metricsSince(f.runId, 0, 1);
        QCOMPARE(limited->size(), std::size_t(1));
        QVERIFY(f.store.metricsSince(f.runId, second->back().id)->empty());
    }

    void nanRoundTrips()
    {
        Fixture f;
        auto writer = f.writer();
        writer->addMetrics(0, 0, 0, {{"loss", std::nan("")}, {"lr", std::numeric_limits<double>::infinity()}});
        writer->addMetrics(0, 1, 0, {{"loss", 1.5}});
        SS_VERIFY_OK(writer->flush());
        auto loss = f.store.series(f.runId, 0, "loss");
        QVERIFY(std::isnan((*loss)[0].value));
        QCOMPARE((*loss)[1].value, 1.5);
        QVERIFY(std::isinf((*f.store.series(f.runId, 0, "lr"))[0].value));
        auto stats = f.store.runStats(f.runId);
        SS_VERIFY_OK(stats);
        QCOMPARE(*stats->bestLoss, 1.5);
        QCOMPARE(*stats->finalLoss, 1.5);
    }

    void writerRefusesUnknownRunAndOldSchema()
    {
        Fixture f;
        auto missing = RunWriter::open(f.db(), 999);
        QVERIFY(!missing.ok());
        QVERIFY(missing.error().message.find("999") != std::string::npos);
        auto noFile = RunWriter::open(f.db().parent_path() / "none.sqlite", 1);
        QVERIFY(!noFile.ok());
    }
};

QTEST_APPLESS_MAIN(TestStorageMetrics)
#include "tst_storage_metrics.moc"
