// The window never waits for the run history: a live run on the Run page, with a store made slow
// (every query first sleeps 200 ms, as on a loaded disk or behind a writer's lock), and the event
// loop keeps turning. A 5 ms timer measures it: the longest gap between its ticks must stay under
// 50 ms, while the charts still fill with the run's new steps. Before the history service, every
// 500 ms poll ran its queries on the GUI thread and this gap was a second and more.
//
// Run alone (RUN_SERIAL): a gap measured while another test process competes for the two cores
// would measure the scheduler, not the page.

#include "storage/sqlite_db.h"
#include "test_store.h"
#include "ui/history_service.h"
#include "ui/metric_chart.h"
#include "ui/run_page.h"

#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QTimer>
#include <QtTest>

#include <atomic>
#include <thread>

using namespace shardscope;
using namespace std::chrono_literals;

class TestHistoryResponsiveness : public QObject {
    Q_OBJECT
private slots:
    void slowStoreNeverBlocksTheEventLoop()
    {
        QTemporaryDir dir;
        const auto db = std::filesystem::path(dir.path().toStdString()) / "history.sqlite";
        const auto id = testing::seedRun(db, {.name = "live", .steps = 5, .status = storage::RunStatus::Running});

        // The launcher's side: a step every 100 ms, as a real run writes them.
        std::atomic<bool> stop{false};
        std::atomic<int> written{5};
        std::thread launcher([&] {
            auto writer = storage::RunWriter::open(db, id);
            if (!writer)
                return;
            for (int step = 6; !stop; ++step) {
                (*writer)->addMetrics(0, step, 1.7e9 + step, {{storage::keys::kLoss, 1.0 / step}});
                if ((*writer)->flush())
                    written = step;
                std::this_thread::sleep_for(100ms);
            }
            (void)(*writer)->finish({});
        });
        storage::setQueryDelayForTesting(200ms);

        ui::RunPage page;
        page.resize(1000, 700);
        page.show();
        QElapsedTimer clock;
        qint64 last = -1;
        qint64 longest = 0;
        int ticks = 0;
        QTimer tick;
        tick.setInterval(5);
        connect(&tick, &QTimer::timeout, this, [&] {
            const qint64 now = clock.elapsed();
            if (last >= 0)
                longest = std::max(longest, now - last);
            last = now;
            ++ticks;
        });
        clock.start();
        tick.start();
        page.openStoreRun(db, id);
        auto* loss = page.chart(QStringLiteral("loss"));
        // Several polls must come back through the slow store (each is a handful of 200 ms queries).
        QTRY_VERIFY_WITH_TIMEOUT(loss->pointCount(0) >= 15, 30000);
        QTest::qWait(500);
        tick.stop();

        storage::setQueryDelayForTesting(0ms);
        stop = true;
        launcher.join();
        qInfo("%d ticks in %lld ms, longest gap %lld ms; %d points of %d steps shown", ticks, clock.elapsed(), longest,
              loss->pointCount(0), written.load());
        QVERIFY2(longest < 50, qPrintable(QStringLiteral("the event loop stopped for %1 ms").arg(longest)));
        QVERIFY(ticks > 100);
    }

    // The service delivers answers only to askers that still exist, in the order asked.
    void answersGoOnlyToLiveAskers()
    {
        ui::HistoryService history;
        std::vector<int> answered;
        auto* gone = new QObject;
        QObject alive;
        history.submit<int>(
            gone, [] { return 1; }, [&](int v) { answered.push_back(v); });
        history.submit<int>(
            &alive,
            [] {
                std::this_thread::sleep_for(50ms);
                return 2;
            },
            [&](int v) { answered.push_back(v); });
        history.submit<int>(
            &alive, [] { return 3; }, [&](int v) { answered.push_back(v); });
        delete gone;
        QTRY_COMPARE(history.pendingJobs(), 0);
        QCOMPARE(answered, (std::vector<int>{2, 3}));
    }
};

QTEST_MAIN(TestHistoryResponsiveness)
#include "tst_history_responsiveness.moc"
