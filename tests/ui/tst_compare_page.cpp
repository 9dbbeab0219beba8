// The Compare page: two runs whose configs differ in one key show exactly that key (identical
// keys hidden until asked for), the summary has one row per run with its final and best loss and
// skipped steps, the overlay chart has one series per run, and both models pass
// QAbstractItemModelTester.

#include "storage/run_store.h"
#include "test_store.h"
#include "ui/compare_models.h"
#include "ui/compare_page.h"
#include "ui/main_window.h"
#include "ui/runs_page.h"
#include "ui/format.h"
#include "ui/metric_chart.h"
#include "ui/run_launcher.h"

#include <QAbstractItemModelTester>
#include <QCheckBox>
#include <QFile>
#include <QListWidget>
#include <QTemporaryDir>
#include <QSignalSpy>
#include <QtTest>

using namespace shardscope;
using shardscope::testing::SeedRun;
using shardscope::testing::seedRun;

class TestComparePage : public QObject {
    Q_OBJECT
private slots:
    void oneDifferingKeyShowsExactlyThatKey()
    {
        QTemporaryDir dir;
        const auto db = std::filesystem::path(dir.path().toStdString()) / "history.sqlite";
        SeedRun a{.name = "full-shard", .distributedType = "FSDP"};
        a.configText = "distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: FULL_SHARD\n  fsdp_offload_params: "
                       "false\nnum_processes: 2\n";
        SeedRun b = a;
        b.name = "shard-grad-op";
        b.configText = "distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: SHARD_GRAD_OP\n  fsdp_offload_params: "
                       "false\nnum_processes: 2\n";
        b.steps = 14;
        b.mfu = true;
        const auto ia = seedRun(db, a);
        const auto ib = seedRun(db, b);

        ui::ComparePage page(db);
        QAbstractItemModelTester statsTester(page.statsModel(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        QAbstractItemModelTester diffTester(page.diffModel(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        QSignalSpy updated(&page, &ui::ComparePage::comparisonUpdated);
        page.setRuns({ia, ib});
        QTRY_COMPARE(updated.count(), 1); // read on the history thread

        QCOMPARE(page.diffModel()->visibleKeys(), QStringList{QStringLiteral("config:fsdp_config.fsdp_sharding_strategy")});
        QCOMPARE(page.diffModel()->columnCount(), 4);
        QCOMPARE(page.diffModel()->index(0, 2).data().toString(), QStringLiteral("FULL_SHARD"));
        QCOMPARE(page.diffModel()->index(0, 3).data().toString(), QStringLiteral("SHARD_GRAD_OP"));

        page.findChild<QCheckBox*>(QStringLiteral("showIdentical"))->setChecked(true);
        const auto all = page.diffModel()->visibleKeys();
        QVERIFY(all.contains(QStringLiteral("config:num_processes")));
        QVERIFY(all.contains(QStringLiteral("recipe:training.max_steps")));
        QVERIFY(all.size() > 3);

        auto* stats = page.statsModel();
        QCOMPARE(stats->rowCount(), 2);
        QCOMPARE(stats->index(0, ui::RunStatsModel::FinalLoss).data().toString(), QStringLiteral("0.05")); // 1/20
        QCOMPARE(stats->index(1, ui::RunStatsModel::FinalLoss).data().toString(), QStringLiteral("0.07143")); // 1/14
        QCOMPARE(stats->index(0, ui::RunStatsModel::Skipped).data().toLongLong(), 2); // steps 7 and 14
        // #22: mean MFU (rank 0's) beside tokens/s; none where the run reported none.
        QVERIFY(stats->index(0, ui::RunStatsModel::Mfu).data().isNull());
        QCOMPARE(stats->index(1, ui::RunStatsModel::Mfu).data().toString(), QStringLiteral("30.0 %"));
        QCOMPARE(stats->headerData(ui::RunStatsModel::Mfu, Qt::Horizontal).toString(), QStringLiteral("MFU"));
        QCOMPARE(stats->index(1, ui::RunStatsModel::Mfu).data(Qt::ToolTipRole).toString(),
                 QStringLiteral("MFU against test peak of bfloat16"));
        QVERIFY(stats->index(0, ui::RunStatsModel::PeakMemory).data().toString().contains(QStringLiteral("r1")));

        auto* chart = page.chart();
        QCOMPARE(chart->seriesCount(), 2);
        QCOMPARE(chart->pointCount(0), 20);
        QCOMPARE(chart->pointCount(1), 14);
        // Each run in its own colour, the one Runs and Run give it (#21: stable colours).
        QCOMPARE(chart->seriesColor(0), ui::runColor(ia));
        QCOMPARE(chart->seriesColor(1), ui::runColor(ib));

        // Unchecking a run in the picker drops it.
        auto* picker = page.findChild<QListWidget*>(QStringLiteral("runPicker"));
        for (int i = 0; i < picker->count(); ++i)
            if (picker->item(i)->data(Qt::UserRole).toLongLong() == ib)
                picker->item(i)->setCheckState(Qt::Unchecked);
        QCOMPARE(page.runIds().size(), std::size_t(1));
        QCOMPARE(page.runIds().front(), ia);
        QTRY_COMPARE(updated.count(), 2);
        QCOMPARE(stats->rowCount(), 1);
        QCOMPARE(chart->seriesCount(), 1);
    }

    // #45 point 5: a precision emulated on the hardware it ran on (fp16 on this CPU) is said where
    // its MFU is read.
    void emulatedPrecisionIsSaidBesideItsMfu()
    {
        QTemporaryDir dir;
        const auto db = std::filesystem::path(dir.path().toStdString()) / "history.sqlite";
        const auto native = seedRun(db, {.name = "bf16", .mixedPrecision = "bf16", .mfu = true});
        const auto emulated = seedRun(db, {.name = "fp16", .mixedPrecision = "fp16", .mfu = true, .precisionEmulated = true});
        ui::ComparePage page(db);
        QSignalSpy updated(&page, &ui::ComparePage::comparisonUpdated);
        page.setRuns({native, emulated});
        QTRY_COMPARE(updated.count(), 1);
        auto* stats = page.statsModel();
        QCOMPARE(stats->index(0, ui::RunStatsModel::Mfu).data().toString(), QStringLiteral("30.0 %"));
        QCOMPARE(stats->index(1, ui::RunStatsModel::Mfu).data().toString(), QStringLiteral("30.0 % (precision emulated here)"));
        QCOMPARE(stats->index(1, ui::RunStatsModel::Mfu).data(Qt::ToolTipRole).toString(),
                 QStringLiteral("MFU against test peak of float32"));
    }

    void configRowsMatchTheStoreDiff()
    {
        const std::vector<std::string> configs{"a: 1\nb:\n  c: x\n", "a: 1\nb:\n  c: y\nd: 2\n"};
        const std::vector<std::string> recipes{"name: r\n", "name: r\n"};
        const std::vector<std::string> ran{"mixed_precision: bf16\nprocesses: 2\n", "mixed_precision: bf16-pure\nprocesses: 2\n"};
        const auto rows = ui::buildConfigRows(configs, recipes, ran);
        QStringList differing, identical;
        for (const auto& row : rows)
            (row.identical ? identical : differing) << QString::fromStdString(row.file + ":" + row.keyPath);
        QCOMPARE(differing, (QStringList{"config:b.c", "config:d", "run:mixed_precision"}));
        QCOMPARE(identical, (QStringList{"config:a", "recipe:name", "run:processes"}));
    }

    // #21 problem 4: a sweep's runs differ in how they ran, not in their config file: the
    // difference shows the precision mode the history recorded (bf16-pure has no Accelerate key).
    void sweepDifferenceShowsThePrecisionThatRan()
    {
        QTemporaryDir dir;
        const auto db = std::filesystem::path(dir.path().toStdString()) / "history.sqlite";
        SeedRun a{.name = "sweep-bf16", .mixedPrecision = "bf16"};
        SeedRun b = a;
        b.name = "sweep-bf16-pure";
        b.mixedPrecision = "bf16-pure";
        const auto ia = seedRun(db, a);
        const auto ib = seedRun(db, b);
        ui::ComparePage page(db);
        QSignalSpy updated(&page, &ui::ComparePage::comparisonUpdated);
        page.setRuns({ia, ib});
        QTRY_COMPARE(updated.count(), 1);
        QCOMPARE(page.diffModel()->visibleKeys(), QStringList{QStringLiteral("run:mixed_precision")});
        QCOMPARE(page.diffModel()->index(0, 2).data().toString(), QStringLiteral("bf16"));
        QCOMPARE(page.diffModel()->index(0, 3).data().toString(), QStringLiteral("bf16-pure"));
        auto store = storage::RunStore::open(db);
        QVERIFY(store.ok());
        auto comparison = store->compareRuns({ia, ib});
        QVERIFY(comparison.ok());
        QCOMPARE(comparison->differences.size(), std::size_t(1));
        QCOMPARE(comparison->differences[0].file + ":" + comparison->differences[0].keyPath, std::string("run:mixed_precision"));
    }

    // #21 problem 11: Compare's run list went stale (empty while runs existed, a finished run
    // shown as running). While shown, it follows the history.
    void runListStaysCurrent()
    {
        QTemporaryDir dir;
        const auto db = std::filesystem::path(dir.path().toStdString()) / "history.sqlite";
        seedRun(db, SeedRun{.name = "first"});
        ui::ComparePage page(db);
        page.show();
        auto* picker = page.findChild<QListWidget*>(QStringLiteral("runPicker"));
        QTRY_COMPARE(picker->count(), 1);
        SeedRun live{.name = "live"};
        live.status = storage::RunStatus::Running;
        const auto id = seedRun(db, live);
        QTRY_COMPARE_WITH_TIMEOUT(picker->count(), 2, 8000);
        auto textOf = [picker](std::int64_t runId) {
            for (int i = 0; i < picker->count(); ++i)
                if (picker->item(i)->data(Qt::UserRole).toLongLong() == runId)
                    return picker->item(i)->text();
            return QString();
        };
        QVERIFY2(textOf(id).contains(QStringLiteral("running")), qPrintable(textOf(id)));
        {
            auto writer = storage::RunWriter::open(db, id);
            QVERIFY(writer.ok());
            QVERIFY((*writer)->finish({}).ok());
        }
        QTRY_VERIFY_WITH_TIMEOUT(textOf(id).contains(QStringLiteral("completed")), 8000);
    }

    void sweepRunsOneAfterAnother()
    {
        // A fake launcher records its arguments; the test plays the history: a run appears (and
        // ends) when the test seeds it. The next mode starts only once the last one has ended.
        QTemporaryDir dir;
        const auto db = std::filesystem::path(dir.path().toStdString()) / "history.sqlite";
        const QString calls = dir.filePath(QStringLiteral("calls.txt"));
        const QString fake = dir.filePath(QStringLiteral("fake-launcher.sh"));
        {
            QFile script(fake);
            QVERIFY(script.open(QIODevice::WriteOnly));
            script.write(("#!/bin/sh\necho \"$*\" >> " + calls + "\n").toUtf8());
        }
        QFile::setPermissions(fake, QFile::permissions(fake) | QFileDevice::ExeOwner);
        qputenv("SHARDSCOPE_LAUNCHER", fake.toUtf8());
        // The launches (the window's catch-up with cluster runs, `runs ... follow --all`, is not one).
        auto launched = [&] {
            QFile file(calls);
            QStringList lines = file.open(QIODevice::ReadOnly)
                                    ? QString::fromUtf8(file.readAll()).split(QLatin1Char('\n'), Qt::SkipEmptyParts)
                                    : QStringList();
            lines.removeIf([](const QString& line) { return line.startsWith(QStringLiteral("runs ")); });
            return lines;
        };
        seedRun(db, SeedRun{.name = "other"}); // the history exists

        ui::MainWindow window(nullptr, db); // its Runs page lists what the sweep has queued
        ui::ComparePage& page = *window.comparePage();
        ui::LaunchRequest request;
        request.scriptFile = QStringLiteral("/s/train.py");
        request.configFile = QStringLiteral("/s/cpu2.yaml");
        request.workerArgs = {QStringLiteral("--steps"), QStringLiteral("5")};
        request.runName = QStringLiteral("sw");
        QCOMPARE(page.startPrecisionSweep(request, {QStringLiteral("no"), QStringLiteral("bf16")}), QString());
        QTRY_COMPARE(launched().size(), 1);
        QVERIFY2(launched().front().contains(QStringLiteral("--script /s/train.py"))
                     && launched().front().contains(QStringLiteral("--mixed_precision no"))
                     && launched().front().endsWith(QStringLiteral("-- --steps 5")),
                 qPrintable(launched().front()));
        QCOMPARE(page.queuedSweepRuns(), 1);
        // #21 problem 3: the queue is visible in Runs, and the sweep's runs share a tag (one group).
        QCOMPARE(window.runsPage()->queuedRuns(), QStringList{QStringLiteral("sw-bf16")});
        QVERIFY2(launched().front().contains(QStringLiteral("--tag sweep:sw")), qPrintable(launched().front()));
        SeedRun first{.name = "sw-no"};
        first.status = storage::RunStatus::Running;
        const auto firstId = seedRun(db, first);
        QTest::qWait(4500); // two polls: seen, still running
        QCOMPARE(launched().size(), 1);
        {
            storage::StoreOptions options;
            options.markInterrupted = false; // the seeded run has no launcher to check
            auto store = storage::RunStore::open(db, options);
            QVERIFY(store.ok());
            storage::RunEnd end;
            end.status = storage::RunStatus::Completed;
            QVERIFY(store->finishRun(firstId, end).ok());
        }
        QTRY_COMPARE_WITH_TIMEOUT(launched().size(), 2, 10000);
        QVERIFY(launched().at(1).contains(QStringLiteral("--mixed_precision bf16")));
        QCOMPARE(page.queuedSweepRuns(), 0);
        QVERIFY(window.runsPage()->queuedRuns().isEmpty());

        // A recipe's sweep too (#21 problem 3: 4 modes at once on 2 cores compared nothing).
        ui::LaunchRequest recipe;
        recipe.recipeFile = QStringLiteral("/r/demo.yaml");
        recipe.runName = QStringLiteral("rs");
        QCOMPARE(page.startPrecisionSweep(recipe, {QStringLiteral("no"), QStringLiteral("fp16"), QStringLiteral("bf16")}),
                 QString());
        QTRY_COMPARE(launched().size(), 3);
        QTest::qWait(300);
        QCOMPARE(launched().size(), 3); // one started, two waiting
        QVERIFY(launched().at(2).contains(QStringLiteral("--recipe /r/demo.yaml"))
                && launched().at(2).contains(QStringLiteral("--run_name rs-no")));
        QCOMPARE(page.queuedSweepRuns(), 2);
        qunsetenv("SHARDSCOPE_LAUNCHER");
    }

    // #23: the sweep offers fp8 and runs it (emulated on this CPU); Compare then shows fp8 against
    // bf16: a loss curve each, tokens/s each, and the precision as the difference between them.
    void fp8AgainstBf16SideBySide()
    {
        const QString launcher = qEnvironmentVariable("SHARDSCOPE_REAL_LAUNCHER");
        if (launcher.isEmpty())
            QSKIP("built without the engine");
        QTemporaryDir dir;
        const auto db = std::filesystem::path(dir.path().toStdString()) / "history.sqlite";
        QFile recipe(dir.filePath(QStringLiteral("mlp.yaml")));
        QVERIFY(recipe.open(QIODevice::WriteOnly));
        recipe.write("name: fp8-sweep\nmodel: {type: mlp, input_dim: 16, hidden_dim: 32, depth: 3, output_dim: 1}\n"
                     "data: {type: synthetic_regression, num_samples: 512, eval_fraction: 0}\n"
                     "training: {per_device_batch_size: 8, max_steps: 12}\n");
        recipe.close();
        qputenv("SHARDSCOPE_LAUNCHER", launcher.toUtf8());
        qputenv("SHARDSCOPE_HOME", dir.path().toUtf8());
        seedRun(db, SeedRun{.name = "other"}); // the history exists
        ui::ComparePage page(db);
        QVERIFY(ui::sweepPrecisionModes().contains(QStringLiteral("fp8")));
        ui::LaunchRequest request;
        request.recipeFile = recipe.fileName();
        request.numProcesses = 1;
        request.runName = QStringLiteral("p");
        QCOMPARE(page.startPrecisionSweep(request, {QStringLiteral("bf16"), QStringLiteral("fp8")}), QString());
        std::vector<std::int64_t> ids;
        QTRY_VERIFY_WITH_TIMEOUT(
            [&] {
                storage::StoreOptions options;
                options.markInterrupted = false; // a reader beside the launcher's writer
                auto store = storage::RunStore::open(db, options);
                if (!store.ok())
                    return false;
                ids.clear();
                const auto runs = store->listRuns();
                if (!runs.ok())
                    return false;
                for (const auto& run : *runs)
                    if (run.name.rfind("p-", 0) == 0 && run.status == storage::RunStatus::Completed)
                        ids.push_back(run.id);
                return ids.size() == 2;
            }(),
            120000);
        qunsetenv("SHARDSCOPE_LAUNCHER");
        qunsetenv("SHARDSCOPE_HOME");
        QSignalSpy updated(&page, &ui::ComparePage::comparisonUpdated);
        page.setRuns(ids);
        QTRY_COMPARE(updated.count(), 1);
        QCOMPARE(page.chart()->seriesCount(), 2);
        QCOMPARE(page.chart()->pointCount(0), 12);
        QCOMPARE(page.chart()->pointCount(1), 12);
        auto* stats = page.statsModel();
        QCOMPARE(stats->rowCount(), 2);
        for (int row = 0; row < 2; ++row)
            QVERIFY2(!stats->index(row, ui::RunStatsModel::TokensPerS).data().toString().isEmpty(), "no tokens/s");
        QStringList names{stats->index(0, ui::RunStatsModel::Run).data().toString(),
                          stats->index(1, ui::RunStatsModel::Run).data().toString()};
        names.sort(); // shown as "name (id)"
        QVERIFY2(names[0].startsWith(QStringLiteral("p-bf16 ")) && names[1].startsWith(QStringLiteral("p-fp8 ")),
                 qPrintable(names.join(", ")));
        QVERIFY2(page.diffModel()->visibleKeys().contains(QStringLiteral("run:mixed_precision")),
                 qPrintable(page.diffModel()->visibleKeys().join(' ')));
        const int row = int(page.diffModel()->visibleKeys().indexOf(QStringLiteral("run:mixed_precision")));
        QStringList precisions{page.diffModel()->index(row, 2).data().toString(),
                               page.diffModel()->index(row, 3).data().toString()};
        precisions.sort();
        QCOMPARE(precisions, (QStringList{"bf16", "fp8"}));
    }

    void sweepArguments()
    {
        ui::LaunchRequest request;
        request.recipeFile = QStringLiteral("/r/demo.yaml");
        request.runName = QStringLiteral("s-fp16");
        request.maxSteps = 30;
        request.mixedPrecision = QStringLiteral("fp16");
        QCOMPARE(ui::launchArguments(request),
                 (QStringList{"launch", "--num_processes", "2", "--recipe", "/r/demo.yaml", "--run_name", "s-fp16", "--max_steps",
                              "30", "--mixed_precision", "fp16"}));
        QCOMPARE(ui::sweepPrecisionModes(), (QStringList{"no", "fp16", "bf16", "bf16-pure", "fp8"}));
        // A script's arguments as typed on a shell's command line.
        QCOMPARE(ui::splitCommandLine(QStringLiteral("  --lr '1e-3' --name \"my run\" a\\ b --x=\"\" ")),
                 (QStringList{"--lr", "1e-3", "--name", "my run", "a b", "--x="}));
        QCOMPARE(ui::splitCommandLine(QStringLiteral("'it''s'")), QStringList{"its"});
        QCOMPARE(ui::splitCommandLine(QString()), QStringList());
        request.scriptFile = QStringLiteral("/s/train.py");
        request.python = QStringLiteral("/v/bin/python");
        request.workerArgs = {QStringLiteral("--steps"), QStringLiteral("3")};
        QCOMPARE(ui::launchArguments(request),
                 (QStringList{"launch", "--num_processes", "2", "--script", "/s/train.py", "--python", "/v/bin/python",
                              "--run_name", "s-fp16", "--max_steps", "30", "--mixed_precision", "fp16", "--", "--steps", "3"}));
    }
};

QTEST_MAIN(TestComparePage)
#include "tst_compare_page.moc"
