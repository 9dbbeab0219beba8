// The Run page: a run in the store or in a run directory fills the charts, new rows are appended
// within a second of landing, the x axis switches between step and time, zoom is linked across
// charts, skipped fp16 steps are marked, and a failed run shows its error with the failing rank's
// log selected. With $SHARDSCOPE_LAUNCHER pointing at a real `shardscope`, launching the demo
// recipe shows live points within seconds.

#include "engine/plan/run_plan.h"
#include "engine/protocol/events.h"
#include "engine/recipe/recipe.h"
#include "test_store.h"
#include "tests/common/demo_recipes.h"
#include "ui/format.h"
#include "ui/generation_dialog.h"
#include "ui/main_window.h"
#include "ui/metric_chart.h"
#include "ui/run_data_source.h"
#include "ui/run_launcher.h"
#include "ui/run_page.h"

#include <QAction>
#include <QComboBox>
#include <QProcess>
#include <QPushButton>
#include <QSlider>
#include <QTabWidget>
#include <QTextBrowser>
#include <QStatusBar>
#include <QDir>
#include <QElapsedTimer>
#include <QLabel>
#include <QScopeGuard>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QLineEdit>
#include <QtTest>

#include <fstream>

using namespace shardscope;
using shardscope::testing::SeedRun;
using shardscope::testing::seedRun;
using ui::MetricChart;
using ui::RunPage;

namespace {

std::filesystem::path dbIn(const QTemporaryDir& dir)
{
    return std::filesystem::path(dir.path().toStdString()) / "history.sqlite";
}

void writeLog(const std::string& runDir, int rank, const std::string& text)
{
    std::filesystem::create_directories(runDir + "/logs");
    std::ofstream(runDir + "/logs/rank" + std::to_string(rank) + ".log") << text;
}

} // namespace

class TestRunPage : public QObject {
    Q_OBJECT
private slots:
    // The ETA's target: the recipe's max_steps, in block or flow style (a SLURM run's recipe was
    // shown as "step 6/100" when written `training: {max_steps: 6}`), else the recipe's default.
    void maxStepsComeFromTheRecipeInAnyStyle()
    {
        QCOMPARE(ui::recipeMaxSteps("name: a\ntraining:\n  max_steps: 7\n"), std::optional<std::int64_t>(7));
        QCOMPARE(ui::recipeMaxSteps("name: a\ntraining: {per_device_batch_size: 2, max_steps: 6}\n"),
                 std::optional<std::int64_t>(6));
        QCOMPARE(ui::recipeMaxSteps("name: a\n"), std::optional<std::int64_t>(config::Recipe{}.maxSteps));
        // #45 point 10: a script run's steps are its arguments' ("step 40/100" for one that asked for 40).
        const std::string script = "script:\n  path: \"/w/train.py\"\n  args:\n    - \"--steps\"\n    - \"40\"\n"
                                   "  python: \"/v/bin/python\"\n  num_processes: 2\n";
        QCOMPARE(ui::recipeMaxSteps(script), std::optional<std::int64_t>(40));
        QCOMPARE(ui::recipeMaxSteps("script:\n  path: \"/w/t.py\"\n  args:\n    - \"--max_train_steps=12\"\n"),
                 std::optional<std::int64_t>(12));
        QCOMPARE(ui::recipeMaxSteps("script:\n  path: \"/w/t.py\"\n  args: []\n"), std::nullopt);
    }

    void storeRunFillsEveryChart()
    {
        QTemporaryDir dir;
        const auto db = dbIn(dir);
        const auto id = seedRun(db, {.name = "done", .mixedPrecision = "fp16", .steps = 20});
        RunPage page;
        QSignalSpy finished(&page, &RunPage::runFinished);
        page.openStoreRun(db, id);
        QTRY_VERIFY(!page.polling()); // the first answers from the history thread
        QTRY_COMPARE(finished.count(), 1);
        QCOMPARE(page.chart(QStringLiteral("loss"))->pointCount(0), 20);
        QCOMPARE(page.chart(QStringLiteral("loss"))->seriesCount(), 1); // rank 0's copy of the global loss
        QCOMPARE(page.chart(QStringLiteral("memory"))->seriesCount(), 2); // one per rank
        QCOMPARE(page.chart(QStringLiteral("step_time"))->seriesCount(), 2);
        QCOMPARE(page.chart(QStringLiteral("lr"))->pointCount(0), 20);
        QCOMPARE(page.chart(QStringLiteral("tokens_per_s"))->pointCount(0), 20);
        // Steps 7 and 14 were skipped: two markers on the loss-scale chart, at the halved scale.
        auto* scale = page.chart(QStringLiteral("loss_scale"));
        QCOMPARE(scale->seriesCount(), 2);
        QCOMPARE(scale->pointCount(1), 2);
        QCOMPARE(scale->series(1)->data()->at(0)->key, 7.0);
        QCOMPARE(scale->series(1)->data()->at(0)->value, 32768.0);
        QVERIFY(page.findChild<QLabel*>(QStringLiteral("runProgress"))->text().contains(QStringLiteral("step 20/100")));
        QVERIFY(!page.findChild<QWidget*>(QStringLiteral("stopButton"))->isEnabled());
    }

    void liveRowsAppearWithinASecond()
    {
        QTemporaryDir dir;
        const auto db = dbIn(dir);
        const auto id = seedRun(db, {.name = "live", .steps = 5, .status = storage::RunStatus::Running});
        RunPage page;
        page.openStoreRun(db, id);
        QTRY_VERIFY(!page.polling()); // the first answers from the history thread
        auto* loss = page.chart(QStringLiteral("loss"));
        QCOMPARE(loss->pointCount(0), 5);
        QVERIFY(page.findChild<QLabel*>(QStringLiteral("runProgress"))->text().contains(QStringLiteral("ETA")));

        auto writer = storage::RunWriter::open(db, id);
        QVERIFY(writer);
        QElapsedTimer clock;
        clock.start();
        for (int step = 6; step <= 8; ++step)
            (*writer)->addMetrics(0, step, 1.7e9 + step, {{storage::keys::kLoss, 0.5}});
        QVERIFY((*writer)->flush());
        QTRY_COMPARE_WITH_TIMEOUT(loss->pointCount(0), 8, 1000);
        QVERIFY2(clock.elapsed() < 1000, qPrintable(QString::number(clock.elapsed())));
        // Appended, not reloaded: the first points are the same objects' values.
        QCOMPARE(loss->series(0)->data()->at(7)->key, 8.0);
        QVERIFY((*writer)->finish({}));
        QSignalSpy finished(&page, &RunPage::runFinished);
        QTRY_COMPARE(finished.count(), 1);
        QCOMPARE(finished.first().first().value<storage::RunStatus>(), storage::RunStatus::Completed);
    }

    // #45 point 6: every eval of a live run reaches the chart, the last one too. Both ranks report
    // each eval; the page read new evals as a tail of a list sorted by rank and step, so rank 0's
    // later evals (sorted before rank 1's older ones) were never drawn.
    void liveEvalsAllReachTheChart()
    {
        QTemporaryDir dir;
        const auto db = dbIn(dir);
        const auto id = seedRun(db, {.name = "evals", .steps = 60, .status = storage::RunStatus::Running});
        auto writer = storage::RunWriter::open(db, id);
        QVERIFY(writer);
        for (int rank : {0, 1})
            (*writer)->addEval({rank, 50, 1.7e9 + 50, "loss", 2.5});
        QVERIFY((*writer)->flush());
        RunPage page;
        page.openStoreRun(db, id);
        QTRY_VERIFY(!page.polling());
        auto* loss = page.chart(QStringLiteral("loss"));
        const auto evalSeries = [&] {
            for (int i = 0; i < loss->seriesCount(); ++i)
                if (loss->seriesName(i) == QStringLiteral("eval"))
                    return i;
            return -1;
        };
        QTRY_VERIFY(evalSeries() >= 0);
        QTRY_COMPARE(loss->pointCount(evalSeries()), 1);
        for (int step : {100, 150})
            for (int rank : {0, 1})
                (*writer)->addEval({rank, step, 1.7e9 + step, "loss", 3.0 - step / 100.0});
        for (int step = 61; step <= 150; ++step)
            (*writer)->addMetrics(0, step, 1.7e9 + step, {{storage::keys::kLoss, 0.5}});
        QVERIFY((*writer)->finish({}));
        QSignalSpy finished(&page, &RunPage::runFinished);
        QTRY_COMPARE(finished.count(), 1);
        const int eval = evalSeries();
        QCOMPARE(loss->pointCount(eval), 3);
        QCOMPARE(loss->series(eval)->data()->at(1)->key, 100.0);
        QCOMPARE(loss->series(eval)->data()->at(2)->key, 150.0);
        QCOMPARE(loss->series(eval)->data()->at(2)->value, 1.5);
    }

    void xAxisByStepOrTime()
    {
        QTemporaryDir dir;
        const auto db = dbIn(dir);
        const auto id = seedRun(db, {.name = "axes", .steps = 10});
        RunPage page;
        page.openStoreRun(db, id);
        QTRY_VERIFY(!page.polling()); // the first answers from the history thread
        auto* loss = page.chart(QStringLiteral("loss"));
        QCOMPARE(loss->series(0)->data()->at(9)->key, 10.0);
        page.setXAxisMode(RunPage::XAxis::Time);
        QCOMPARE(loss->pointCount(0), 10);
        // Seeded rows are one second apart; time is measured from the run's start.
        const double t9 = loss->series(0)->data()->at(9)->key;
        const double t0 = loss->series(0)->data()->at(0)->key;
        QCOMPARE(t9 - t0, 9.0);
        // By tokens seen (all ranks): 128 tokens per rank per step, 2 ranks (what W&B users plot).
        page.setXAxisMode(RunPage::XAxis::Tokens);
        QCOMPARE(loss->series(0)->data()->at(9)->key, 10.0 * 128 * 2);
        QCOMPARE(loss->xAxis->label(), QStringLiteral("tokens (all ranks)"));
        page.setXAxisMode(RunPage::XAxis::Step);
        QCOMPARE(loss->series(0)->data()->at(9)->key, 10.0);
    }

    void zoomIsLinked()
    {
        QTemporaryDir dir;
        const auto db = dbIn(dir);
        const auto id = seedRun(db, {.name = "zoom", .steps = 50});
        RunPage page;
        page.resize(1200, 900);
        page.show();
        QVERIFY(QTest::qWaitForWindowExposed(&page));
        page.openStoreRun(db, id);
        QTRY_VERIFY(!page.polling()); // the first answers from the history thread
        auto* loss = page.chart(QStringLiteral("loss"));
        auto* memory = page.chart(QStringLiteral("memory"));
        QVERIFY(loss->following());
        // A wheel zoom on one chart: every chart takes the same x range.
        const QPoint center = loss->axisRect()->rect().center();
        QWheelEvent wheel(center, loss->mapToGlobal(center), QPoint(), QPoint(0, 240), Qt::NoButton, Qt::NoModifier,
                          Qt::NoScrollPhase, false);
        QApplication::sendEvent(loss, &wheel);
        QVERIFY(!loss->following());
        QVERIFY(loss->xAxis->range().size() < 49.0);
        QCOMPARE(memory->xAxis->range().lower, loss->xAxis->range().lower);
        QCOMPARE(memory->xAxis->range().upper, loss->xAxis->range().upper);
        // Double click: all follow the data again.
        QTest::mouseDClick(memory, Qt::LeftButton, {}, memory->axisRect()->rect().center());
        QTRY_VERIFY(loss->following());
        QCOMPARE(loss->xAxis->range().upper, 50.0);
    }

    // #21 problem 10: the loss-scale panel was drawn empty for non-fp16 runs and kept the last
    // run's range; the run's colour is the one Runs and Compare give it, ranks' as in Trace.
    void lossScalePanelOnlyForFp16AndColoursAreStable()
    {
        QTemporaryDir dir;
        const auto db = dbIn(dir);
        const auto fp16 = seedRun(db, {.name = "half", .mixedPrecision = "fp16", .steps = 10});
        const auto bf16 = seedRun(db, {.name = "brain", .mixedPrecision = "bf16", .steps = 10});
        RunPage page;
        page.openStoreRun(db, fp16);
        QTRY_VERIFY(!page.polling());
        auto* scale = page.chart(QStringLiteral("loss_scale"));
        QVERIFY(!scale->isHidden());
        QVERIFY(scale->yAxis->range().upper > 65536);
        page.openStoreRun(db, bf16);
        QTRY_VERIFY(!page.polling() && page.chart(QStringLiteral("loss"))->pointCount(0) == 10);
        QVERIFY(scale->isHidden());
        QCOMPARE(page.chart(QStringLiteral("loss"))->seriesColor(0), ui::runColor(bf16));
        auto* stepTime = page.chart(QStringLiteral("step_time"));
        QCOMPARE(stepTime->seriesCount(), 2);
        for (int i = 0; i < 2; ++i)
            QCOMPARE(stepTime->seriesColor(i), ui::rankColor(stepTime->seriesName(i).back().digitValue()));
    }

    // #21 (what W&B users bring): the user hides and enlarges charts (right-click, the Charts
    // menu); the layout is remembered in the workbench's settings and comes back in a new page.
    void chartLayoutIsRememberedAcrossPages()
    {
        QTemporaryDir dir;
        const QString ini = dir.filePath(QStringLiteral("workbench.ini"));
        const auto db = dbIn(dir);
        const auto id = seedRun(db, {.name = "layout", .steps = 5});
        {
            RunPage page;
            page.setLayoutSettingsFile(ini);
            page.resize(1200, 800);
            page.show();
            QVERIFY(QTest::qWaitForWindowExposed(&page));
            page.openStoreRun(db, id);
            QTRY_VERIFY(!page.polling() && page.chart(QStringLiteral("loss"))->pointCount(0) == 5);
            auto* lr = page.chart(QStringLiteral("lr"));
            auto* loss = page.chart(QStringLiteral("loss"));
            QVERIFY(!lr->isHidden());
            const int normalWidth = loss->width();
            // The chart's own menu carries the page's actions.
            auto* enlarge = loss->findChild<QAction*>(QStringLiteral("enlarge_loss"));
            QVERIFY(enlarge && enlarge->isCheckable());
            enlarge->trigger();
            QVERIFY(page.chartEnlarged(QStringLiteral("loss")));
            page.setChartHidden(QStringLiteral("lr"), true);
            QTRY_VERIFY(lr->isHidden());
            QTRY_VERIFY(loss->width() > normalWidth * 3 / 2); // a row of its own
            QVERIFY(loss->minimumHeight() >= 2 * MetricChart::kMinimumHeight);
        }
        {
            RunPage page;
            page.setLayoutSettingsFile(ini);
            QVERIFY(page.chartHidden(QStringLiteral("lr")));
            QVERIFY(page.chartEnlarged(QStringLiteral("loss")));
            QVERIFY(page.chart(QStringLiteral("loss"))->findChild<QAction*>(QStringLiteral("enlarge_loss"))->isChecked());
            QVERIFY(page.chart(QStringLiteral("lr"))->isHidden());
            QVERIFY(!page.chart(QStringLiteral("grad_norm"))->isHidden());
            page.resetChartLayout();
            QVERIFY(!page.chartHidden(QStringLiteral("lr")) && !page.chartEnlarged(QStringLiteral("loss")));
        }
        RunPage again;
        again.setLayoutSettingsFile(ini);
        QVERIFY(!again.chartHidden(QStringLiteral("lr"))); // the reset was remembered too
        // Hidden by the user stays hidden; the loss-scale panel still only for fp16.
        QVERIFY(again.chart(QStringLiteral("loss_scale"))->isHidden());
    }

    // #22: MFU per rank, in percent, where the run reports it; no empty panel where it does not
    // (a script run, a GPU the peak table does not know).
    void mfuPanelShowsEachRanksUtilisation()
    {
        QTemporaryDir dir;
        const auto db = dbIn(dir);
        const auto with = seedRun(db, {.name = "with-mfu", .steps = 6, .mfu = true});
        const auto without = seedRun(db, {.name = "without", .steps = 6});
        RunPage page;
        page.openStoreRun(db, with);
        auto* mfu = page.chart(QStringLiteral("mfu"));
        QVERIFY(mfu);
        QTRY_VERIFY(!page.polling() && mfu->seriesCount() == 2 && mfu->pointCount(1) == 6);
        QVERIFY(!mfu->isHidden());
        QCOMPARE(mfu->pointNear(0, 3)->y(), 30.0);
        QCOMPARE(mfu->pointNear(1, 3)->y(), 31.0);
        QCOMPARE(mfu->seriesColor(1), ui::rankColor(1));
        auto* status = page.findChild<QLabel*>(QStringLiteral("runStatus"));
        QVERIFY(!status->text().contains(QStringLiteral("emulated")));
        QCOMPARE(status->toolTip(), ui::plainToolTip(QStringLiteral("MFU against test peak of bfloat16")));
        page.openStoreRun(db, without);
        QTRY_VERIFY(!page.polling() && page.chart(QStringLiteral("loss"))->pointCount(0) == 6);
        QVERIFY(mfu->isHidden());
        QVERIFY(status->toolTip().isEmpty());
        // #45 point 5: an emulated precision is said in the header.
        const auto emulated = seedRun(
            db, {.name = "fp16", .mixedPrecision = "fp16", .steps = 6, .mfu = true, .precisionEmulated = true});
        page.openStoreRun(db, emulated);
        QTRY_VERIFY(!page.polling() && mfu->pointCount(1) == 6);
        QVERIFY2(status->text().contains(QStringLiteral("precision fp16 (emulated on this hardware: slower than float32)")),
                 qPrintable(status->text()));
        QCOMPARE(status->toolTip(), ui::plainToolTip(QStringLiteral("MFU against test peak of float32")));
    }

    // #22: compute-only time per rank, the launcher's straggler flag marked on the slow rank's
    // curve at the flagged step and said above the charts.
    // #22 point 4: memory after each phase of the step, rank 0's, in a panel of its own that only
    // runs reporting it show.
    void phaseMemoryPanelShowsWhereMemoryGrows()
    {
        QTemporaryDir dir;
        const auto db = dbIn(dir);
        const auto without = seedRun(db, {.name = "plain", .steps = 4});
        const auto with = seedRun(db, {.name = "phases", .steps = 6, .phaseMemory = true});
        RunPage page;
        page.openStoreRun(db, without);
        QTRY_VERIFY(!page.polling());
        QVERIFY(!page.chart(QStringLiteral("memory_phases"))->isVisibleTo(&page));
        page.openStoreRun(db, with);
        QTRY_COMPARE(page.chart(QStringLiteral("memory_phases"))->seriesCount(), 3);
        auto* phases = page.chart(QStringLiteral("memory_phases"));
        QVERIFY(phases->isVisibleTo(&page));
        QTRY_COMPARE(phases->pointCount(2), 6);
        QCOMPARE(phases->series(0)->name(), QStringLiteral("after forward"));
        QCOMPARE(phases->series(1)->data()->at(5)->value, 150e6 + 6); // rank 0's after backward at step 6
        QCOMPARE(phases->series(2)->name(), QStringLiteral("after optimizer"));
    }

    // #45 point 7: the memory chart says what its curve counts (RSS: the whole process), and
    // where the ranks report their model states, gives rank 0's kept ones (what the Configure
    // page's estimate counts) and their peak in a step beside it; a script run's ranks report none.
    void memoryChartSaysWhatItCounts()
    {
        QTemporaryDir dir;
        const auto db = dbIn(dir);
        const auto script = seedRun(db, {.name = "script", .steps = 3});
        const auto engine = seedRun(db, {.name = "engine", .steps = 3, .phaseMemory = true});
        RunPage page;
        page.openStoreRun(db, script);
        QTRY_VERIFY(!page.polling());
        auto* memory = page.chart(QStringLiteral("memory"));
        QCOMPARE(memory->note(), QStringLiteral("RSS: each rank's whole process (runtime, data, caches, activations)"));
        page.openStoreRun(db, engine);
        QTRY_VERIFY(memory->note().contains(QLatin1String("Model states")));
        QVERIFY(memory->note().startsWith(QLatin1String("RSS: each rank's whole process")));
        QVERIFY2(memory->note().endsWith(
                     QStringLiteral("Model states kept, rank 0: params %1 · grads %1 · optimizer %2 (peak %3 · %4)")
                         .arg(shardscope::ui::formatBytes(2e6), shardscope::ui::formatBytes(4e6),
                              shardscope::ui::formatBytes(3e6), shardscope::ui::formatBytes(3.5e6))),
                 qPrintable(memory->note()));
        QVERIFY(memory->toolTip().contains(QLatin1String("as the memory estimate on the Configure page counts them")));
    }

    // #22 point 1: Diagnose runs `shardscope runs diagnose <run dir>` in the background for a live
    // run and shows its answer above the charts; an ended run cannot be asked.
    void diagnoseButtonAsksTheLiveRun()
    {
        QTemporaryDir dir;
        const auto db = dbIn(dir);
        // A stand-in for shardscope that says what it was asked.
        const QString fake = dir.filePath(QStringLiteral("shardscope"));
        {
            std::ofstream script(fake.toStdString());
            script << "#!/bin/sh\necho \"asked: $*\"\necho \"rank 1 never entered it\"\n";
        }
        QFile::setPermissions(fake, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
        // Put back as it was when this test ends, pass or fail: it was unset, and the real
        // launches after it (Resume, Try model…, the demo) were skipped in every full run.
        const QByteArray realLauncher = qgetenv("SHARDSCOPE_LAUNCHER");
        const auto restore = qScopeGuard([&realLauncher] {
            if (realLauncher.isEmpty())
                qunsetenv("SHARDSCOPE_LAUNCHER");
            else
                qputenv("SHARDSCOPE_LAUNCHER", realLauncher);
        });
        qputenv("SHARDSCOPE_LAUNCHER", fake.toUtf8());
        const auto live = seedRun(db, {.name = "live", .steps = 3, .status = storage::RunStatus::Running});
        const auto ended = seedRun(db, {.name = "ended", .steps = 3});
        RunPage page;
        page.openStoreRun(db, ended);
        QTRY_VERIFY(!page.polling());
        auto* diagnose = page.findChild<QPushButton*>(QStringLiteral("diagnoseButton"));
        QVERIFY(!diagnose->isEnabled());
        page.openStoreRun(db, live);
        QTRY_VERIFY(diagnose->isEnabled());
        diagnose->click();
        auto* answer = page.findChild<QLabel*>(QStringLiteral("runDiagnosis"));
        const QString runDir = QString::fromStdString((dbIn(dir).parent_path() / "runs" / "live").string());
        QTRY_VERIFY2(answer->text().contains(QStringLiteral("asked: runs diagnose ") + runDir), qPrintable(answer->text()));
        QVERIFY(answer->text().contains(QStringLiteral("rank 1 never entered it")));
        QVERIFY(answer->isVisibleTo(&page));
        QTRY_VERIFY(diagnose->isEnabled()); // it can ask again
    }

    void stragglerIsMarkedAndSaid()
    {
        QTemporaryDir dir;
        const auto db = dbIn(dir);
        const auto id = seedRun(db, {.name = "straggling", .steps = 8, .stragglerRank = 1});
        const auto calm = seedRun(db, {.name = "calm", .steps = 8});
        RunPage page;
        page.openStoreRun(db, id);
        auto* compute = page.chart(QStringLiteral("compute_time"));
        QTRY_VERIFY(!page.polling() && compute->seriesCount() == 3 && compute->pointCount(1) == 8);
        int marker = -1;
        for (int i = 0; i < compute->seriesCount(); ++i)
            if (compute->seriesName(i).startsWith(QStringLiteral("straggler")))
                marker = i;
        QVERIFY(marker >= 0);
        QCOMPARE(compute->seriesName(marker), QStringLiteral("straggler (rank 1)"));
        QCOMPARE(compute->pointCount(marker), 1);
        QCOMPARE(*compute->pointNear(marker, 5), QPointF(5, 0.2)); // on rank 1's curve at step 5
        auto* alerts = page.findChild<QLabel*>(QStringLiteral("runAlerts"));
        QVERIFY(!alerts->isHidden());
        QVERIFY2(alerts->text().contains(QStringLiteral("rank 1 computed 2.00×")) && alerts->text().contains("step 5"),
                 qPrintable(alerts->text()));
        page.openStoreRun(db, calm);
        QTRY_VERIFY(!page.polling() && page.chart(QStringLiteral("loss"))->pointCount(0) == 8);
        QVERIFY(alerts->isHidden());
    }

    // #22: a loss spike the launcher reported is marked on the loss curve at its step and said
    // with where its data was.
    void lossSpikeIsMarkedAndSaid()
    {
        QTemporaryDir dir;
        const auto db = dbIn(dir);
        const auto id = seedRun(db, {.name = "spiky", .steps = 8, .lossSpikeAtStep = 4});
        RunPage page;
        page.openStoreRun(db, id);
        auto* loss = page.chart(QStringLiteral("loss"));
        QTRY_VERIFY(!page.polling() && loss->seriesCount() >= 2 && loss->pointCount(0) == 8);
        int marker = -1;
        for (int i = 0; i < loss->seriesCount(); ++i)
            if (loss->seriesName(i) == QStringLiteral("loss spike"))
                marker = i;
        QVERIFY(marker >= 0);
        QCOMPARE(*loss->pointNear(marker, 4), QPointF(4, 0.25)); // at step 4, on the curve (loss 1/4)
        auto* alerts = page.findChild<QLabel*>(QStringLiteral("runAlerts"));
        QVERIFY(!alerts->isHidden());
        QVERIFY2(
            alerts->text().contains(QStringLiteral("Loss spike at step 4 (loss 0.25; its data: epoch 0, batch 3 of rank 0)")),
            qPrintable(alerts->text()));
    }

    void followButtonShowsWhetherChartsFollowAndSmoothingAppliesToAll()
    {
        QTemporaryDir dir;
        const auto db = dbIn(dir);
        const auto id = seedRun(db, {.name = "follow", .steps = 30});
        RunPage page;
        page.resize(1200, 900);
        page.show();
        QVERIFY(QTest::qWaitForWindowExposed(&page));
        page.openStoreRun(db, id);
        QTRY_VERIFY(!page.polling());
        auto* follow = page.findChild<QPushButton*>(QStringLiteral("followButton"));
        QVERIFY(follow && follow->isChecked());
        auto* loss = page.chart(QStringLiteral("loss"));
        QTest::mouseClick(loss, Qt::LeftButton, {}, loss->axisRect()->rect().center());
        QVERIFY(follow->isChecked()); // a click is not a zoom
        const QPoint center = loss->axisRect()->rect().center();
        QWheelEvent wheel(center, loss->mapToGlobal(center), QPoint(), QPoint(0, 240), Qt::NoButton, Qt::NoModifier,
                          Qt::NoScrollPhase, false);
        QApplication::sendEvent(loss, &wheel);
        QVERIFY(!follow->isChecked());
        QTest::mouseClick(follow, Qt::LeftButton);
        QVERIFY(follow->isChecked() && loss->following() && page.chart(QStringLiteral("memory"))->following());

        auto* slider = page.findChild<QSlider*>(QStringLiteral("smoothing"));
        QVERIFY(slider);
        slider->setValue(60);
        QCOMPARE(loss->smoothing(), 0.6);
        QCOMPARE(page.chart(QStringLiteral("grad_norm"))->smoothing(), 0.6);
        QVector<double> raw;
        for (auto it = loss->series(0)->data()->constBegin(); it != loss->series(0)->data()->constEnd(); ++it)
            raw << it->value;
        QCOMPARE(loss->smoothedValues(0), ui::tensorBoardSmoothed(raw, 0.6));
    }

    // #43 point 3, the GUI side: what a run recorded (an imported run's name and error may be anything
    // its files said) is shown as text, never read as markup: a name or message with tags shows its
    // tags, and no label or tooltip renders them.
    void recordedTextIsShownAsText()
    {
        QTemporaryDir dir;
        const auto db = dbIn(dir);
        const std::string markup = "<b>bold</b><img src=\"/etc/passwd\"><a href=\"x\">status completed</a>";
        const auto id = seedRun(db, {.name = "run " + markup,
                                     .steps = 2,
                                     .status = storage::RunStatus::Failed,
                                     .failingRank = 0,
                                     .error = "rank 0: " + markup});
        RunPage page;
        page.openStoreRun(db, id);
        QTRY_VERIFY(!page.polling());
        for (const char* name : {"runTitle", "runError", "runDiagnosis", "runAlerts"}) {
            auto* label = page.findChild<QLabel*>(QLatin1String(name));
            QVERIFY2(label && label->textFormat() == Qt::PlainText, name);
        }
        auto* error = page.findChild<QLabel*>(QStringLiteral("runError"));
        QVERIFY2(error->text().contains(QString::fromStdString(markup)), qPrintable(error->text()));
        // A tooltip is rich text when it looks like it: the name's tags are escaped inside one.
        const QString tip = page.findChild<QLabel*>(QStringLiteral("runTitle"))->toolTip();
        QVERIFY2(tip.contains(QStringLiteral("&lt;b&gt;bold&lt;/b&gt;")) && !tip.contains(QStringLiteral("<b>")),
                 qPrintable(tip));
    }

    void failedRunShowsFailingRank()
    {
        QTemporaryDir dir;
        const auto db = dbIn(dir);
        const std::string runDir = dir.filePath(QStringLiteral("runs/bad")).toStdString();
        writeLog(runDir, 0, "step 1\nstep 2\nstopped by launcher\n");
        writeLog(runDir, 1, "step 1\nWARNING overflow\nstep 2\nERROR loss is NaN\n");
        const auto id = seedRun(
            db, {.name = "bad", .steps = 2, .status = storage::RunStatus::Failed, .failingRank = 1, .runDir = runDir});
        RunPage page;
        page.openStoreRun(db, id);
        QTRY_VERIFY(!page.polling()); // the first answers from the history thread
        auto* error = page.findChild<QLabel*>(QStringLiteral("runError"));
        QVERIFY(!error->isHidden());
        QVERIFY(error->text().contains(QStringLiteral("rank 1")));
        QCOMPARE(page.logRank(), 1);
        auto* ranks = page.findChild<QComboBox*>(QStringLiteral("logRank"));
        QVERIFY(ranks->itemText(1).contains(QStringLiteral("failed")));
        QVERIFY(page.logText().contains(QStringLiteral("ERROR loss is NaN")));
        page.setLogFilter(QStringLiteral("error"));
        QCOMPARE(page.logText(), QStringLiteral("ERROR loss is NaN"));
        page.setLogFilter(QString());
        page.setLogRank(0);
        QTRY_VERIFY(page.logText().contains(QStringLiteral("stopped by launcher"))); // read on the history thread
    }

    void eventFileSourceTailsCompleteLines()
    {
        QTemporaryDir dir;
        const auto runDir = std::filesystem::path(dir.path().toStdString()) / "tail";
        std::filesystem::create_directories(runDir);
        std::ofstream(runDir / "recipe.yaml") << "training:\n  max_steps: 40\n";
        auto line = [](int rank, int step, double loss) {
            protocol::Event e;
            e.rank = rank;
            e.time = 1.7e9 + step;
            protocol::StepEvent s;
            s.step = step;
            s.loss = loss;
            s.lr = 0.1;
            s.lossScale = 1024.0;
            s.mem.rss = 1000 + rank;
            e.body = s;
            return protocol::encodeEvent(e);
        };
        std::ofstream out(runDir / "events.jsonl");
        out << line(0, 1, 1.0) << '\n' << line(1, 1, 1.0) << '\n' << line(0, 2, 0.5).substr(0, 20);
        out.flush();

        ui::EventFileRunSource source(runDir);
        auto first = source.poll();
        QVERIFY(first);
        QCOMPARE(first->info.status, storage::RunStatus::Running);
        QCOMPARE(first->info.maxSteps, std::optional<std::int64_t>(40));
        QCOMPARE(std::count_if(first->rows.begin(), first->rows.end(), [](auto& r) { return r.key == "loss"; }), 2);

        RunPage page;
        page.openRunDirectory(runDir);
        QTRY_VERIFY(!page.polling()); // the first answers from the history thread
        QCOMPARE(page.chart(QStringLiteral("loss"))->pointCount(0), 1); // the half line is not read
        out << line(0, 2, 0.5).substr(20) << '\n';
        protocol::Event done;
        done.rank = 0;
        done.time = 1.7e9 + 3;
        done.body = protocol::DoneEvent{"completed", 2, 2.0};
        out << protocol::encodeEvent(done) << '\n';
        out.flush();
        QTRY_COMPARE_WITH_TIMEOUT(page.chart(QStringLiteral("loss"))->pointCount(0), 2, 1000);
        QTRY_COMPARE(page.info().status, storage::RunStatus::Completed);
        QCOMPARE(page.chart(QStringLiteral("memory"))->seriesCount(), 2);
    }

    // #46: an engine run over a device mesh shows its groups, and each rank's place in them on
    // hover (from the run's plan.json); a run over one data-parallel dimension shows none.
    void meshShowsEachRanksGroups()
    {
        QTemporaryDir dir;
        const auto runDir = std::filesystem::path(dir.path().toStdString()) / "mesh";
        std::filesystem::create_directories(runDir);
        std::ofstream(runDir / "events.jsonl") << "";
        config::RunPlan plan;
        plan.numProcesses = 4;
        plan.distributedType = "FSDP";
        plan.runDir = runDir.string();
        plan.tensorParallelSize = 2;
        plan.sharding = parallel::ShardingOptions{};
        std::ofstream(runDir / "plan.json") << config::planToJson(plan);
        RunPage page;
        page.openRunDirectory(runDir);
        auto* mesh = page.findChild<QLabel*>(QStringLiteral("runMesh"));
        QVERIFY(mesh);
        QTRY_VERIFY(!mesh->isHidden());
        QCOMPARE(mesh->text(),
                 QStringLiteral("Device mesh dp_shard 2 x tp 2: tensor groups [0, 1] [2, 3], data groups [0, 2] [1, 3]"));
        QVERIFY2(mesh->toolTip().contains(QStringLiteral("rank 3: tensor group 1 (its rank 1), data-parallel rank 1 of 2")),
                 qPrintable(mesh->toolTip()));

        const auto plain = std::filesystem::path(dir.path().toStdString()) / "plain";
        std::filesystem::create_directories(plain);
        std::ofstream(plain / "events.jsonl") << "";
        plan.tensorParallelSize = 1;
        plan.runDir = plain.string();
        std::ofstream(plain / "plan.json") << config::planToJson(plan);
        page.openRunDirectory(plain);
        QTRY_VERIFY(!page.polling());
        QTest::qWait(200);
        QVERIFY(mesh->isHidden());
    }

    void scriptRunShowsItsCommand()
    {
        QTemporaryDir dir;
        const auto runDir = std::filesystem::path(dir.path().toStdString()) / "script";
        std::filesystem::create_directories(runDir);
        std::ofstream(runDir / "events.jsonl") << "";
        const std::string command =
            "cd /w && exec env ACCELERATE_USE_CPU=1 /v/bin/python -m accelerate.commands.accelerate_cli launch "
            "--multi_gpu --num_processes 2 /w/train.py --steps 5";
        std::ofstream(runDir / "command.sh") << "#!/bin/sh\n# The command Shardscope ran\n" << command << "\n";
        RunPage page;
        page.openRunDirectory(runDir);
        QTRY_COMPARE(page.scriptCommand(), QString::fromStdString(command));
        auto* shown = page.findChild<QLineEdit*>(QStringLiteral("runCommand"));
        QVERIFY(shown && !shown->isHidden() && shown->isReadOnly());
        // #45 point 10: a script that reports nothing (no reporter) says why its charts are empty.
        auto* alerts = page.findChild<QLabel*>(QStringLiteral("runAlerts"));
        std::ofstream(runDir / "events.jsonl")
            << protocol::encodeEvent({protocol::kProtocolVersion, 0, 1.0, protocol::DoneEvent{"completed", 0, 1.0}}) << "\n";
        QTRY_VERIFY2(alerts->isVisibleTo(&page) && alerts->text().contains(QStringLiteral("No steps reported by this script.")),
                     qPrintable(alerts->text()));
        QVERIFY(alerts->text().contains(QStringLiteral("reporter.step(loss, batch)")));

        // #45 point 10: what a script's reporter could not know (no optimizer it saw, no gradient
        // norm given, no batch it could count) is not sent, and its chart says how to fill it,
        // instead of drawing flat zeros.
        const auto reporting = std::filesystem::path(dir.path().toStdString()) / "reporting";
        std::filesystem::create_directories(reporting);
        std::filesystem::copy_file(runDir / "command.sh", reporting / "command.sh");
        {
            std::ofstream events(reporting / "events.jsonl");
            for (int step = 1; step <= 2; ++step) {
                protocol::StepEvent e;
                e.step = step;
                e.loss = 2.0 / step;
                e.stepTime = 0.1;
                e.hasLr = e.hasGradNorm = e.hasTokens = false;
                events << protocol::encodeEvent({protocol::kProtocolVersion, 0, 1.0 + step, e}) << "\n";
            }
        }
        page.openRunDirectory(reporting);
        QTRY_COMPARE(page.chart(QStringLiteral("loss"))->pointCount(0), 2);
        for (const char* name : {"lr", "grad_norm", "tokens_per_s"})
            QCOMPARE(page.chart(QLatin1String(name))->seriesCount(), 0);
        QCOMPARE(page.chart(QStringLiteral("grad_norm"))->note(),
                 QStringLiteral("Not reported by the script: pass grad_norm= to reporter.step"));
        QVERIFY(page.chart(QStringLiteral("lr"))->note().contains(QLatin1String("pass lr=")));
        QVERIFY(page.chart(QStringLiteral("loss"))->note().isEmpty());

        // An engine run has no command.sh: nothing shown, and nothing left of the last run.
        const auto engineDir = std::filesystem::path(dir.path().toStdString()) / "engine";
        std::filesystem::create_directories(engineDir);
        std::ofstream(engineDir / "events.jsonl") << "";
        page.openRunDirectory(engineDir);
        QTRY_VERIFY(!page.polling());
        QTest::qWait(100);
        QCOMPARE(page.scriptCommand(), QString());
        QVERIFY(shown->isHidden());
        QVERIFY(alerts->isHidden()); // an engine run: no such hint
        QVERIFY(page.chart(QStringLiteral("grad_norm"))->note().isEmpty());
    }

    // #45 point 2: Resume on the Run page of a failed run goes on with it from its newest
    // checkpoint as the same run (its next attempt), through the real launcher; the page shows
    // the run again, its curve continuing where it left off, each step once.
    void resumeGoesOnWithTheSameRun()
    {
        if (qEnvironmentVariableIsEmpty("SHARDSCOPE_LAUNCHER"))
            QSKIP("set SHARDSCOPE_LAUNCHER to a `shardscope` built with the engine to run a real launch");
        QTemporaryDir home;
        qputenv("SHARDSCOPE_HOME", home.path().toUtf8());
        const QString recipe = home.filePath(QStringLiteral("oom.yaml"));
        std::ofstream(recipe.toStdString()) << "name: oom\nmodel: {type: mlp}\ndata: {type: synthetic_regression}\n"
                                               "training: {per_device_batch_size: 8, max_steps: 12, checkpoint_every: 5}\n";
        QProcess first;
        first.setProcessChannelMode(QProcess::MergedChannels);
        first.start(ui::launcherProgram(),
                    {"launch", "--num_processes", "2", "--recipe", recipe, "--run_name", "failed", "--", "--oom-at-step", "8"});
        QVERIFY(first.waitForFinished(120000));
        QVERIFY2(first.exitCode() != 0, first.readAll().constData());
        const auto db = dbIn(home);
        auto store = storage::RunStore::open(db);
        QVERIFY(store.ok());
        const auto id = store->resolveRun("failed");
        QVERIFY(id.ok());

        ui::MainWindow window(nullptr, db);
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        window.openRun(*id);
        auto* page = window.findChild<RunPage*>();
        auto* resume = page->findChild<QPushButton*>(QStringLiteral("resumeButton"));
        QTRY_VERIFY(!page->polling() && resume->isEnabled()); // failed, with a checkpoint at step 5
        QTRY_COMPARE(page->chart(QStringLiteral("loss"))->pointCount(0), 7);
        QTest::mouseClick(resume, Qt::LeftButton);
        const auto said = [&] {
            QFile log(home.filePath(QStringLiteral("launches/continue-%1.log").arg(*id)));
            return window.statusBar()->currentMessage() + "\n"
                   + (log.open(QIODevice::ReadOnly) ? QString::fromUtf8(log.readAll()) : QStringLiteral("(no launcher output)"));
        };
        QTRY_VERIFY2_WITH_TIMEOUT(([&] {
                                      auto run = store->run(*id);
                                      return run && run->summary.status == storage::RunStatus::Completed
                                             && run->attempts.size() == 2;
                                  }()),
                                  qPrintable(said()), 60000);
        QTRY_VERIFY_WITH_TIMEOUT(page->chart(QStringLiteral("loss"))->pointCount(0) == 12, 10000);
        // The log shown is the newest attempt's (attempts/1/logs), not the first's, which ended in the OOM.
        QTRY_VERIFY2(page->logText().contains(QLatin1String("completed after")), qPrintable(page->logText().right(2000)));
        const auto data = page->chart(QStringLiteral("loss"))->series(0)->data();
        for (int i = 0; i < 12; ++i)
            QCOMPARE(data->at(i)->key, double(i + 1)); // steps 6 and 7, redone, once
        QTRY_VERIFY(!resume->isEnabled()); // completed: nothing left to resume
        auto listed = store->listRuns();
        QVERIFY(listed.ok());
        QCOMPARE(listed->size(), std::size_t(1)); // the same run, not a new one
    }

    // #45 point 11: Try model… on a completed Llama demo run continues a prompt with its export,
    // in the background, giving what `shardscope runs generate` gives (tests/app/tst_generation
    // holds that to transformers); a failed run has nothing to try.
    void tryModelContinuesAPromptWithTheExport()
    {
        if (qEnvironmentVariableIsEmpty("SHARDSCOPE_LAUNCHER"))
            QSKIP("set SHARDSCOPE_LAUNCHER to a `shardscope` built with the engine to run a real launch");
        QTemporaryDir home;
        qputenv("SHARDSCOPE_HOME", home.path().toUtf8());
        QString text = shardscope::testing::llamaDemoRecipe(20);
        QVERIFY(text.contains("max_steps: 20"));
        text.replace("eval_every: 50", "eval_every: 10\n  eval_sample_tokens: 8\n  eval_prompts: [\"The licenses\"]");
        const QString recipe = home.filePath(QStringLiteral("llama.yaml"));
        std::ofstream(recipe.toStdString()) << text.toStdString();
        QProcess launch;
        launch.setProcessChannelMode(QProcess::MergedChannels);
        launch.start(ui::launcherProgram(), {"launch", "--num_processes", "2", "--recipe", recipe, "--run_name", "llama"});
        QVERIFY(launch.waitForFinished(180000));
        QVERIFY2(launch.exitCode() == 0, launch.readAll().constData());
        const auto db = dbIn(home);
        auto store = storage::RunStore::open(db);
        QVERIFY(store.ok());
        const auto id = store->resolveRun("llama");
        QVERIFY(id.ok());

        RunPage page;
        page.openStoreRun(db, *id);
        auto* tryModel = page.findChild<QPushButton*>(QStringLiteral("tryModelButton"));
        QTRY_VERIFY(!page.polling() && tryModel->isEnabled());
        // The recipe's eval prompt, continued at steps 10 and 20: the Samples tab, newest first.
        auto* tabs = page.findChild<QTabWidget*>(QStringLiteral("runBottomTabs"));
        QVERIFY(tabs->isTabEnabled(1));
        QCOMPARE(tabs->tabText(1), QStringLiteral("Samples (step 20)"));
        const QString samples = page.findChild<QTextBrowser*>(QStringLiteral("runSamples"))->toPlainText();
        QVERIFY2(samples.startsWith(QLatin1String("Step 20\nThe licenses")) && samples.contains(QLatin1String("Step 10")),
                 qPrintable(samples));
        tryModel->click();
        ui::GenerationDialog* dialog = page.generationDialog();
        QVERIFY(dialog && dialog->isVisible());
        dialog->promptEdit()->setPlainText(QStringLiteral("Everyone is permitted"));
        dialog->maxNewTokens()->setValue(10);
        dialog->findChild<QPushButton*>(QStringLiteral("generateButton"))->click();
        QVERIFY(dialog->busy()); // in the background: the page goes on
        QTRY_VERIFY_WITH_TIMEOUT(!dialog->busy(), 120000);
        QVERIFY2(!dialog->continuation().isEmpty(), qPrintable(dialog->status()));
        QProcess cli;
        cli.start(ui::launcherProgram(),
                  {"runs", "generate", "llama", "--prompt", "Everyone is permitted", "--max_new_tokens", "10", "--json"});
        QVERIFY(cli.waitForFinished(120000));
        const QByteArray out = cli.readAllStandardOutput().trimmed();
        QCOMPARE(dialog->continuation(), QJsonDocument::fromJson(out.mid(out.lastIndexOf('\n') + 1)).object()["text"].toString());
        QVERIFY(dialog->findChild<QTextBrowser*>()->toPlainText().startsWith(QLatin1String("Everyone is permitted")));

        // A failed run exported nothing: nothing to try.
        const auto failed = seedRun(db, {.name = "broken", .steps = 3, .status = storage::RunStatus::Failed});
        page.openStoreRun(db, failed);
        QTRY_VERIFY(!page.polling());
        QVERIFY(!tryModel->isEnabled());
        QVERIFY(!tabs->isTabEnabled(1)); // and no samples
        // Nor does a completed MLP run: it writes no text.
        const auto mlp = seedRun(
            db, {.name = "mlp", .recipeText = "name: mlp\nmodel: {type: mlp}\ndata: {type: synthetic_regression}\n", .steps = 3});
        page.openStoreRun(db, mlp);
        QTRY_VERIFY(!page.polling());
        QVERIFY(!tryModel->isEnabled());
    }

    void launchingTheDemoShowsLivePoints()
    {
        if (qEnvironmentVariableIsEmpty("SHARDSCOPE_LAUNCHER"))
            QSKIP("set SHARDSCOPE_LAUNCHER to a `shardscope` built with the engine to run a real launch");
        QTemporaryDir home;
        qputenv("SHARDSCOPE_HOME", home.path().toUtf8());
        ui::LaunchRequest request;
        request.recipeFile = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/resources/recipes/demo-mlp.yaml");
        request.runName = QStringLiteral("gui-live");
        request.numProcesses = 2;
        request.maxSteps = 200;
        const auto launched = ui::launchDetached(request);
        QVERIFY2(launched.started, qPrintable(launched.error));
        const auto db = dbIn(home);
        std::int64_t id = 0;
        QTRY_VERIFY_WITH_TIMEOUT(([&] {
                                     if (!std::filesystem::exists(db))
                                         return false;
                                     auto store = storage::RunStore::open(db);
                                     auto resolved = store ? store->resolveRun("gui-live") : Result<std::int64_t>(Error{});
                                     id = resolved ? *resolved : 0;
                                     return id > 0;
                                 }()),
                                 10000);
        RunPage page;
        page.openStoreRun(db, id);
        QTRY_VERIFY(!page.polling()); // the first answers from the history thread
        QTRY_VERIFY_WITH_TIMEOUT(page.chart(QStringLiteral("loss"))->pointCount(0) > 0, 10000);
        QTRY_VERIFY_WITH_TIMEOUT(page.chart(QStringLiteral("memory"))->seriesCount() == 2, 10000);
        QSignalSpy finished(&page, &RunPage::runFinished);
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
        QCOMPARE(page.chart(QStringLiteral("loss"))->pointCount(0), 200);
        // #21 problem 10: the rank log pane was always empty (ranks wrote only events): each
        // rank's log now says its progress as a person reads it.
        QTRY_VERIFY_WITH_TIMEOUT(page.logText().contains(QStringLiteral("[rank 0] step 200  loss ")), 5000);
        QVERIFY2(page.logText().contains(QStringLiteral("[rank 0] started: pid ")), qPrintable(page.logText().left(300)));
        page.setLogRank(1);
        QTRY_VERIFY_WITH_TIMEOUT(page.logText().contains(QStringLiteral("[rank 1] completed after 200 steps")), 5000);
    }
};

QTEST_MAIN(TestRunPage)
#include "tst_run_page.moc"
