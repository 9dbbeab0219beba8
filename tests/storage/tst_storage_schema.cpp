// The schema and its migrations: a new file is current and in WAL mode with foreign keys; every
// stored older version (tests/storage/fixtures/history_v<N>.sqlite) upgrades to the current one
// without losing a row, with the derived metric blocks backfilled exactly; a file from the
// future, a file that is no database and a read-only open of an old file are refused with a
// message that says what to do.

#include "storage/run_store.h"
#include "storage/schema.h"
#include "storage_test_util.h"
#include "tests/common/sqlite_schema.h"

#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <filesystem>
#include <fstream>

using namespace shardscope::storage;
using namespace storage_test;

namespace {

const std::string kFixtures = SHARDSCOPE_SOURCE_DIR "/tests/storage/fixtures";

using shardscope::testing::schemaOf;

std::string copyFixture(const QTemporaryDir& dir, const std::string& name)
{
    const std::string target = dir.filePath(QString::fromStdString(name)).toStdString();
    std::filesystem::copy_file(kFixtures + "/" + name, target);
    return target;
}

// One row per earlier schema version; add history_v<N>.sqlite here when v<N+1> ships (v2's file
// is v1's as Shardscope with schema 2 upgraded it).
void addStoredFixtureRows()
{
    QTest::addColumn<QString>("file");
    QTest::addColumn<int>("version");
    QTest::newRow("v1") << "history_v1.sqlite" << 1;
    QTest::newRow("v2") << "history_v2.sqlite" << 2;
}

} // namespace

class TestStorageSchema : public QObject {
    Q_OBJECT
private slots:
    void newFileIsCurrentWalWithForeignKeys()
    {
        QTemporaryDir dir;
        const std::string path = dir.filePath("sub/history.sqlite").toStdString();
        auto store = RunStore::open(path);
        SS_VERIFY_OK(store);
        QCOMPARE(queryInt(store->database(), "PRAGMA user_version"), std::int64_t(kSchemaVersion));
        QCOMPARE(queryText(store->database(), "PRAGMA journal_mode"), std::string("wal"));
        QCOMPARE(queryInt(store->database(), "PRAGMA foreign_keys"), std::int64_t(1));
        // Foreign keys are enforced: a metric row of a run that does not exist is refused.
        auto insert = store->database().exec(
            "INSERT INTO metric_keys (id, name) VALUES (1, 'loss');"
            "INSERT INTO metrics (run_id, rank, step, time, key_id, value) VALUES (999, 0, 0, 0, 1, 1.0)");
        QVERIFY(!insert.ok());
        QVERIFY(insert.error().message.find("FOREIGN KEY") != std::string::npos);
    }

    // Migrations 1..N must still produce exactly the schema the stored vN file has; otherwise the
    // fixture would no longer stand for what vN users have on disk.
    void fixtureMatchesItsMigrations_data() { addStoredFixtureRows(); }
    void fixtureMatchesItsMigrations()
    {
        QFETCH(QString, file);
        QFETCH(int, version);
        QTemporaryDir dir;
        auto fresh = Database::open(dir.filePath("fresh.sqlite").toStdString(), OpenMode::ReadWriteCreate,
                                    std::chrono::milliseconds(1000));
        SS_VERIFY_OK(fresh);
        SS_VERIFY_OK(migrate(*fresh, version));
        QCOMPARE(queryInt(*fresh, "PRAGMA user_version"), std::int64_t(version));
        Database stored = rawOpen(copyFixture(dir, file.toStdString()));
        QCOMPARE(queryInt(stored, "PRAGMA user_version"), std::int64_t(version));
        QCOMPARE(schemaOf(*fresh), schemaOf(stored));
    }

    void migratesStoredFile_data() { addStoredFixtureRows(); }

    void migratesStoredFile()
    {
        QFETCH(QString, file);
        QFETCH(int, version);
        QTemporaryDir dir;
        const std::string path = copyFixture(dir, file.toStdString());
        std::int64_t metricsBefore = 0, runsBefore = 0, evalsBefore = 0;
        {
            Database old = rawOpen(path);
            QCOMPARE(queryInt(old, "PRAGMA user_version"), std::int64_t(version));
            metricsBefore = queryInt(old, "SELECT count(*) FROM metrics");
            runsBefore = queryInt(old, "SELECT count(*) FROM runs");
            evalsBefore = queryInt(old, "SELECT count(*) FROM evals");
        }
        StoreOptions options;
        options.markInterrupted = false; // the fixture's "running" run belongs to another host
        auto store = RunStore::open(path, options);
        SS_VERIFY_OK(store);
        Database& db = store->database();
        QCOMPARE(queryInt(db, "PRAGMA user_version"), std::int64_t(kSchemaVersion));
        QCOMPARE(queryText(db, "PRAGMA integrity_check"), std::string("ok"));
        QCOMPARE(queryInt(db, "SELECT count(*) FROM pragma_foreign_key_check"), std::int64_t(0));
        QCOMPARE(queryInt(db, "SELECT count(*) FROM metrics"), metricsBefore);
        QCOMPARE(queryInt(db, "SELECT count(*) FROM runs"), runsBefore);
        QCOMPARE(queryInt(db, "SELECT count(*) FROM evals"), evalsBefore);
        // The old file is kept beside the new one.
        QVERIFY(std::filesystem::exists(path + ".v" + std::to_string(version) + ".bak"));

        // The backfilled blocks summarise exactly the stored rows.
        QCOMPARE(queryInt(db, "SELECT sum(count) FROM metric_blocks"), metricsBefore);
        auto buckets = store->downsampledSeries(1, 0, "loss", 4);
        SS_VERIFY_OK(buckets);
        auto points = store->series(1, 0, "loss");
        SS_VERIFY_OK(points);
        QCOMPARE(int(points->size()), 300);
        double maxSeen = -1;
        std::int64_t covered = 0;
        for (const auto& b : *buckets) {
            covered += b.count;
            maxSeen = std::max(maxSeen, b.maxValue);
        }
        QCOMPARE(covered, std::int64_t(300));
        QCOMPARE(maxSeen, 9.0); // the spike at step 150 survives
        // NULL (NaN) values are counted but never become a minimum or maximum.
        auto run2 = store->downsampledSeries(2, 0, "loss", 10);
        SS_VERIFY_OK(run2);
        for (const auto& b : *run2) {
            QVERIFY(!std::isnan(b.minValue));
            QVERIFY(!std::isnan(b.maxValue));
        }

        // The upgraded store answers the queries of the current version.
        auto stats = store->runStats(1);
        SS_VERIFY_OK(stats);
        QCOMPARE(*stats->finalLoss, 0.5);
        QCOMPARE(*stats->bestLoss, 0.5);
        QCOMPARE(*stats->meanTokensPerS, 1000.0);
        QCOMPARE(stats->skippedSteps, std::int64_t(6));
        QCOMPARE(int(stats->peakMemory.size()), 2);
        QCOMPARE(stats->peakMemory[1].second, 2.0 * 1048576 + 1024.0 * 299);
        auto details = store->run(1);
        SS_VERIFY_OK(details);
        QCOMPARE(int(details->checkpoints.size()), 2);
        QCOMPARE(int(details->traces.size()), 1);
        QCOMPARE(details->summary.tags, (std::vector<std::string>{"baseline", "mlp"}));
        QCOMPARE(details->summary.color, std::string()); // v3: no colour chosen yet
        SS_VERIFY_OK(store->setRunColor(1, "#102030"));

        // Opening again is a no-op: no second backup, same version.
        std::filesystem::remove(path + ".v" + std::to_string(version) + ".bak");
        auto again = RunStore::open(path, options);
        SS_VERIFY_OK(again);
        QVERIFY(!std::filesystem::exists(path + ".v" + std::to_string(version) + ".bak"));
    }

    void refusesNewerSchema()
    {
        QTemporaryDir dir;
        const std::string path = dir.filePath("future.sqlite").toStdString();
        SS_VERIFY_OK(RunStore::open(path));
        {
            Database db = rawOpen(path);
            SS_VERIFY_OK(db.exec("PRAGMA user_version = 99"));
        }
        auto store = RunStore::open(path);
        QVERIFY(!store.ok());
        QVERIFY2(store.error().message.find("newer") != std::string::npos, store.error().message.c_str());
        QVERIFY(store.error().message.find("SHARDSCOPE_HOME") != std::string::npos);
    }

    void refusesFileThatIsNoDatabase()
    {
        QTemporaryDir dir;
        const std::string path = dir.filePath("garbage.sqlite").toStdString();
        std::ofstream(path) << std::string(8192, 'x');
        auto store = RunStore::open(path);
        QVERIFY(!store.ok());
        QVERIFY2(store.error().message.find(path) != std::string::npos, store.error().message.c_str());
    }

    void readOnlyOpenDoesNotUpgrade()
    {
        QTemporaryDir dir;
        const std::string path = copyFixture(dir, "history_v1.sqlite");
        StoreOptions options;
        options.readOnly = true;
        auto store = RunStore::open(path, options);
        QVERIFY(!store.ok());
        QVERIFY2(store.error().message.find("read-write") != std::string::npos, store.error().message.c_str());
        QCOMPARE(queryInt(rawOpen(path), "PRAGMA user_version"), std::int64_t(1));
    }
};

QTEST_APPLESS_MAIN(TestStorageSchema)
#include "tst_storage_schema.moc"
