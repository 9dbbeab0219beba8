// The host span recorder: the step window, RAII and asynchronous (begin/end across threads)
// spans, the disabled fast path (no clock read, nothing recorded), several threads recording
// while another drains, and recorders that die and are replaced while threads live on.

#include "profiler/span_recorder.h"

#include <QtTest>

#include <atomic>
#include <set>
#include <thread>

using namespace shardscope::profiler;

namespace {

std::atomic<std::int64_t> g_clockReads{0};
std::atomic<std::int64_t> g_fakeNow{1000};

// A clock that counts its reads and advances 10 ns per read.
std::int64_t countingClock() noexcept
{
    g_clockReads.fetch_add(1);
    return g_fakeNow.fetch_add(10);
}

} // namespace

class TestProfilerRecorder : public QObject {
    Q_OBJECT

private slots:
    void window_data();
    void window();
    void disabledFastPath();
    void scopeAndAsyncSpans();
    void asyncSpanEndsOnAnotherThreadAfterWindow();
    void openSpansAreReported();
    void manyThreadsWhileDraining();
    void recorderReplacedWhileThreadsLive();
    void counters();
};

void TestProfilerRecorder::window_data()
{
    QTest::addColumn<qint64>("start");
    QTest::addColumn<qint64>("steps");
    QTest::addColumn<qint64>("step");
    QTest::addColumn<bool>("enabled");

    QTest::newRow("before the window") << 2LL << 3LL << 1LL << false;
    QTest::newRow("first step") << 2LL << 3LL << 2LL << true;
    QTest::newRow("last step") << 2LL << 3LL << 4LL << true;
    QTest::newRow("after the window") << 2LL << 3LL << 5LL << false;
    QTest::newRow("no window (-1)") << -1LL << 3LL << 2LL << false;
    QTest::newRow("zero steps") << 2LL << 0LL << 2LL << false;
    QTest::newRow("from step 0") << 0LL << 1LL << 0LL << true;
}

void TestProfilerRecorder::window()
{
    QFETCH(qint64, start);
    QFETCH(qint64, steps);
    QFETCH(qint64, step);
    QFETCH(bool, enabled);
    SpanRecorder rec(0);
    QVERIFY(!rec.enabled());
    rec.setWindow(start, steps);
    QCOMPARE(rec.stepBegan(step), enabled);
    QCOMPARE(rec.enabled(), enabled);
    {
        auto s = rec.scope(Lane::Compute, "forward", "forward");
    }
    const RankTrace trace = rec.take();
    QCOMPARE(trace.spans.size(), std::size_t(enabled ? 1 : 0));
    if (enabled)
        QCOMPARE(trace.spans.front().step, step);
    // The launch flag forces recording on regardless of the window.
    rec.setEnabled(true);
    QVERIFY(rec.enabled());
    rec.setEnabled(false);
    QCOMPARE(rec.enabled(), enabled);
}

void TestProfilerRecorder::disabledFastPath()
{
    SpanRecorder rec(0, &countingClock);
    const std::int64_t before = g_clockReads.load();
    for (int i = 0; i < 10000; ++i) {
        auto s = rec.scope(Lane::Compute, "grad hook", "backward");
        QVERIFY(!s.active());
        const auto id = rec.begin(Lane::Communication, "all_reduce", "all_reduce", 1024);
        QCOMPARE(id, SpanRecorder::kNoSpan);
        QVERIFY(!rec.end(id));
        rec.record(Span{});
        rec.counter("memory", "allocated", 1.0);
    }
    // Disabled means no clock read and no allocation on the hot path: nothing observable happened.
    QCOMPARE(g_clockReads.load(), before);
    const RankTrace trace = rec.take();
    QVERIFY(trace.spans.empty());
    QVERIFY(trace.counters.empty());
    QCOMPARE(rec.openSpanCount(), std::size_t(0));
}

void TestProfilerRecorder::scopeAndAsyncSpans()
{
    SpanRecorder rec(3, &countingClock);
    rec.setEnabled(true);
    rec.stepBegan(7);
    {
        auto outer = rec.scope(Lane::Compute, "backward", "backward");
        QVERIFY(outer.active());
        auto moved = std::move(outer); // a moved-from scope records nothing
        const auto id = rec.begin(Lane::Communication, "all_reduce bucket 0", "all_reduce");
        QVERIFY(id != SpanRecorder::kNoSpan);
        QVERIFY(rec.end(id, 4096));
        QVERIFY(!rec.end(id)); // twice: ignored
        moved.setBytes(0);
    }
    const RankTrace trace = rec.take();
    QCOMPARE(trace.rank, 3);
    QCOMPARE(QString::fromStdString(trace.source), QStringLiteral("host"));
    QCOMPARE(trace.spans.size(), std::size_t(2));
    const Span& backward = trace.spans[0];
    const Span& allReduce = trace.spans[1];
    QCOMPARE(QString::fromStdString(backward.name), QStringLiteral("backward"));
    QCOMPARE(backward.lane, Lane::Compute);
    QCOMPARE(backward.step, 7LL);
    QCOMPARE(QString::fromStdString(allReduce.category), QStringLiteral("all_reduce"));
    QCOMPARE(allReduce.lane, Lane::Communication);
    QCOMPARE(allReduce.bytes, 4096LL);
    // The all-reduce lies inside backward (nested in time), as the clock reads were ordered.
    QVERIFY(backward.startNs < allReduce.startNs);
    QVERIFY(allReduce.endNs < backward.endNs);
    QVERIFY(rec.take().spans.empty()); // take() forgets
}

void TestProfilerRecorder::asyncSpanEndsOnAnotherThreadAfterWindow()
{
    SpanRecorder rec(0);
    rec.setWindow(1, 1);
    rec.stepBegan(1);
    const auto id = rec.begin(Lane::Communication, "all_reduce bucket 2", "all_reduce", 100);
    rec.stepBegan(2); // window closed while the collective is in flight
    QVERIFY(!rec.enabled());
    std::thread waiter([&] { QVERIFY(rec.end(id)); });
    waiter.join();
    const RankTrace trace = rec.take();
    QCOMPARE(trace.spans.size(), std::size_t(1));
    QCOMPARE(trace.spans[0].step, 1LL); // the step it was issued in
    QVERIFY(trace.spans[0].endNs >= trace.spans[0].startNs);
}

void TestProfilerRecorder::openSpansAreReported()
{
    SpanRecorder rec(0);
    rec.setEnabled(true);
    const auto id = rec.begin(Lane::Communication, "all_gather unit 1", "all_gather");
    RankTrace first = rec.take();
    QVERIFY(first.spans.empty());
    QCOMPARE(first.notes.size(), std::size_t(1));
    QVERIFY(QString::fromStdString(first.notes[0]).contains(QStringLiteral("1 span(s) were still open")));
    QVERIFY(rec.end(id));
    RankTrace second = rec.take();
    QCOMPARE(second.spans.size(), std::size_t(1));
    QVERIFY(second.notes.empty());
}

void TestProfilerRecorder::manyThreadsWhileDraining()
{
    constexpr int kThreads = 8;
    constexpr int kPerThread = 4000;
    SpanRecorder rec(0);
    rec.setEnabled(true);
    std::atomic<bool> go{false};
    std::atomic<int> finished{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            while (!go.load())
                std::this_thread::yield();
            std::vector<SpanRecorder::SpanId> inFlight;
            for (int i = 0; i < kPerThread; ++i) {
                const std::string name = std::to_string(t) + ":" + std::to_string(i);
                if (i % 3 == 0) {
                    auto s = rec.scope(Lane::Compute, name, "hook");
                } else {
                    inFlight.push_back(rec.begin(Lane::Communication, name, "all_reduce", i));
                    if (inFlight.size() > 4) { // complete out of order, like buckets waited later
                        QVERIFY(rec.end(inFlight.front()));
                        inFlight.erase(inFlight.begin());
                    }
                }
            }
            for (auto id : inFlight)
                QVERIFY(rec.end(id));
            finished.fetch_add(1);
        });
    }
    std::vector<Span> collected;
    std::thread drainer([&] {
        while (finished.load() < kThreads) {
            RankTrace part = rec.take();
            collected.insert(collected.end(), part.spans.begin(), part.spans.end());
        }
    });
    go.store(true);
    for (auto& t : threads)
        t.join();
    drainer.join();
    RankTrace rest = rec.take();
    collected.insert(collected.end(), rest.spans.begin(), rest.spans.end());

    QCOMPARE(collected.size(), std::size_t(kThreads * kPerThread));
    std::set<std::string> names;
    for (const Span& s : collected) {
        QVERIFY(s.endNs >= s.startNs);
        names.insert(s.name);
    }
    QCOMPARE(names.size(), collected.size()); // every span exactly once
    QCOMPARE(rec.openSpanCount(), std::size_t(0));
}

void TestProfilerRecorder::recorderReplacedWhileThreadsLive()
{
    // A long-lived thread records into one recorder, which dies; a new one (possibly at the same
    // address) must get only its own spans.
    std::atomic<SpanRecorder*> current{nullptr};
    std::atomic<int> phase{0};
    std::atomic<int> done{0};
    std::thread worker([&] {
        for (int p = 1; p <= 3; ++p) {
            while (phase.load() != p)
                std::this_thread::yield();
            for (int i = 0; i < 10; ++i) {
                auto s = current.load()->scope(Lane::Host, "p" + std::to_string(p), "data");
            }
            done.store(p);
        }
    });
    for (int p = 1; p <= 3; ++p) {
        auto rec = std::make_unique<SpanRecorder>(p);
        rec->setEnabled(true);
        current.store(rec.get());
        phase.store(p);
        while (done.load() != p)
            std::this_thread::yield();
        const RankTrace trace = rec->take();
        QCOMPARE(trace.spans.size(), std::size_t(10));
        for (const Span& s : trace.spans)
            QCOMPARE(QString::fromStdString(s.name), QStringLiteral("p%1").arg(p));
    }
    worker.join();
}

void TestProfilerRecorder::counters()
{
    SpanRecorder rec(0, &countingClock);
    rec.setEnabled(true);
    rec.counter("memory", "allocated", 1024);
    rec.counter("memory", "reserved", 2048);
    const RankTrace trace = rec.take();
    QCOMPARE(trace.counters.size(), std::size_t(2));
    QCOMPARE(QString::fromStdString(trace.counters[0].series), QStringLiteral("allocated"));
    QCOMPARE(trace.counters[0].value, 1024.0);
    QVERIFY(trace.counters[0].timeNs < trace.counters[1].timeNs);
}

QTEST_APPLESS_MAIN(TestProfilerRecorder)
#include "tst_profiler_recorder.moc"
