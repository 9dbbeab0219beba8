// Analysis with HTA's definitions on synthetic traces whose numbers are known by construction:
// the interval algebra, the temporal breakdown and the comm/compute overlap (whole trace and per
// step, HTA's device-only rule), per-collective statistics, stragglers, and a brute-force
// cross-check on random layouts.

#include "profiler/analysis.h"
#include "profiler_test_util.h"

#include <QtTest>

#include <random>

using namespace shardscope::profiler;
using namespace profiler_test;

class TestProfilerAnalysis : public QObject {
    Q_OBJECT

private slots:
    void intervalAlgebra_data();
    void intervalAlgebra();
    void breakdownAndOverlap_data();
    void breakdownAndOverlap();
    void waitsInsideComputeAreNotCompute();
    void matchesBruteForceOnRandomLayouts();
    void perStepWithStepMarkers();
    void perStepFromSpanSteps();
    void deviceSpansOnlyWhenPresent();
    void collectiveStats();
    void summaryInSeconds();
    void stragglers();
};

void TestProfilerAnalysis::intervalAlgebra_data()
{
    QTest::addColumn<QString>("a");
    QTest::addColumn<QString>("b");
    QTest::addColumn<QString>("merged"); // merge(a)
    QTest::addColumn<QString>("intersection"); // merge(a) ∩ merge(b)
    QTest::addColumn<QString>("difference"); // merge(a) \ merge(b)

    QTest::newRow("disjoint") << "0-10 20-30"
                              << "40-50"
                              << "0-10 20-30"
                              << ""
                              << "0-10 20-30";
    QTest::newRow("overlapping and touching merge") << "0-10 5-15 15-20 30-40"
                                                    << "8-32"
                                                    << "0-20 30-40"
                                                    << "8-20 30-32"
                                                    << "0-8 32-40";
    QTest::newRow("b covers a") << "10-20"
                                << "0-30"
                                << "10-20"
                                << "10-20"
                                << "";
    QTest::newRow("a covers several b") << "0-100"
                                        << "10-20 30-40 90-120"
                                        << "0-100"
                                        << "10-20 30-40 90-100"
                                        << "0-10 20-30 40-90";
    QTest::newRow("empty and reversed dropped") << "5-5 9-3 1-2"
                                                << ""
                                                << "1-2"
                                                << ""
                                                << "1-2";
    QTest::newRow("unsorted input") << "50-60 0-10 5-20"
                                    << "15-55"
                                    << "0-20 50-60"
                                    << "15-20 50-55"
                                    << "0-15 55-60";
}

void TestProfilerAnalysis::intervalAlgebra()
{
    QFETCH(QString, a);
    QFETCH(QString, b);
    QFETCH(QString, merged);
    QFETCH(QString, intersection);
    QFETCH(QString, difference);
    const auto ma = mergeIntervals(intervals(a));
    const auto mb = mergeIntervals(intervals(b));
    QVERIFY(ma == intervals(merged));
    QVERIFY(intersectIntervals(ma, mb) == intervals(intersection));
    QVERIFY(subtractIntervals(ma, mb) == intervals(difference));
}

void TestProfilerAnalysis::breakdownAndOverlap_data()
{
    QTest::addColumn<QString>("compute");
    QTest::addColumn<QString>("comm");
    QTest::addColumn<QString>("memory");
    QTest::addColumn<qint64>("span");
    QTest::addColumn<qint64>("computeNs");
    QTest::addColumn<qint64>("commNs"); // exposed
    QTest::addColumn<qint64>("memoryNs");
    QTest::addColumn<qint64>("idleNs");
    QTest::addColumn<qint64>("commTotalNs");
    QTest::addColumn<qint64>("overlapNs");
    QTest::addColumn<double>("overlap");

    // Each layout drawn on paper; the columns are read off the drawing, not computed.
    QTest::newRow("comm fully hidden") << "0-100"
                                       << "20-60"
                                       << "" << 100LL << 100LL << 0LL << 0LL << 0LL << 40LL << 40LL << 1.0;
    QTest::newRow("one all-reduce after backward") << "0-50"
                                                   << "50-100"
                                                   << "" << 100LL << 50LL << 50LL << 0LL << 0LL << 50LL << 0LL << 0.0;
    QTest::newRow("half hidden") << "0-60"
                                 << "40-80"
                                 << "" << 80LL << 60LL << 20LL << 0LL << 0LL << 40LL << 20LL << 0.5;
    QTest::newRow("gaps are idle") << "0-10 30-40"
                                   << "50-70"
                                   << "" << 70LL << 20LL << 20LL << 0LL << 30LL << 20LL << 0LL << 0.0;
    QTest::newRow("two buckets in flight merge") << "10-30"
                                                 << "0-40 20-60"
                                                 << "" << 60LL << 20LL << 40LL << 0LL << 0LL << 60LL << 20LL << 1.0 / 3.0;
    QTest::newRow("memory exposed only outside compute and comm")
        << "0-10"
        << "15-30"
        << "5-20" << 30LL << 10LL << 15LL << 5LL << 0LL << 15LL << 0LL << 0.0;
    QTest::newRow("three computes, two comms") << "0-10 20-30 40-50"
                                               << "5-25 45-60"
                                               << "" << 60LL << 30LL << 20LL << 0LL << 10LL << 35LL << 15LL << 15.0 / 35.0;
    QTest::newRow("no communication") << "0-10"
                                      << ""
                                      << "" << 10LL << 10LL << 0LL << 0LL << 0LL << 0LL << 0LL << 0.0;
    QTest::newRow("nested compute (hooks inside backward)")
        << "0-100 10-20 30-40"
        << "90-120"
        << "" << 120LL << 100LL << 20LL << 0LL << 0LL << 30LL << 10LL << 10.0 / 30.0;
    QTest::newRow("touching is not overlapping") << "0-10 10-20"
                                                 << "20-30"
                                                 << "" << 30LL << 20LL << 10LL << 0LL << 0LL << 10LL << 0LL << 0.0;
    QTest::newRow("memory under compute is compute")
        << "0-100"
        << ""
        << "10-20 90-110" << 110LL << 100LL << 0LL << 10LL << 0LL << 0LL << 0LL << 0.0;
    QTest::newRow("empty trace") << ""
                                 << ""
                                 << "" << 0LL << 0LL << 0LL << 0LL << 0LL << 0LL << 0LL << 0.0;
}

void TestProfilerAnalysis::breakdownAndOverlap()
{
    QFETCH(QString, compute);
    QFETCH(QString, comm);
    QFETCH(QString, memory);
    std::vector<Span> spans;
    addSpans(spans, Lane::Compute, compute, "forward");
    addSpans(spans, Lane::Communication, comm, "all_reduce");
    addSpans(spans, Lane::Memory, memory, "memcpy");
    // Host-lane spans are never work: a long data-loading span must change nothing.
    if (!spans.empty())
        spans.push_back(span(Lane::Host, -500, 500, "data", "data"));

    QFETCH(qint64, span);
    QFETCH(qint64, computeNs);
    QFETCH(qint64, commNs);
    QFETCH(qint64, memoryNs);
    QFETCH(qint64, idleNs);
    QFETCH(qint64, commTotalNs);
    QFETCH(qint64, overlapNs);
    QFETCH(double, overlap);

    const Breakdown b = computeBreakdown(spans);
    QCOMPARE(b.spanNs, span);
    QCOMPARE(b.computeNs, computeNs);
    QCOMPARE(b.commNs, commNs);
    QCOMPARE(b.memoryNs, memoryNs);
    QCOMPARE(b.idleNs, idleNs);
    QCOMPARE(b.commTotalNs, commTotalNs);
    QCOMPARE(b.overlapNs, overlapNs);
    QCOMPARE(b.overlap(), overlap);
    QCOMPARE(b.computeNs + b.commNs + b.memoryNs + b.idleNs, b.spanNs);

    // The same spans as a host-only rank trace give the same whole-trace numbers.
    RankTrace trace;
    trace.spans = spans;
    const RankAnalysis analysis = analyseRank(trace);
    QCOMPARE(analysis.total.overlapNs, overlapNs);
    QCOMPARE(analysis.total.idleNs, idleNs);
    QVERIFY(!analysis.deviceSpans);
}

// A host phase span encloses the time its unit waits for an all-gather; that wait is not compute,
// so an all-gather issued and waited for at once hides behind nothing, and a prefetched one hides
// behind the compute before the wait.
void TestProfilerAnalysis::waitsInsideComputeAreNotCompute()
{
    std::vector<Span> blocking{span(Lane::Compute, 0, 100, "forward", "forward"),
                               span(Lane::Communication, 20, 60, "all_gather h.1", "all_gather"),
                               span(Lane::Host, 20, 60, "wait all_gather h.1", "wait")};
    Breakdown b = computeBreakdown(blocking);
    QCOMPARE(b.spanNs, qint64(100));
    QCOMPARE(b.computeNs, qint64(60));
    QCOMPARE(b.overlapNs, qint64(0));
    QCOMPARE(b.commNs, qint64(40));
    QCOMPARE(b.idleNs, qint64(0));

    std::vector<Span> prefetched{span(Lane::Compute, 0, 100, "forward", "forward"),
                                 span(Lane::Communication, 10, 50, "all_gather h.1", "all_gather"),
                                 span(Lane::Host, 40, 50, "wait all_gather h.1", "wait")};
    b = computeBreakdown(prefetched);
    QCOMPARE(b.computeNs, qint64(90));
    QCOMPARE(b.overlapNs, qint64(30));
    QCOMPARE(b.overlap(), 0.75);
    QCOMPARE(b.computeNs + b.commNs + b.memoryNs + b.idleNs, b.spanNs);

    // Through a rank trace: waits are kept from the host lane; on a device timeline they are not
    // needed (no kernel runs while a stream waits) and are dropped with the other host spans.
    RankTrace trace;
    trace.spans = prefetched;
    QCOMPARE(analyseRank(trace).total.overlapNs, qint64(30));
    Span kernel = span(Lane::Compute, 0, 100, "gemm", "kernel");
    kernel.device = 0;
    Span nccl = span(Lane::Communication, 10, 50, "ncclKernel", "kernel");
    nccl.device = 0;
    trace.spans = {kernel, nccl, span(Lane::Host, 40, 50, "wait all_gather h.1", "wait")};
    QCOMPARE(analyseRank(trace).total.computeNs, qint64(100));
    QCOMPARE(analyseRank(trace).total.overlapNs, qint64(40));

    // Per collective kind: the blocking all-gather hides nothing, while an asynchronous
    // reduce-scatter inside backward hides entirely.
    trace.spans = blocking;
    trace.spans.push_back(span(Lane::Compute, 200, 300, "backward", "backward"));
    trace.spans.push_back(span(Lane::Communication, 220, 260, "reduce_scatter h.1", "reduce_scatter"));
    const RankAnalysis a = analyseRank(trace);
    QCOMPARE(a.collectives.size(), std::size_t(2));
    QCOMPARE(QString::fromStdString(a.collectives[0].kind), QStringLiteral("all_gather"));
    QCOMPARE(a.collectives[0].overlap, 0.0);
    QCOMPARE(a.collectives[1].overlap, 1.0);
    QCOMPARE(a.total.overlap(), 0.5);
}

void TestProfilerAnalysis::matchesBruteForceOnRandomLayouts()
{
    // Every nanosecond of [0, 400) classified one by one, against the interval algebra.
    std::mt19937 rng(20261129);
    std::uniform_int_distribution<int> pos(0, 399);
    std::uniform_int_distribution<int> count(0, 6);
    for (int round = 0; round < 300; ++round) {
        std::vector<Span> spans;
        for (Lane lane : {Lane::Compute, Lane::Communication, Lane::Memory}) {
            for (int n = count(rng); n > 0; --n) {
                int a = pos(rng);
                int b = pos(rng);
                if (a > b)
                    std::swap(a, b);
                spans.push_back(span(lane, a, b));
            }
        }
        std::int64_t first = 400;
        std::int64_t last = 0;
        for (const Span& s : spans) {
            if (s.endNs > s.startNs) {
                first = std::min(first, s.startNs);
                last = std::max(last, s.endNs);
            }
        }
        std::int64_t compute = 0, comm = 0, memory = 0, idle = 0, commTotal = 0, both = 0;
        for (std::int64_t t = first; t < last; ++t) {
            bool c = false, m = false, mem = false;
            for (const Span& s : spans) {
                if (t < s.startNs || t >= s.endNs)
                    continue;
                c |= s.lane == Lane::Compute;
                m |= s.lane == Lane::Communication;
                mem |= s.lane == Lane::Memory;
            }
            commTotal += m;
            both += c && m;
            if (c)
                ++compute;
            else if (m)
                ++comm;
            else if (mem)
                ++memory;
            else
                ++idle;
        }
        const Breakdown b = computeBreakdown(spans);
        const QByteArray where = "round " + QByteArray::number(round);
        QVERIFY2(b.spanNs == std::max<std::int64_t>(0, last - first), where);
        QVERIFY2(b.computeNs == compute, where);
        QVERIFY2(b.commNs == comm, where);
        QVERIFY2(b.memoryNs == memory, where);
        QVERIFY2(b.idleNs == idle, where);
        QVERIFY2(b.commTotalNs == commTotal, where);
        QVERIFY2(b.overlapNs == both, where);
    }
}

void TestProfilerAnalysis::perStepWithStepMarkers()
{
    RankTrace trace;
    trace.spans.push_back(span(Lane::Host, 0, 100, "step 0", "step", 0));
    trace.spans.push_back(span(Lane::Host, 100, 200, "step 1", "step", 1));
    trace.spans.push_back(span(Lane::Compute, 10, 60, "backward", "backward", 0));
    trace.spans.push_back(span(Lane::Communication, 40, 90, "all_reduce b0", "all_reduce", 0));
    trace.spans.push_back(span(Lane::Compute, 100, 150, "backward", "backward", 1));
    trace.spans.push_back(span(Lane::Communication, 150, 190, "all_reduce b0", "all_reduce", 1));
    // Straddles the end of step 1: only its part inside the window counts for the step.
    trace.spans.push_back(span(Lane::Communication, 180, 220, "all_reduce b1", "all_reduce", 1));

    const RankAnalysis a = analyseRank(trace);
    QCOMPARE(a.steps.size(), std::size_t(2));
    QCOMPARE(a.steps[0].step, 0LL);
    QVERIFY((a.steps[0].window == Interval{0, 100}));
    QCOMPARE(a.steps[0].breakdown.spanNs, 100LL);
    QCOMPARE(a.steps[0].breakdown.computeNs, 50LL);
    QCOMPARE(a.steps[0].breakdown.commTotalNs, 50LL);
    QCOMPARE(a.steps[0].breakdown.overlapNs, 20LL);
    QCOMPARE(a.steps[0].breakdown.commNs, 30LL);
    QCOMPARE(a.steps[0].breakdown.idleNs, 20LL);
    QCOMPARE(a.steps[0].breakdown.overlap(), 0.4);

    QCOMPARE(a.steps[1].breakdown.spanNs, 100LL);
    QCOMPARE(a.steps[1].breakdown.computeNs, 50LL);
    QCOMPARE(a.steps[1].breakdown.commTotalNs, 50LL);
    QCOMPARE(a.steps[1].breakdown.overlapNs, 0LL);
    QCOMPARE(a.steps[1].breakdown.idleNs, 0LL);

    // Whole trace, HTA's span: first work start (10) to last work end (220).
    QCOMPARE(a.total.spanNs, 210LL);
    QCOMPARE(a.total.computeNs, 100LL);
    QCOMPARE(a.total.commTotalNs, 120LL);
    QCOMPARE(a.total.overlapNs, 20LL);
    QCOMPARE(a.total.commNs, 100LL);
    QCOMPARE(a.total.idleNs, 10LL);
}

void TestProfilerAnalysis::perStepFromSpanSteps()
{
    RankTrace trace;
    trace.spans.push_back(span(Lane::Compute, 0, 40, "forward", "forward", 3));
    trace.spans.push_back(span(Lane::Communication, 30, 50, "all_reduce", "all_reduce", 3));
    trace.spans.push_back(span(Lane::Compute, 60, 80, "forward", "forward", 4));
    const RankAnalysis a = analyseRank(trace);
    QCOMPARE(a.steps.size(), std::size_t(2));
    QCOMPARE(a.steps[0].step, 3LL);
    QVERIFY((a.steps[0].window == Interval{0, 50}));
    QCOMPARE(a.steps[0].breakdown.overlap(), 0.5);
    QCOMPARE(a.steps[1].step, 4LL);
    QVERIFY((a.steps[1].window == Interval{60, 80}));
    QCOMPARE(a.steps[1].breakdown.computeNs, 20LL);
}

void TestProfilerAnalysis::deviceSpansOnlyWhenPresent()
{
    // HTA analyses GPU kernels only: host compute spans around them must not count.
    RankTrace trace;
    trace.source = "cupti";
    trace.spans.push_back(span(Lane::Compute, 0, 1000, "backward", "backward"));
    trace.spans.push_back(span(Lane::Communication, 0, 1000, "all_reduce (host view)", "all_reduce"));
    Span kernel = span(Lane::Compute, 100, 200, "gemm", "kernel");
    kernel.device = 0;
    kernel.track = "stream 7";
    Span nccl = span(Lane::Communication, 150, 350, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "all_reduce");
    nccl.device = 0;
    nccl.track = "stream 13";
    trace.spans.push_back(kernel);
    trace.spans.push_back(nccl);
    const RankAnalysis a = analyseRank(trace);
    QVERIFY(a.deviceSpans);
    QCOMPARE(a.total.spanNs, 250LL);
    QCOMPARE(a.total.computeNs, 100LL);
    QCOMPARE(a.total.commTotalNs, 200LL);
    QCOMPARE(a.total.overlapNs, 50LL);
    QCOMPARE(a.total.overlap(), 0.25);
    QCOMPARE(a.collectives.size(), std::size_t(1));
    QCOMPARE(a.collectives[0].count, 1LL);
}

void TestProfilerAnalysis::collectiveStats()
{
    RankTrace trace;
    for (int i = 0; i < 3; ++i) {
        Span s = span(Lane::Communication, i * 2'000'000, i * 2'000'000 + 1'000'000, "all_reduce", "all_reduce");
        s.bytes = 1'000'000;
        trace.spans.push_back(s);
    }
    Span rs = span(Lane::Communication, 10'000'000, 10'500'000, "reduce_scatter", "reduce_scatter");
    rs.bytes = 2'000'000;
    trace.spans.push_back(rs);
    trace.spans.push_back(span(Lane::Compute, 0, 100, "forward", "forward"));
    const RankAnalysis a = analyseRank(trace);
    QCOMPARE(a.collectives.size(), std::size_t(2));
    QCOMPARE(QString::fromStdString(a.collectives[0].kind), QStringLiteral("all_reduce"));
    QCOMPARE(a.collectives[0].count, 3LL);
    QCOMPARE(a.collectives[0].bytes, 3'000'000LL);
    QCOMPARE(a.collectives[0].timeNs, 3'000'000LL);
    QCOMPARE(a.collectives[0].bandwidth(), 1e9); // 3 MB in 3 ms
    QCOMPARE(QString::fromStdString(a.collectives[1].kind), QStringLiteral("reduce_scatter"));
    QCOMPARE(a.collectives[1].bandwidth(), 4e9); // 2 MB in 0.5 ms
}

void TestProfilerAnalysis::summaryInSeconds()
{
    RankTrace trace;
    trace.spans.push_back(span(Lane::Compute, 0, 600'000'000, "backward", "backward"));
    trace.spans.push_back(span(Lane::Communication, 400'000'000, 1'000'000'000, "all_reduce", "all_reduce"));
    trace.spans.push_back(span(Lane::Compute, 1'500'000'000, 2'000'000'000, "optimizer", "optimizer"));
    const TraceSummaryValues s = summarise(trace);
    QCOMPARE(s.compute, 1.1);
    QCOMPARE(s.comm, 0.4);
    QCOMPARE(s.memory, 0.0);
    QCOMPARE(s.idle, 0.5);
    QCOMPARE(s.overlap, 1.0 / 3.0);
}

void TestProfilerAnalysis::stragglers()
{
    // Rank 1 computes 30 ns longer in step 0; its clock runs 1000 ns behind rank 0's.
    RankTrace r0;
    r0.rank = 0;
    r0.spans.push_back(span(Lane::Host, 0, 100, "step", "step", 0));
    r0.spans.push_back(span(Lane::Compute, 0, 50, "backward", "backward", 0));
    r0.spans.push_back(span(Lane::Communication, 50, 100, "all_reduce", "all_reduce", 0));
    RankTrace r1;
    r1.rank = 1;
    r1.clockOffsetNs = 1000;
    r1.spans.push_back(span(Lane::Host, -995, -900, "step", "step", 0));
    r1.spans.push_back(span(Lane::Compute, -995, -915, "backward", "backward", 0));
    r1.spans.push_back(span(Lane::Communication, -915, -900, "all_reduce", "all_reduce", 0));
    // A step only rank 0 has is not compared.
    r0.spans.push_back(span(Lane::Host, 100, 200, "step", "step", 1));

    const auto skews = findStragglers({r0, r1});
    QCOMPARE(skews.size(), std::size_t(1));
    const StepSkew& s = skews.front();
    QCOMPARE(s.step, 0LL);
    QCOMPARE(s.startSkewNs, 5LL);
    QCOMPARE(s.endSkewNs, 0LL);
    QCOMPARE(s.computeSkewNs, 30LL);
    QCOMPARE(s.slowestRank, 1);
    QVERIFY((s.startNs == std::vector<std::int64_t>{0, 5}));
}

QTEST_APPLESS_MAIN(TestProfilerAnalysis)
#include "tst_profiler_analysis.moc"
