// The workbench's main window: five modes in Qt Creator's order, switched by the mode bar and by
// Ctrl+1..Ctrl+5, each change announced once.

#include "test_store.h"
#include "ui/compare_page.h"
#include "ui/configure_page.h"
#include "ui/main_window.h"
#include "ui/format.h"
#include "ui/metric_chart.h"
#include "ui/run_list_model.h"
#include "ui/run_page.h"
#include "ui/runs_page.h"
#include "ui/trace_page.h"
#include "profiler/chrome_trace.h"

#include <QLabel>
#include <QApplication>
#include <QTimer>
#include <QMessageBox>
#include <QListWidget>
#include <QSettings>
#include <QScreen>
#include <QGuiApplication>
#include <QSignalSpy>
#include <QStackedWidget>
#include <QTemporaryDir>
#include <QPushButton>
#include <QtTest>

using shardscope::testing::SeedRun;
using shardscope::testing::seedRun;
using shardscope::ui::MainWindow;

class TestMainWindow : public QObject {
    Q_OBJECT
private slots:
    void hasTheFiveModes()
    {
        MainWindow window;
        auto* bar = window.findChild<QListWidget*>(QStringLiteral("modeBar"));
        QVERIFY(bar);
        const QStringList expected{"Configure", "Runs", "Run", "Compare", "Trace"};
        QCOMPARE(bar->count(), expected.size());
        for (int i = 0; i < expected.size(); ++i)
            QCOMPARE(bar->item(i)->text(), expected[i]);
        QCOMPARE(window.currentMode(), MainWindow::Mode::Configure);
    }

    void shortcutsSwitchModes()
    {
        MainWindow window;
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        QSignalSpy spy(&window, &MainWindow::modeChanged);
        QTest::keyClick(&window, Qt::Key_3, Qt::ControlModifier);
        QCOMPARE(window.currentMode(), MainWindow::Mode::Run);
        QCOMPARE(spy.count(), 1);
        QTest::keyClick(&window, Qt::Key_5, Qt::ControlModifier);
        QCOMPARE(window.currentMode(), MainWindow::Mode::Trace);
        auto* pages = window.findChild<QStackedWidget*>(QStringLiteral("pages"));
        QCOMPARE(pages->currentWidget()->objectName(), QStringLiteral("page_Trace"));
        QCOMPARE(spy.count(), 2);
        // #45 point 10: the shortcuts are shown (they existed, and nothing said so): under the
        // mode bar, every one of the window's, and on each mode's tooltip.
        const QString shown = window.findChild<QLabel*>(QStringLiteral("shortcutsHelp"))->text();
        for (const QString& key : {QStringLiteral("Ctrl+2  Runs"), QStringLiteral("Ctrl+5  Trace"),
                                   QStringLiteral("Ctrl+O  Open run directory"), QStringLiteral("Ctrl+T  Open trace")})
            QVERIFY2(shown.contains(key), qPrintable(shown));
        QVERIFY(window.findChild<QLabel*>(QStringLiteral("shortcutsHelp"))->isVisible());
        auto* bar = window.findChild<QListWidget*>(QStringLiteral("modeBar"));
        QCOMPARE(bar->item(2)->toolTip(), QStringLiteral("Run (Ctrl+3)"));
    }

    // #45 point 10: closing the window during a run said nothing (the run goes on): it asks, says
    // the run goes on and how to stop it; Cancel keeps the window. No question without a live run.
    void closingDuringARunSaysTheRunGoesOn()
    {
        QTemporaryDir dir;
        const auto db = std::filesystem::path(dir.path().toStdString()) / "history.sqlite";
        const auto live = shardscope::testing::seedRun(
            db, {.name = "still-going", .steps = 3, .status = shardscope::storage::RunStatus::Running});
        MainWindow window(nullptr, db);
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        window.openRun(live);
        auto* page = window.findChild<shardscope::ui::RunPage*>();
        QTRY_COMPARE(page->liveRunName(), QStringLiteral("still-going"));
        QString asked;
        auto answer = [&](bool closeIt) {
            QTimer::singleShot(0, [&asked, closeIt] {
                auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget());
                QVERIFY(box);
                asked = box->text();
                for (auto* button : box->buttons())
                    if ((box->buttonRole(button) == QMessageBox::AcceptRole) == closeIt)
                        button->click();
            });
        };
        answer(false);
        QVERIFY(!window.close()); // Cancel: still open
        QVERIFY2(asked.contains(QStringLiteral("Run still-going is still running. It goes on without the workbench"))
                     && asked.contains(QStringLiteral("press Stop")),
                 qPrintable(asked));
        QVERIFY(window.isVisible());
        answer(true);
        QVERIFY(window.close());
        QVERIFY(!window.isVisible());

        MainWindow quiet(nullptr, db); // no live run open: closes without a question
        quiet.show();
        QVERIFY(QTest::qWaitForWindowExposed(&quiet));
        QVERIFY(quiet.close());
    }

    // #45 point 10: the Trace page opens the run just profiled: its traces are written as the
    // profile window ends, after the run's page (and the Trace page's look) opened.
    void tracePageOpensTheRunJustProfiled()
    {
        QTemporaryDir dir;
        const auto db = std::filesystem::path(dir.path().toStdString()) / "history.sqlite";
        const auto runDir = std::filesystem::path(dir.path().toStdString()) / "runs" / "profiled";
        const auto id = shardscope::testing::seedRun(
            db, {.name = "profiled", .steps = 3, .status = shardscope::storage::RunStatus::Running, .runDir = runDir.string()});
        MainWindow window(nullptr, db);
        window.openRun(id);
        auto* trace = window.findChild<shardscope::ui::TracePage*>();
        auto* page = window.findChild<shardscope::ui::RunPage*>();
        QTRY_COMPARE(page->liveRunName(), QStringLiteral("profiled"));
        QVERIFY(!trace->hasTraces());
        // The profile window ends: each rank writes its trace; then the run ends.
        for (int rank : {0, 1}) {
            shardscope::profiler::RankTrace t;
            t.rank = rank;
            shardscope::profiler::Span step;
            step.name = "step 1";
            step.category = "step";
            step.lane = shardscope::profiler::Lane::Host;
            step.endNs = 10'000'000;
            step.step = 1;
            t.spans.push_back(step);
            QVERIFY(shardscope::profiler::writeRankTrace(runDir / "traces" / ("rank" + std::to_string(rank) + ".json"), t));
        }
        auto store = shardscope::storage::RunStore::open(db);
        QVERIFY(store.ok());
        QVERIFY(store->finishRun(id, {}).ok());
        QTRY_VERIFY_WITH_TIMEOUT(trace->hasTraces(), 10000);
        QVERIFY2(trace->title().contains(QStringLiteral("profiled")), qPrintable(trace->title()));
    }

    // What new users asked for: a line on each page saying what it is for.
    void eachPageSaysWhatItIsFor()
    {
        QTemporaryDir dir;
        MainWindow window(nullptr, std::filesystem::path(dir.path().toStdString()) / "history.sqlite");
        auto* help = window.findChild<QLabel*>(QStringLiteral("pageHelp"));
        QVERIFY(help);
        QStringList seen;
        for (int i = 0; i < MainWindow::kModeCount; ++i) {
            const auto mode = static_cast<MainWindow::Mode>(i);
            window.showMode(mode);
            QVERIFY2(help->text().startsWith(MainWindow::modeName(mode) + QStringLiteral(":")), qPrintable(help->text()));
            seen << help->text();
        }
        seen.removeDuplicates();
        QCOMPARE(seen.size(), MainWindow::kModeCount);
    }

    void modeBarClicksSwitchPages()
    {
        MainWindow window;
        auto* bar = window.findChild<QListWidget*>(QStringLiteral("modeBar"));
        bar->setCurrentRow(1);
        QCOMPARE(window.currentMode(), MainWindow::Mode::Runs);
    }

    // #21 problems 5 and 7: every page fits a 1366x768 screen (less a 40 px panel and the title
    // bar), also with a 319-character run name open in Run and Compare (it used to make the
    // window 4,297 px wide, Stop off-screen); the long name is elided, whole in the tooltip.
    void everyPageFitsA1366x768Screen()
    {
        QTemporaryDir dir;
        const auto db = std::filesystem::path(dir.path().toStdString()) / "history.sqlite";
        const std::string longName = std::string(300, 'x') + "-20261203-101500";
        QCOMPARE(longName.size() + 3, std::size_t(319));
        const auto longId = seedRun(db, SeedRun{.name = "run" + longName});
        const auto otherId = seedRun(db, SeedRun{.name = "other"});
        MainWindow window(nullptr, db);
        window.resize(1366, 700);
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        window.openRun(longId);
        window.comparePage()->setRuns({longId, otherId});
        auto* title = window.runPage()->findChild<QLabel*>(QStringLiteral("runTitle"));
        QTRY_VERIFY(title->toolTip() == shardscope::ui::plainToolTip(QString::fromStdString("run" + longName)));
        QVERIFY2(title->text().size() < 80 && title->text().endsWith(QStringLiteral("20261203-101500")),
                 qPrintable(title->text()));
        for (auto mode : {MainWindow::Mode::Configure, MainWindow::Mode::Runs, MainWindow::Mode::Run, MainWindow::Mode::Compare,
                          MainWindow::Mode::Trace}) {
            window.showMode(mode);
            QTest::qWait(200); // the pages fill from the history thread
            const QSize needed = window.minimumSizeHint().expandedTo(window.minimumSize());
            QVERIFY2(
                needed.width() <= 1366 && needed.height() <= 700,
                qPrintable(QStringLiteral("%1: %2x%3").arg(MainWindow::modeName(mode)).arg(needed.width()).arg(needed.height())));
            QVERIFY2(
                window.width() <= 1366 && window.height() <= 700,
                qPrintable(QStringLiteral("%1: %2x%3").arg(MainWindow::modeName(mode)).arg(window.width()).arg(window.height())));
        }
    }

    // #45 point 1: the window's minimum width followed the Configure header's recipe path (1542 px
    // with the bundled demo, 1617 once edited): with every bundled recipe, at a 200-character path,
    // edited or not, the window still fits 1366 px, and Launch is inside it.
    void configureFitsA1366ScreenWithAnyRecipe()
    {
        QTemporaryDir dir;
        const auto db = std::filesystem::path(dir.path().toStdString()) / "history.sqlite";
        MainWindow window(nullptr, db);
        window.resize(1366, 700);
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        window.showMode(MainWindow::Mode::Configure);
        const QString deep = dir.filePath(QString(200 - dir.path().size() - 20, QLatin1Char('d')));
        QVERIFY(QDir().mkpath(deep));
        const QString recipes = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/resources/recipes");
        for (const QString& name : QDir(recipes).entryList({"*.yaml"})) {
            const QString copy = deep + "/" + name;
            QFile::remove(copy);
            QVERIFY(QFile::copy(recipes + "/" + name, copy));
            for (const QString& path : {recipes + "/" + name, copy}) {
                QVERIFY(window.configurePage()->openRecipeFile(path));
                QTest::qWait(100);
                const QSize needed = window.minimumSizeHint().expandedTo(window.minimumSize());
                QVERIFY2(needed.width() <= 1366, qPrintable(QStringLiteral("%1: %2 px").arg(path).arg(needed.width())));
                QVERIFY2(window.width() <= 1366, qPrintable(QStringLiteral("%1: %2 px").arg(path).arg(window.width())));
                auto* launch = window.findChild<QPushButton*>(QStringLiteral("launchButton"));
                QVERIFY(launch);
                const QRect inWindow(launch->mapTo(&window, QPoint(0, 0)), launch->size());
                QVERIFY2(window.rect().contains(inWindow), qPrintable(path));
            }
        }
    }

    // #45 point 1: a first start opens inside the available screen (it opened at 1280x800 on any
    // screen); the geometry is kept beside the history (workbench.ini), and one saved on a larger
    // screen comes back inside this one.
    void windowOpensInsideTheScreenAndKeepsItsGeometryBesideTheHistory()
    {
        QTemporaryDir dir;
        const auto db = std::filesystem::path(dir.path().toStdString()) / "history.sqlite";
        const QRect available = QGuiApplication::primaryScreen()->availableGeometry();
        {
            MainWindow window(nullptr, db);
            QVERIFY2(available.contains(window.geometry()), qPrintable(QStringLiteral("%1,%2 %3x%4 in %5x%6")
                                                                           .arg(window.x())
                                                                           .arg(window.y())
                                                                           .arg(window.width())
                                                                           .arg(window.height())
                                                                           .arg(available.width())
                                                                           .arg(available.height())));
            window.close();
        }
        QSettings kept(dir.filePath("workbench.ini"), QSettings::IniFormat);
        QVERIFY(!kept.value("window/geometry").toByteArray().isEmpty());
        // A 2560x1440 screen's geometry, as saved there: back inside this screen.
        const QRect big(100, 50, 2400, 1350);
        QCOMPARE(MainWindow::fittedGeometry(big, QRect(0, 0, 1366, 728)), QRect(0, 0, 1366, 728));
        QCOMPARE(MainWindow::fittedGeometry(QRect(1200, 600, 800, 500), QRect(0, 0, 1366, 728)), QRect(566, 228, 800, 500));
        QCOMPARE(MainWindow::fittedGeometry(QRect(10, 20, 800, 500), QRect(0, 0, 1366, 728)), QRect(10, 20, 800, 500));
    }

    // The Run page gives its charts the room, the log the rest (a 1366x768 screenshot once showed
    // the charts squeezed to a sliver above a tall log).
    void runPageChartsGetTheRoomAt1366x768()
    {
        QTemporaryDir dir;
        const auto db = std::filesystem::path(dir.path().toStdString()) / "history.sqlite";
        const auto id = seedRun(db, SeedRun{.name = "roomy", .mixedPrecision = "fp16", .steps = 20});
        MainWindow window(nullptr, db);
        window.resize(1366, 768);
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        window.openRun(id);
        auto* loss = window.runPage()->chart(QStringLiteral("loss"));
        QTRY_VERIFY(loss->seriesCount() > 0 && loss->pointCount(0) == 20);
        QTest::qWait(100);
        auto* log = window.runPage()->findChild<QWidget*>(QStringLiteral("logView"));
        QVERIFY2(loss->height() >= shardscope::ui::MetricChart::kMinimumHeight,
                 qPrintable(QStringLiteral("loss chart %1 px high, log %2 px").arg(loss->height()).arg(log->height())));
        QVERIFY2(log->height() < loss->height() * 2, qPrintable(QStringLiteral("log %1 px").arg(log->height())));
    }

    // #21 (what W&B users bring): a run's colour, chosen in Runs, is kept in the history and drawn
    // on Runs, Run and Compare; the other runs keep theirs; "Default colour" brings the palette's back.
    void aRunColourChosenInRunsIsUsedOnEveryPage()
    {
        QTemporaryDir dir;
        const auto db = std::filesystem::path(dir.path().toStdString()) / "history.sqlite";
        const auto a = seedRun(db, SeedRun{.name = "chosen", .steps = 5});
        const auto b = seedRun(db, SeedRun{.name = "other", .steps = 5});
        MainWindow window(nullptr, db);
        auto* runs = window.runsPage();
        QTRY_COMPARE(runs->model()->rowCount(), 2);
        window.openRun(a);
        auto* loss = window.runPage()->chart(QStringLiteral("loss"));
        QTRY_VERIFY(loss->seriesCount() > 0 && loss->pointCount(0) == 5);
        QCOMPARE(loss->seriesColor(0), shardscope::ui::defaultRunColor(a));

        const QColor chosen(0x12, 0x34, 0x56);
        QSignalSpy loaded(runs, &shardscope::ui::RunsPage::runsLoaded);
        QVERIFY(runs->setRunColor(a, chosen));
        QTRY_VERIFY(loaded.count() > 0);
        auto swatch = [&](std::int64_t id) {
            return runs->model()
                ->index(runs->model()->rowOfRun(id), shardscope::ui::RunListModel::Name)
                .data(Qt::DecorationRole)
                .value<QColor>();
        };
        QCOMPARE(swatch(a), chosen);
        QCOMPARE(swatch(b), shardscope::ui::defaultRunColor(b));
        QCOMPARE(loss->seriesColor(0), chosen); // the open run takes it at once
        auto store = shardscope::storage::RunStore::open(db);
        QCOMPARE(store->run(a)->summary.color, std::string("#123456")); // kept in the history

        QSignalSpy compared(window.comparePage(), &shardscope::ui::ComparePage::comparisonUpdated);
        window.comparePage()->setRuns({a, b});
        QTRY_VERIFY(compared.count() > 0 && window.comparePage()->chart()->seriesCount() == 2);
        QCOMPARE(window.comparePage()->chart()->seriesColor(0), chosen);
        QCOMPARE(window.comparePage()->chart()->seriesColor(1), shardscope::ui::defaultRunColor(b));

        loaded.clear();
        QVERIFY(runs->setRunColor(a, QColor()));
        QTRY_VERIFY(loaded.count() > 0);
        QCOMPARE(swatch(a), shardscope::ui::defaultRunColor(a));
        QCOMPARE(loss->seriesColor(0), shardscope::ui::defaultRunColor(a));
    }
};

QTEST_MAIN(TestMainWindow)
#include "tst_main_window.moc"
