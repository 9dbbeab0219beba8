// `shardscope runs ...` end to end: the real binary on a store seeded through the storage API,
// found through SHARDSCOPE_HOME (and --home): readable tables, filters, show, compare with the
// config difference, CSV/JSON export, delete with and without confirmation, errors with exit 1.

#include "storage/run_store.h"
#include "storage/run_writer.h"
#include "storage_test_util.h"

#include <QProcess>
#include <QProcessEnvironment>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>

using namespace shardscope::storage;
namespace fs = std::filesystem;

namespace {

const QString kShardscope = SHARDSCOPE_BINARY_DIR "/app/shardscope";

struct Output {
    int code = -1;
    QString out;
    QString err;
};

} // namespace

class TestStorageCli : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_home;

    Output run(const QStringList& args, const QString& home = {})
    {
        QProcess process;
        auto env = QProcessEnvironment::systemEnvironment();
        env.insert("SHARDSCOPE_HOME", home.isEmpty() ? m_home.path() : home);
        env.insert("TZ", "UTC");
        process.setProcessEnvironment(env);
        process.setStandardInputFile(QProcess::nullDevice());
        process.start(kShardscope, QStringList{"runs"} + args);
        if (!process.waitForFinished(30000))
            return {};
        return {process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -1,
                QString::fromUtf8(process.readAllStandardOutput()), QString::fromUtf8(process.readAllStandardError())};
    }

private slots:
    void initTestCase()
    {
        const fs::path home = m_home.path().toStdString();
        auto store = RunStore::open(home / "history.sqlite");
        SS_VERIFY_OK(store);
        const char* configs[] = {"distributed_type: MULTI_CPU\nmixed_precision: 'no'\nnum_processes: 2\n",
                                 "distributed_type: MULTI_CPU\nmixed_precision: bf16\nnum_processes: 2\n"};
        for (int i = 0; i < 2; ++i) {
            NewRun run;
            run.name = i ? "bf16-run" : "fp32-run";
            run.distributedType = "MULTI_CPU";
            run.mixedPrecision = i ? "bf16" : "no";
            run.worldSize = 2;
            run.configText = configs[i];
            run.tags = {i ? "sweep" : "baseline"};
            run.runDir = (home / "runs" / std::to_string(i + 1)).string();
            fs::create_directories(run.runDir);
            auto id = store->createRun(run);
            SS_VERIFY_OK(id);
            SS_VERIFY_OK(store->markRunning(*id));
            auto writer = RunWriter::open(home / "history.sqlite", *id);
            SS_VERIFY_OK(writer);
            for (int rank = 0; rank < 2; ++rank)
                (*writer)->addRank({rank, 100 + rank, "node", "cpu", "2.5.1", rank, 0});
            for (int step = 0; step < 20; ++step)
                for (int rank = 0; rank < 2; ++rank)
                    (*writer)->addMetrics(rank, step, 1.7e9 + step,
                                          {{"loss", 4.0 - step * 0.1 - i},
                                           {"tokens_per_s", 2000.0 * (i + 1)},
                                           {"mem.rss", 3.0 * 1024 * 1024 * 1024}});
            RunEnd end;
            end.status = i ? RunStatus::Failed : RunStatus::Completed;
            end.exitCode = i;
            if (i)
                end.rootCauseRank = 1;
            SS_VERIFY_OK((*writer)->finish(end));
        }
    }

    void listIsATable()
    {
        const auto r = run({"list"});
        QCOMPARE(r.code, 0);
        const auto lines = r.out.split('\n', Qt::SkipEmptyParts);
        QCOMPARE(lines.size(), 3);
        QVERIFY(lines[0].startsWith("ID  NAME"));
        QVERIFY(lines[1].contains("bf16-run") && lines[1].contains("failed") && lines[1].contains("sweep"));
        QVERIFY(lines[2].contains("fp32-run") && lines[2].contains("completed"));
        // Columns line up: STATUS starts at the same column on every line.
        const int column = lines[0].indexOf("STATUS");
        QCOMPARE(lines[1].indexOf("failed"), column);
        QCOMPARE(lines[2].indexOf("completed"), column);
    }

    void listFilters_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("expected");
        QTest::newRow("status") << QStringList{"--status", "completed"} << "fp32-run";
        QTest::newRow("precision") << QStringList{"--precision", "bf16"} << "bf16-run";
        QTest::newRow("tag") << QStringList{"--tag", "baseline"} << "fp32-run";
        QTest::newRow("search") << QStringList{"--search", "bf16"} << "bf16-run";
        QTest::newRow("sort by loss, ascending") << QStringList{"--sort", "loss", "--asc", "--limit", "1"} << "bf16-run";
    }

    void listFilters()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, expected);
        const auto r = run(QStringList{"list"} + args);
        QCOMPARE(r.code, 0);
        const auto lines = r.out.split('\n', Qt::SkipEmptyParts);
        QCOMPARE(lines.size(), 2);
        QVERIFY2(lines[1].contains(expected), qPrintable(r.out));
    }

    void showByNameAndId()
    {
        const auto r = run({"show", "bf16-run"});
        QCOMPARE(r.code, 0);
        QVERIFY(r.out.contains("failed"));
        QVERIFY2(r.out.contains(QRegularExpression("root cause +rank 1\n")), qPrintable(r.out));
        QVERIFY(r.out.contains("final loss"));
        QVERIFY(r.out.contains("3.00 GiB")); // peak memory per rank
        QVERIFY(r.out.contains("RANK"));
        const auto byId = run({"show", "1", "--config"});
        QCOMPARE(byId.code, 0);
        QVERIFY(byId.out.contains("fp32-run"));
        QVERIFY(byId.out.contains("mixed_precision: 'no'"));
    }

    void compareShowsSummaryAndConfigDifference()
    {
        const auto r = run({"compare", "1", "2"});
        QCOMPARE(r.code, 0);
        QVERIFY2(r.out.contains("config: mixed_precision"), qPrintable(r.out));
        QVERIFY(!r.out.contains("num_processes")); // identical keys are hidden
        QVERIFY(r.out.contains("tokens/s"));
        QVERIFY(r.out.contains("2000") && r.out.contains("4000"));
        QVERIFY(r.out.contains("peak memory rank 1"));
        const auto one = run({"compare", "1"});
        QVERIFY(one.code != 0);
    }

    void exportCsvAndJson()
    {
        const auto csv = run({"export", "1"});
        QCOMPARE(csv.code, 0);
        const auto lines = csv.out.split('\n', Qt::SkipEmptyParts);
        QCOMPARE(lines.size(), 1 + 20 * 2 * 3);
        QCOMPARE(lines[0], QString("run_id,rank,step,time,key,value"));
        const QString file = m_home.filePath("out.json");
        const auto json = run({"export", "fp32-run", "--format", "json", "-o", file});
        QCOMPARE(json.code, 0);
        QFile f(file);
        QVERIFY(f.open(QIODevice::ReadOnly));
        QVERIFY(f.readAll().contains("\"format\": \"shardscope-run\""));
    }

    void errorsExitWithOne()
    {
        const auto missing = run({"show", "nope"});
        QCOMPARE(missing.code, 1);
        QVERIFY(missing.err.contains("runs list"));
        const auto badStatus = run({"list", "--status", "weird"});
        QCOMPARE(badStatus.code, 1);
        const auto unconfirmed = run({"delete", "1"}); // stdin is not a terminal
        QCOMPARE(unconfirmed.code, 1);
        QVERIFY(unconfirmed.err.contains("--yes"));
    }

    void deleteRemovesRunAndDirectory()
    {
        QTemporaryDir other;
        // --home wins over SHARDSCOPE_HOME; seed that other home first.
        const fs::path home = other.path().toStdString();
        {
            auto store = RunStore::open(home / "history.sqlite");
            NewRun r;
            r.name = "temp";
            r.runDir = (home / "runs" / "1").string();
            fs::create_directories(r.runDir);
            const auto id = *store->createRun(r);
            SS_VERIFY_OK(store->finishRun(id, {}));
        }
        const auto r = run({"--home", other.path(), "delete", "temp", "--yes"});
        QCOMPARE(r.code, 0);
        QVERIFY(!fs::exists(home / "runs" / "1"));
        QVERIFY(run({"--home", other.path(), "list"}).out.contains("no runs"));
        QCOMPARE(run({"list"}).out.split('\n', Qt::SkipEmptyParts).size(), 3); // the other home is untouched
    }
};

QTEST_GUILESS_MAIN(TestStorageCli)
#include "tst_storage_cli.moc"
