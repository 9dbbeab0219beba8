// The Trace page on synthetic traces with a known layout (written with the profiler's own
// writer): lanes and spans on the timeline, the breakdown and overlap charts carrying exactly
// analyseRank's numbers (and the hand-computed ones), the collective table as an item model,
// zoom and pan, export of the merged trace, and the main window loading an opened run's traces.

#include "profiler/analysis.h"
#include "profiler/chrome_trace.h"
#include "test_store.h"
#include "ui/main_window.h"
#include "ui/format.h"
#include "ui/trace_page.h"
#include "ui/trace_timeline.h"

#include <QAbstractItemModelTester>
#include <QLabel>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

#include <qcustomplot.h>

#include <fstream>

namespace prof = shardscope::profiler;
using shardscope::ui::CollectiveTableModel;
using shardscope::ui::TracePage;
using shardscope::ui::TraceTimeline;

namespace {

constexpr std::int64_t kMs = 1'000'000; // ns

prof::Span span(std::string name, std::string category, prof::Lane lane, std::int64_t start, std::int64_t end, std::int64_t step,
                std::int64_t bytes = 0)
{
    prof::Span s;
    s.name = std::move(name);
    s.category = std::move(category);
    s.lane = lane;
    s.startNs = start;
    s.endNs = end;
    s.step = step;
    s.bytes = bytes;
    return s;
}

// Rank 0, step 1 (0..10 ms): compute 0-6, all-reduces 4-8 and 5-7 (in flight together), memcpy
// 8-9: compute 60 %, exposed comm 20 %, memory 10 %, idle 10 %, overlap 2/4 = 50 %.
// Step 2 (10..20 ms): compute 10-15, all-reduce 15-17: 50 / 20 / 0 / 30 %, overlap 0.
prof::RankTrace rank0()
{
    using L = prof::Lane;
    prof::RankTrace t;
    t.rank = 0;
    t.spans = {
        span("step 1", "step", L::Host, 0, 10 * kMs, 1),
        span("forward", "forward", L::Compute, 0, 4 * kMs, 1),
        span("backward", "backward", L::Compute, 4 * kMs, 6 * kMs, 1),
        span("all_reduce bucket 0", "all_reduce", L::Communication, 4 * kMs, 8 * kMs, 1, 4'000'000),
        span("all_reduce bucket 1", "all_reduce", L::Communication, 5 * kMs, 7 * kMs, 1, 1'000'000),
        span("memcpy", "memcpy", L::Memory, 8 * kMs, 9 * kMs, 1),
        span("step 2", "step", L::Host, 10 * kMs, 20 * kMs, 2),
        span("forward", "forward", L::Compute, 10 * kMs, 15 * kMs, 2),
        span("all_reduce bucket 0", "all_reduce", L::Communication, 15 * kMs, 17 * kMs, 2, 2'000'000),
    };
    prof::canonicalise(t);
    return t;
}

// Rank 1, 0.05 ms behind on the run clock. Step 1: compute 0-8, all-gather 2-10: 80 / 20 / 0 / 0 %,
// overlap 6/8 = 75 %. Step 2: compute only, 10-18 of 10-20.
prof::RankTrace rank1()
{
    using L = prof::Lane;
    prof::RankTrace t;
    t.rank = 1;
    t.clockOffsetNs = 50'000;
    t.spans = {
        span("step 1", "step", L::Host, 0, 10 * kMs, 1),
        span("forward+backward", "backward", L::Compute, 0, 8 * kMs, 1),
        span("all_gather unit 0", "all_gather", L::Communication, 2 * kMs, 10 * kMs, 1, 8'000'000),
        span("step 2", "step", L::Host, 10 * kMs, 20 * kMs, 2),
        span("forward+backward", "backward", L::Compute, 10 * kMs, 18 * kMs, 2),
    };
    prof::canonicalise(t);
    return t;
}

// A run directory with traces/rank0.json and traces/rank1.json.
std::filesystem::path writeRun(const QTemporaryDir& dir)
{
    const std::filesystem::path runDir = dir.filePath(QStringLiteral("run")).toStdString();
    std::filesystem::create_directories(runDir / "traces");
    if (!prof::writeRankTrace(runDir / "traces" / "rank0.json", rank0()))
        qFatal("write rank0");
    if (!prof::writeRankTrace(runDir / "traces" / "rank1.json", rank1()))
        qFatal("write rank1");
    return runDir;
}

QCPBars* bars(QCustomPlot* plot, const QString& name)
{
    for (int i = 0; i < plot->plottableCount(); ++i)
        if (auto* b = qobject_cast<QCPBars*>(plot->plottable(i)); b && b->name() == name)
            return b;
    return nullptr;
}

// key -> value of a bar series.
QMap<double, double> valuesOf(QCPBars* b)
{
    QMap<double, double> out;
    for (auto it = b->data()->constBegin(); it != b->data()->constEnd(); ++it)
        out.insert(it->key, it->value);
    return out;
}

void loadRun(TracePage& page, const std::filesystem::path& runDir)
{
    QSignalSpy loaded(&page, &TracePage::tracesLoaded);
    page.openFiles(shardscope::ui::findRunTraceFiles(runDir), QStringLiteral("synthetic"));
    QVERIFY(page.isLoading());
    QTRY_COMPARE(loaded.count(), 1);
    QVERIFY(!page.isLoading());
}

} // namespace

class TestTracePage : public QObject {
    Q_OBJECT
private slots:
    // #45 point 10: the kinds of work (lanes, breakdowns) are coloured apart from the ranks
    // (the overlap chart beside them draws ranks: communication was rank 1's orange), and the
    // palette does not repeat after ten (run 11 was run 1's colour, rank 10 rank 0's).
    void workKindsAreNotRankColoursAndThePaletteDoesNotRepeat()
    {
        using shardscope::ui::WorkKind;
        const auto distance = [](const QColor& a, const QColor& b) {
            return std::hypot(a.red() - b.red(), a.green() - b.green(), a.blue() - b.blue());
        };
        for (WorkKind kind : {WorkKind::Compute, WorkKind::Communication, WorkKind::Memory, WorkKind::Idle, WorkKind::Host})
            for (int rank = 0; rank < 10; ++rank)
                QVERIFY2(distance(shardscope::ui::workColor(kind), shardscope::ui::rankColor(rank)) >= 75,
                         qPrintable(QStringLiteral("kind %1 near rank %2").arg(int(kind)).arg(rank)));
        QSet<QRgb> seen;
        for (int i = 0; i < 80; ++i) {
            const QColor color = shardscope::ui::paletteColor(i);
            seen.insert(color.rgb());
            QVERIFY2(color.lightnessF() > 0.15 && color.lightnessF() < 0.9, qPrintable(QString::number(i))); // on a white chart
        }
        QCOMPARE(seen.size(), 80);
        QCOMPARE(shardscope::ui::paletteColor(3), QColor(0xd6, 0x27, 0x28)); // the first ten are Tableau 10's
    }

    void showsLanesAndSpans()
    {
        QTemporaryDir dir;
        const auto runDir = writeRun(dir);
        TracePage page;
        loadRun(page, runDir);
        if (QTest::currentTestFailed())
            return;
        const auto* view = page.view();
        QVERIFY(view);
        QCOMPARE(view->traces.size(), std::size_t(2));
        QCOMPARE(view->traces[0], rank0()); // read back exactly as written
        QCOMPARE(view->traces[1], rank1());
        QCOMPARE(view->spanCount, std::size_t(14));

        // A row per rank and lane; the two all-reduces in flight together take two rows.
        QStringList labels;
        QList<int> barCounts;
        for (const auto& row : view->rows) {
            labels << row.label;
            barCounts << int(row.bars.size());
        }
        const QStringList expected{"rank 0 · compute", "rank 0 · communication", "rank 0 · communication #2", "rank 0 · memory",
                                   "rank 0 · host",    "rank 1 · compute",       "rank 1 · communication",    "rank 1 · host"};
        QCOMPARE(labels, expected);
        QCOMPARE(barCounts, (QList<int>{3, 2, 1, 1, 2, 2, 1, 2}));

        // Bars are on the run clock: rank 1's shifted by its clock offset.
        const auto& gather = view->rows[6].bars[0];
        QCOMPARE(gather.startNs, 2 * kMs + 50'000);
        QCOMPARE(gather.endNs, 10 * kMs + 50'000);
        QCOMPARE(view->startNs, std::int64_t(0));
        QCOMPARE(view->endNs, 20 * kMs + 50'000);
        const auto& second = view->rows[2].bars[0];
        QCOMPARE(view->traces[0].spans[std::size_t(second.span)].name, std::string("all_reduce bucket 1"));

        // Hovering a bar names its span.
        auto* timeline = page.timeline();
        // #21 problem 11: a "#2" row says why it is there (it used to be unexplained).
        QVERIFY2(timeline->rowToolTip(2).contains(QStringLiteral("overlap the row above")), qPrintable(timeline->rowToolTip(2)));
        QVERIFY(!timeline->rowToolTip(1).contains(QStringLiteral("overlap the row above")));
        timeline->resize(1000, 300);
        timeline->resetZoom();
        const int x = int(timeline->xOf(2.0 * kMs)); // rank 0's forward (0-4 ms)
        const QPoint pos(x, timeline->rowRect(0).center().y());
        const auto hit = timeline->barAt(pos);
        QVERIFY(hit);
        QCOMPARE(hit->row, 0);
        QVERIFY(timeline->tooltipFor(*hit).contains(QStringLiteral("<b>forward</b>")));
        QVERIFY(timeline->tooltipFor(*hit).contains(QStringLiteral("step 1")));
        QVERIFY(!timeline->barAt(QPoint(int(timeline->xOf(9.5 * kMs)), timeline->rowRect(0).center().y())));
    }

    void chartsShowAnalyseRanksNumbers()
    {
        TracePage page;
        page.setTraces({rank0(), rank1()}, QStringLiteral("synthetic"));
        const prof::RankAnalysis analyses[] = {prof::analyseRank(rank0()), prof::analyseRank(rank1())};
        const char* parts[] = {"compute", "communication", "memory", "idle"};
        const auto field = [](const prof::Breakdown& b, int part) {
            const std::int64_t ns[] = {b.computeNs, b.commNs, b.memoryNs, b.idleNs};
            return b.share(ns[part]) * 100.0;
        };

        // Per rank: the whole trace's breakdown.
        for (int part = 0; part < 4; ++part) {
            auto* b = bars(page.rankBreakdownChart(), QString::fromLatin1(parts[part]));
            QVERIFY2(b, parts[part]);
            const auto values = valuesOf(b);
            QCOMPARE(values.size(), 2);
            for (const auto& a : analyses)
                QCOMPARE(values.value(a.rank), field(a.total, part));
        }

        // Per step, for each rank in turn; and the hand-computed layout of the synthetic trace.
        const QMap<double, QList<double>> expectedShares[] = {
            {{1.0, {60, 20, 10, 10}}, {2.0, {50, 20, 0, 30}}},
            {{1.0, {80, 20, 0, 0}}, {2.0, {80, 0, 0, 20}}},
        };
        for (int r = 0; r < 2; ++r) {
            page.setStepRank(r);
            QCOMPARE(page.stepRank(), r);
            QCOMPARE(analyses[r].steps.size(), std::size_t(2));
            for (int part = 0; part < 4; ++part) {
                const auto values = valuesOf(bars(page.stepBreakdownChart(), QString::fromLatin1(parts[part])));
                QCOMPARE(values.size(), 2);
                for (const auto& s : analyses[r].steps) {
                    QCOMPARE(values.value(double(s.step)), field(s.breakdown, part));
                    QVERIFY(qFuzzyCompare(1.0 + values.value(double(s.step)),
                                          1.0 + expectedShares[r].value(double(s.step)).at(part)));
                }
            }
        }

        // Overlap per step, one series per rank.
        const QMap<double, double> expectedOverlap[] = {{{1.0, 50.0}, {2.0, 0.0}}, {{1.0, 75.0}, {2.0, 0.0}}};
        for (int r = 0; r < 2; ++r) {
            auto* b = bars(page.overlapChart(), QStringLiteral("rank %1").arg(r));
            QVERIFY(b);
            QCOMPARE(b->brush().color(), shardscope::ui::rankColor(r)); // the rank's colour on the Run page too (#21)
            const auto values = valuesOf(b);
            QCOMPARE(values.size(), 2);
            for (const auto& s : analyses[r].steps) {
                QCOMPARE(values.value(double(s.step)), s.breakdown.overlap() * 100.0);
                QCOMPARE(values.value(double(s.step)), expectedOverlap[r].value(double(s.step)));
            }
        }

        // The rank table carries the same overlap per rank.
        auto* ranks = page.rankModel();
        QAbstractItemModelTester tester(ranks, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QCOMPARE(ranks->rowCount(), 2);
        for (int r = 0; r < 2; ++r)
            QCOMPARE(ranks->index(r, shardscope::ui::RankBreakdownModel::Overlap)
                         .data(shardscope::ui::RankBreakdownModel::RawRole)
                         .toDouble(),
                     analyses[r].total.overlap());
    }

    void collectiveTable()
    {
        TracePage page;
        auto* model = page.collectiveModel();
        QAbstractItemModelTester tester(model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        page.setTraces({rank0(), rank1()});
        QCOMPARE(model->columnCount(), int(CollectiveTableModel::ColumnCount));
        QCOMPARE(model->rowCount(), 2);
        const auto raw = [model](int row, int column) { return model->index(row, column).data(CollectiveTableModel::RawRole); };
        // rank 0: three all-reduces, 7 MB over 4 + 2 + 2 ms.
        QCOMPARE(raw(0, CollectiveTableModel::Rank).toInt(), 0);
        QCOMPARE(raw(0, CollectiveTableModel::Kind).toString(), QStringLiteral("all_reduce"));
        QCOMPARE(raw(0, CollectiveTableModel::Count).toLongLong(), 3);
        QCOMPARE(raw(0, CollectiveTableModel::Bytes).toLongLong(), 7'000'000);
        QCOMPARE(raw(0, CollectiveTableModel::Time).toLongLong(), 8 * kMs);
        QCOMPARE(raw(0, CollectiveTableModel::Bandwidth).toDouble(), 7'000'000 * 1e9 / double(8 * kMs));
        // rank 1: one all-gather, 8 MB over 8 ms = 1 GB/s.
        QCOMPARE(raw(1, CollectiveTableModel::Rank).toInt(), 1);
        QCOMPARE(raw(1, CollectiveTableModel::Kind).toString(), QStringLiteral("all_gather"));
        QCOMPARE(raw(1, CollectiveTableModel::Count).toLongLong(), 1);
        QCOMPARE(raw(1, CollectiveTableModel::Bandwidth).toDouble(), 1e9);
        QCOMPARE(model->index(1, CollectiveTableModel::Time).data().toString(), QStringLiteral("8.00 ms"));
        // Same as analyseRank's.
        const auto stats = prof::analyseRank(rank0()).collectives;
        QCOMPARE(stats.size(), std::size_t(1));
        QCOMPARE(raw(0, CollectiveTableModel::Time).toLongLong(), stats[0].timeNs);

        page.clear();
        QCOMPARE(model->rowCount(), 0);
    }

    void zoomAndPan()
    {
        TracePage page;
        page.resize(1200, 800);
        page.setTraces({rank0(), rank1()});
        page.show();
        QVERIFY(QTest::qWaitForWindowExposed(&page));
        auto* timeline = page.timeline();
        QSignalSpy changed(timeline, &TraceTimeline::visibleRangeChanged);
        const std::int64_t start0 = timeline->visibleStartNs(), end0 = timeline->visibleEndNs();
        QVERIFY(start0 <= 0 && end0 >= 20 * kMs + 50'000); // everything visible
        timeline->repaint();
        const int allBars = timeline->lastPaintedBars();
        QCOMPARE(allBars, 14);

        // Three wheel notches in, at the pointer: the range shrinks to 0.8^3 and keeps the time
        // under the pointer where it was.
        const QPointF at(timeline->plotLeft() + (timeline->width() - timeline->plotLeft()) / 4.0, 40);
        const double anchor = timeline->timeAt(at.x());
        QWheelEvent wheel(at, timeline->mapToGlobal(at), QPoint(), QPoint(0, 360), Qt::NoButton, Qt::NoModifier,
                          Qt::NoScrollPhase, false);
        QApplication::sendEvent(timeline, &wheel);
        QVERIFY(wheel.isAccepted());
        QCOMPARE(changed.count(), 1);
        const double range0 = double(end0 - start0);
        const double range1 = double(timeline->visibleEndNs() - timeline->visibleStartNs());
        QVERIFY2(std::abs(range1 - range0 * 0.512) < 2.0, qPrintable(QString::number(range1 / range0)));
        QVERIFY2(
            std::abs(timeline->timeAt(at.x()) - anchor) < 1000.0,
            qPrintable(QStringLiteral("%1 vs %2, width %3").arg(timeline->timeAt(at.x())).arg(anchor).arg(timeline->width())));

        // Zoomed into the middle of step 2 only bars reaching into it are painted.
        timeline->setVisibleRange(16 * kMs, 17 * kMs);
        timeline->repaint();
        // rank 0: step 2 host, forward? no (10-15), all-reduce 15-17; rank 1: step 2, compute 10-18.
        QCOMPARE(timeline->lastPaintedBars(), 4);

        // A drag to the right by a quarter of the plot moves the view back by a quarter range.
        const int plotWidth = timeline->width() - timeline->plotLeft();
        const QPoint from(timeline->plotLeft() + plotWidth / 2, 50);
        QTest::mousePress(timeline, Qt::LeftButton, Qt::NoModifier, from);
        QMouseEvent move(QEvent::MouseMove, QPointF(from + QPoint(plotWidth / 4, 0)),
                         timeline->mapToGlobal(QPointF(from + QPoint(plotWidth / 4, 0))), Qt::NoButton, Qt::LeftButton,
                         Qt::NoModifier);
        QApplication::sendEvent(timeline, &move);
        QTest::mouseRelease(timeline, Qt::LeftButton, Qt::NoModifier, from + QPoint(plotWidth / 4, 0));
        QVERIFY(std::abs(double(timeline->visibleStartNs()) - (16 * kMs - 0.25 * kMs)) < 0.01 * kMs);
        QCOMPARE(timeline->visibleEndNs() - timeline->visibleStartNs(), kMs);

        // Double click: everything again.
        QTest::mouseDClick(timeline, Qt::LeftButton, Qt::NoModifier, from);
        QCOMPARE(timeline->visibleStartNs(), start0);
        QCOMPARE(timeline->visibleEndNs(), end0);
    }

    void exportsMergedTrace()
    {
        QTemporaryDir dir;
        TracePage page;
        const std::filesystem::path out = dir.filePath(QStringLiteral("merged.json")).toStdString();
        QVERIFY(!page.exportMergedTrace(out)); // nothing loaded yet
        page.setTraces({rank0(), rank1()});
        const auto written = page.exportMergedTrace(out);
        QVERIFY2(written, written ? "" : written.error().message.c_str());
        auto back = prof::readChromeTrace(out);
        QVERIFY2(back, back ? "" : back.error().message.c_str());
        QCOMPARE(back->size(), std::size_t(2));
        const auto r0 = rank0(), r1 = rank1();
        QCOMPARE((*back)[0].spans.size(), r0.spans.size());
        QCOMPARE((*back)[1].spans.size(), r1.spans.size());
        // Clock-aligned: rank 1 keeps its 0.05 ms lag behind rank 0.
        const auto firstStart = [](const prof::RankTrace& t) {
            std::int64_t v = t.spans.front().startNs;
            for (const auto& s : t.spans)
                v = std::min(v, s.startNs + t.clockOffsetNs);
            return v;
        };
        QCOMPARE(firstStart((*back)[1]) - firstStart((*back)[0]), std::int64_t(50'000));
        // The analysis of the exported file is the analysis of the originals.
        QCOMPARE(prof::analyseRank((*back)[0]).total.overlap(), prof::analyseRank(r0).total.overlap());
        QCOMPARE(prof::analyseRank((*back)[1]).steps[0].breakdown.commNs, prof::analyseRank(r1).steps[0].breakdown.commNs);
    }

    void findsRunTraceFiles()
    {
        QTemporaryDir dir;
        const auto runDir = writeRun(dir);
        std::ofstream(runDir / "traces" / "merged.json") << "{}";
        std::ofstream(runDir / "traces" / "rank10.json") << "{}";
        using shardscope::ui::findRunTraceFiles;
        // Per-rank files, numerically; the merged file left out.
        const auto files = findRunTraceFiles(runDir);
        QCOMPARE(files.size(), std::size_t(3));
        QCOMPARE(files[0].filename().string(), std::string("rank0.json"));
        QCOMPARE(files[2].filename().string(), std::string("rank10.json"));
        // The history's records win when they exist.
        const auto recorded = findRunTraceFiles(runDir, {(runDir / "traces" / "rank1.json").string(), "/nonexistent"});
        QCOMPARE(recorded.size(), std::size_t(1));
        QCOMPARE(recorded[0].filename().string(), std::string("rank1.json"));
        QVERIFY(findRunTraceFiles(runDir / "nothing").empty());
    }

    void badFileIsReported()
    {
        QTemporaryDir dir;
        const std::filesystem::path bad = dir.filePath(QStringLiteral("bad.json")).toStdString();
        std::ofstream(bad) << "{\"traceEvents\": [ {\"ph\": \"X\"";
        TracePage page;
        QSignalSpy failed(&page, &TracePage::loadFailed);
        page.openFiles({bad}, QStringLiteral("bad"));
        QTRY_COMPARE(failed.count(), 1);
        QVERIFY2(failed.at(0).at(0).toString().contains(QStringLiteral("bad.json")), qPrintable(failed.at(0).at(0).toString()));
        QVERIFY(!page.hasTraces());
    }

    void opensTorchProfilerTraces()
    {
        // Kineto's .json.gz (a GPU trace with NCCL kernels): device streams, cupti source. Reading
        // it takes 0.2 s, under AddressSanitizer 6 s: waits of a minute.
        constexpr int kSlowLoad = 60000;
        const std::filesystem::path corpus = SHARDSCOPE_SOURCE_DIR "/../shared/corpus/kineto-traces";
        TracePage page;
        QSignalSpy loaded(&page, &TracePage::tracesLoaded);
        page.openFiles({corpus / "nccl_parser_config_nccl_data.json.gz"}, QStringLiteral("nccl"));
        QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, kSlowLoad);
        QCOMPARE(page.view()->traces.size(), std::size_t(1));
        QVERIFY2(page.title().contains(QStringLiteral("cupti")), qPrintable(page.title()));
        QVERIFY(page.rankModel()->rowCount() == 1);
        bool nccl = false;
        for (const auto& row : page.collectiveModel()->rows())
            nccl = nccl || row.stats.kind == "all_reduce";
        QVERIFY(nccl);

        // Traces of two jobs of other sizes (128 and 300 ranks): the second is refused, said why.
        TracePage mixed;
        QSignalSpy mixedLoaded(&mixed, &TracePage::tracesLoaded);
        mixed.openFiles(
            {corpus / "trace_filter_sampled_rank-0.json.gz", corpus / "cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"},
            QStringLiteral("mixed"));
        QTRY_COMPARE_WITH_TIMEOUT(mixedLoaded.count(), 1, kSlowLoad);
        QCOMPARE(mixed.view()->traces.size(), std::size_t(1));
        bool said = false;
        for (auto* label : mixed.findChildren<QLabel*>())
            said = said || label->text().contains(QStringLiteral("300-rank job"));
        QVERIFY(said);

        // A run of 2 ranks: a trace of a 128-rank job is not its trace.
        TracePage run;
        QSignalSpy failed(&run, &TracePage::loadFailed);
        run.openFiles({corpus / "trace_filter_sampled_rank-0.json.gz"}, QStringLiteral("run"), 2);
        QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, kSlowLoad);
        QVERIFY2(failed.at(0).at(0).toString().contains(QStringLiteral("128-rank job")),
                 qPrintable(failed.at(0).at(0).toString()));

        // A truncated .gz: a clear error, nothing loaded.
        QTemporaryDir dir;
        const std::filesystem::path truncated = dir.filePath(QStringLiteral("cut.json.gz")).toStdString();
        {
            std::ifstream in(corpus / "nccl_parser_config_nccl_data.json.gz", std::ios::binary);
            std::string bytes((std::istreambuf_iterator<char>(in)), {});
            std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 3);
        }
        TracePage cut;
        QSignalSpy cutFailed(&cut, &TracePage::loadFailed);
        cut.openFiles({truncated}, QStringLiteral("cut"));
        QTRY_COMPARE_WITH_TIMEOUT(cutFailed.count(), 1, kSlowLoad);
        QVERIFY2(cutFailed.at(0).at(0).toString().contains(QStringLiteral("truncated or corrupt")),
                 qPrintable(cutFailed.at(0).at(0).toString()));
    }

    void cancelStopsALoad()
    {
        const std::filesystem::path corpus = SHARDSCOPE_SOURCE_DIR "/../shared/corpus/kineto-traces";
        TracePage page;
        QSignalSpy loaded(&page, &TracePage::tracesLoaded);
        QSignalSpy failed(&page, &TracePage::loadFailed);
        page.openFiles({corpus / "nccl_parser_config_nccl_data.json.gz"}, QStringLiteral("big"));
        auto* cancel = page.findChild<QPushButton*>(QStringLiteral("cancelTraceLoad"));
        QVERIFY(cancel && !cancel->isHidden());
        cancel->click();
        QVERIFY(!page.isLoading());
        QCOMPARE(failed.count(), 1);
        QVERIFY(cancel->isHidden());
        QTest::qWait(1500); // the worker's late result is dropped
        QCOMPARE(loaded.count(), 0);
        QVERIFY(!page.hasTraces());
    }

    void mainWindowShowsAnOpenedRunsTraces()
    {
        QTemporaryDir dir;
        const auto runDir = writeRun(dir);
        const std::filesystem::path db = dir.filePath(QStringLiteral("history.sqlite")).toStdString();
        shardscope::testing::SeedRun seed;
        seed.name = "profiled";
        seed.runDir = runDir.string();
        const auto id = shardscope::testing::seedRun(db, seed);
        shardscope::ui::MainWindow window(nullptr, db);
        auto* page = window.tracePage();
        QVERIFY(page);
        QCOMPARE(window.findChild<QWidget*>(QStringLiteral("page_Trace")), static_cast<QWidget*>(page));
        QSignalSpy loaded(page, &TracePage::tracesLoaded);
        window.openRun(id);
        QCOMPARE(window.currentMode(), shardscope::ui::MainWindow::Mode::Run);
        QTRY_COMPARE(loaded.count(), 1);
        QCOMPARE(page->view()->traces.size(), std::size_t(2));
        QVERIFY(page->title().contains(QStringLiteral("profiled")));
    }
};

QTEST_MAIN(TestTracePage)
#include "tst_trace_page.moc"
