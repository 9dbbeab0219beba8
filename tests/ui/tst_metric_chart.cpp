// The workbench chart (#21 problem 10 and what users bring from TensorBoard and W&B): hover
// values equal the stored ones, smoothing is TensorBoard's formula (also when the series arrives
// in pieces), a log value axis, the legend outside the data, a click keeps following and a zoom
// ending at the newest point slides with new points, the image saved as PNG/SVG and the data as
// CSV.

#include "ui/metric_chart.h"

#include <QFile>
#include <QTemporaryDir>
#include <QApplication>
#include <QtTest>

#include <cmath>

using shardscope::ui::ChartGroup;
using shardscope::ui::MetricChart;
using shardscope::ui::tensorBoardSmoothed;

namespace {

QPoint pixelOf(const MetricChart& chart, double x, double y)
{
    return QPoint(static_cast<int>(std::lround(chart.xAxis->coordToPixel(x))),
                  static_cast<int>(std::lround(chart.yAxis->coordToPixel(y))));
}

} // namespace

class TestMetricChart : public QObject {
    Q_OBJECT
private slots:
    // The fixture worked by hand from TensorBoard's resmoothDataset: last = last*w + (1-w)*v,
    // divided by 1 - w^n over the n finite values so far; NaN passes through; constant: as is.
    void smoothingIsTensorBoardsFormula()
    {
        const auto near = [](const QVector<double>& got, const QVector<double>& want) {
            if (got.size() != want.size())
                return false;
            for (qsizetype i = 0; i < got.size(); ++i)
                if (!(std::isnan(want[i]) ? std::isnan(got[i]) : std::abs(got[i] - want[i]) < 1e-12))
                    return false;
            return true;
        };
        QVERIFY(near(tensorBoardSmoothed({2, 4, 8}, 0.5), {2, 10.0 / 3.0, 6}));
        QVERIFY(near(tensorBoardSmoothed({1, NAN, 3}, 0.6), {1, NAN, 2.25}));
        QVERIFY(near(tensorBoardSmoothed({5, 5, 5}, 0.9), {5, 5, 5}));
        QVERIFY(near(tensorBoardSmoothed({2, 4, 8}, 0.0), {2, 4, 8}));

        // The chart smooths what arrives in pieces as the formula smooths the whole, across the
        // moment a constant series stops being constant.
        MetricChart chart(QStringLiteral("loss"));
        chart.setSmoothing(0.7);
        const int s = chart.addSeries(QStringLiteral("train"), Qt::blue);
        QVector<double> all;
        const QVector<QVector<double>> pieces{{3, 3}, {3}, {2.5, NAN, 2.0}, {1.5}, {1.7, 1.2}};
        double x = 0;
        for (const auto& piece : pieces) {
            QVector<double> xs;
            for (qsizetype i = 0; i < piece.size(); ++i)
                xs << ++x;
            chart.appendPoints(s, xs, piece);
            all += piece;
            QVERIFY(near(chart.smoothedValues(s), tensorBoardSmoothed(all, 0.7)));
        }
        chart.setSmoothing(0.2); // a new weight: the whole curve again
        QVERIFY(near(chart.smoothedValues(s), tensorBoardSmoothed(all, 0.2)));
        chart.setSmoothing(0);
        QVERIFY(near(chart.smoothedValues(s), all));
    }

    void hoverShowsTheStoredValueAtTheStep()
    {
        MetricChart chart(QStringLiteral("loss"));
        chart.setXLabel(QStringLiteral("step"));
        chart.resize(600, 300);
        const int train = chart.addSeries(QStringLiteral("train"), Qt::blue);
        const int eval = chart.addSeries(QStringLiteral("eval"), Qt::red, MetricChart::Style::Markers);
        chart.appendPoints(train, {1, 2, 3, 4}, {0.5, 0.25, 0.125, 0.0625});
        chart.appendPoints(eval, {2, 4}, {0.3, 0.07});
        chart.show();
        QVERIFY(QTest::qWaitForWindowExposed(&chart));
        chart.replot();
        QCOMPARE(chart.pointNear(train, 2.2).value(), QPointF(2, 0.25));
        QCOMPARE(chart.pointNear(eval, 2.9).value(), QPointF(2, 0.3));
        QTest::mouseMove(&chart, pixelOf(chart, 2.1, 0.3));
        const QString shown = chart.shownHoverText();
        QVERIFY2(shown.startsWith(QStringLiteral("step 2\n")) && shown.contains(QStringLiteral("train: 0.25"))
                     && shown.contains(QStringLiteral("eval: 0.3")),
                 qPrintable(shown));
        chart.setSmoothing(0.5);
        QVERIFY2(chart.hoverText(2).contains(QStringLiteral("train: 0.25 (smoothed 0.333333)")), qPrintable(chart.hoverText(2)));
        QTest::mouseMove(&chart, QPoint(2, 2)); // outside the axes
        QVERIFY(chart.shownHoverText().isEmpty());
    }

    // #45 point 6: a sparse series (an eval every 50 steps) shows its value only at its own steps;
    // hover at step 31 or 80 showed the step-50 eval as if it were theirs.
    void hoverShowsASparseSeriesOnlyAtItsSteps()
    {
        MetricChart chart(QStringLiteral("loss"));
        chart.setXLabel(QStringLiteral("step"));
        const int train = chart.addSeries(QStringLiteral("train"), Qt::blue);
        const int eval = chart.addSeries(QStringLiteral("eval"), Qt::red, MetricChart::Style::Markers);
        QVector<double> steps, losses;
        for (int step = 1; step <= 100; ++step) {
            steps << step;
            losses << 1.0 / step;
        }
        chart.appendPoints(train, steps, losses);
        chart.appendPoints(eval, {50, 100}, {0.03, 0.015});
        for (double at : {31.0, 80.0, 49.0, 51.0}) {
            const QString text = chart.hoverText(at);
            QVERIFY2(text.startsWith(QStringLiteral("step %1\n").arg(at)) && !text.contains(QStringLiteral("eval")),
                     qPrintable(text));
        }
        QVERIFY2(chart.hoverText(50.2).contains(QStringLiteral("eval: 0.03")), qPrintable(chart.hoverText(50.2)));
        QVERIFY2(chart.hoverText(100).contains(QStringLiteral("eval: 0.015")), qPrintable(chart.hoverText(100)));
        // A chart of evals alone: the nearest eval, whatever the distance.
        MetricChart evalsOnly(QStringLiteral("eval"));
        evalsOnly.appendPoints(evalsOnly.addSeries(QStringLiteral("eval"), Qt::red), {50, 100}, {0.03, 0.015});
        QVERIFY2(evalsOnly.hoverText(80).contains(QStringLiteral("eval: 0.015")), qPrintable(evalsOnly.hoverText(80)));
    }

    // #45 point 11: non-finite values (a diverged run's NaN loss) are gaps in their curve and marks
    // along the top, never a line to the edge or a stretched axis; cleared with the data.
    void nonFiniteValuesAreGapsAndMarks()
    {
        MetricChart chart(QStringLiteral("loss"));
        const int s = chart.addSeries(QStringLiteral("train"), Qt::blue);
        chart.appendPoints(s, {1, 2, 3, 4, 5}, {2.0, NAN, INFINITY, -INFINITY, 1.5});
        QCOMPARE(chart.nonFiniteCount(), 3);
        QCOMPARE(chart.pointCount(s), 5);
        QVERIFY(std::isnan(chart.series(s)->data()->at(2)->value)); // a gap, not an infinity
        QVERIFY(chart.yAxis->range().upper < 10 && chart.yAxis->range().lower > -10);
        QCOMPARE(chart.series(s)->data()->at(4)->value, 1.5);
        chart.clearData();
        QCOMPARE(chart.nonFiniteCount(), 0);
        chart.appendPoints(s, {1, 2}, {1.0, 2.0});
        QCOMPARE(chart.nonFiniteCount(), 0);
    }

    // #45 point 11 (what W&B users expect): one crosshair for a run's charts: the step under the
    // mouse in one chart is shown, with its values, on every chart of the group; gone with the mouse.
    void crosshairIsSyncedAcrossTheGroup()
    {
        ChartGroup group;
        MetricChart loss(QStringLiteral("loss")), lr(QStringLiteral("lr"));
        for (MetricChart* chart : {&loss, &lr}) {
            chart->setXLabel(QStringLiteral("step"));
            chart->resize(600, 300);
            group.add(chart);
        }
        loss.appendPoints(loss.addSeries(QStringLiteral("loss"), Qt::blue), {1, 2, 3}, {3.0, 2.0, 1.0});
        lr.appendPoints(lr.addSeries(QStringLiteral("lr"), Qt::red), {1, 2, 3}, {0.1, 0.2, 0.3});
        loss.show();
        lr.show();
        QVERIFY(QTest::qWaitForWindowExposed(&loss) && QTest::qWaitForWindowExposed(&lr));
        loss.replot();
        lr.replot();
        QTest::mouseMove(&loss, pixelOf(loss, 2.1, 2.0));
        QVERIFY2(lr.shownHoverText().startsWith(QStringLiteral("step 2\nlr: 0.2")), qPrintable(lr.shownHoverText()));
        QEvent leave(QEvent::Leave);
        QApplication::sendEvent(&loss, &leave);
        QVERIFY(lr.shownHoverText().isEmpty());
    }

    void logScaleLeavesOutWhatItCannotShow()
    {
        MetricChart chart(QStringLiteral("grad norm"));
        const int s = chart.addSeries(QStringLiteral("g"), Qt::blue);
        chart.appendPoints(s, {1, 2, 3}, {-1, 10, 1000});
        QVERIFY(chart.yAxis->range().lower < -1);
        chart.setLogValueAxis(true);
        QVERIFY(chart.logValueAxis());
        QVERIFY(chart.yAxis->range().lower > 0 && chart.yAxis->range().lower < 10);
        QVERIFY(chart.yAxis->range().upper > 1000);
        chart.setLogValueAxis(false);
        QVERIFY(chart.yAxis->range().lower < -1);
        // The next run's chart starts from nothing of this one's ranges.
        chart.removeSeries();
        QCOMPARE(chart.yAxis->range(), QCPRange(0, 1));
        QCOMPARE(chart.xAxis->range(), QCPRange(0, 1));
    }

    void legendSitsOutsideTheData()
    {
        MetricChart chart(QStringLiteral("step time"));
        chart.addSeries(QStringLiteral("rank 0"), Qt::blue);
        QVERIFY(!chart.legend->visible()); // one series: its title says it
        chart.addSeries(QStringLiteral("rank 1"), Qt::red);
        QVERIFY(chart.legend->visible());
        QVERIFY(chart.legend->layout() != chart.axisRect()->insetLayout());
        // In the series' order, with smoothing on too (the smoothed curves are made later).
        for (double weight : {0.6, 0.0, 0.3}) {
            chart.setSmoothing(weight);
            QCOMPARE(chart.legend->itemCount(), 2);
            for (int i = 0; i < 2; ++i) {
                auto* item = qobject_cast<QCPPlottableLegendItem*>(chart.legend->item(i));
                QVERIFY(item);
                QCOMPARE(item->plottable()->name(), QStringLiteral("rank %1").arg(i));
                QCOMPARE(item->plottable()->pen().color().alpha(), 255); // the smoothed curve's pen, not the faint one
            }
        }
    }

    // #21 problem 10: wheel-zoom froze every chart until Follow was pressed; a click froze one.
    void followingSurvivesAClickAndAZoomAtTheEndSlides()
    {
        MetricChart chart(QStringLiteral("loss"));
        chart.resize(600, 300);
        const int s = chart.addSeries(QStringLiteral("train"), Qt::blue);
        for (int i = 1; i <= 100; ++i)
            chart.appendPoint(s, i, 1.0 / i);
        chart.show();
        QVERIFY(QTest::qWaitForWindowExposed(&chart));
        chart.replot();
        QSignalSpy followingChanged(&chart, &MetricChart::followingChanged);
        QTest::mouseClick(&chart, Qt::LeftButton, {}, pixelOf(chart, 50, 0.5));
        QVERIFY(chart.following());
        chart.appendPoint(s, 101, 0.0099);
        QCOMPARE(chart.xAxis->range().upper, 101.0);

        // Zoomed to the last 20 steps (the view ends at the newest point): it slides on.
        QWheelEvent wheel(QPointF(pixelOf(chart, 100, 0.5)), chart.mapToGlobal(QPointF(pixelOf(chart, 100, 0.5))), QPoint(),
                          QPoint(0, 120), Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase, false);
        QApplication::sendEvent(&chart, &wheel);
        QVERIFY(!chart.following());
        QCOMPARE(followingChanged.count(), 1);
        chart.applyXRange(QCPRange(81, 101));
        chart.appendPoints(s, {102, 103}, {0.0098, 0.0097});
        QCOMPARE(chart.xAxis->range().upper, 103.0);
        QCOMPARE(chart.xAxis->range().lower, 83.0);
        // A view of the past stays where the user put it.
        chart.applyXRange(QCPRange(10, 30));
        chart.appendPoint(s, 104, 0.0096);
        QCOMPARE(chart.xAxis->range().upper, 30.0);
        chart.setFollowing(true);
        QCOMPARE(chart.xAxis->range().upper, 104.0);
    }

    void savesImagesAndData()
    {
        QTemporaryDir dir;
        MetricChart chart(QStringLiteral("loss"));
        chart.setXLabel(QStringLiteral("step"));
        chart.resize(400, 200);
        const int s = chart.addSeries(QStringLiteral("train, rank 0"), Qt::blue);
        chart.appendPoints(s, {1, 2}, {0.1, 2.5});
        QVERIFY(chart.saveImage(dir.filePath(QStringLiteral("loss.png"))));
        QVERIFY(QFileInfo(dir.filePath(QStringLiteral("loss.png"))).size() > 100);
        QVERIFY(chart.saveImage(dir.filePath(QStringLiteral("loss.svg"))));
        QFile svg(dir.filePath(QStringLiteral("loss.svg")));
        QVERIFY(svg.open(QIODevice::ReadOnly));
        QVERIFY(svg.readAll().contains("<svg"));
        QVERIFY(chart.exportCsv(dir.filePath(QStringLiteral("loss.csv"))));
        QFile csv(dir.filePath(QStringLiteral("loss.csv")));
        QVERIFY(csv.open(QIODevice::ReadOnly));
        QCOMPARE(csv.readAll(), QByteArray("series,step,value\n\"train, rank 0\",1,0.1\n\"train, rank 0\",2,2.5\n"));
    }
};

QTEST_MAIN(TestMetricChart)
#include "tst_metric_chart.moc"
