// Chart benchmark (docs/BENCHMARKS.md, "Workbench charts"): a MetricChart with 1,000,000 points
// in one series keeps getting 1,000 points/s of live input; each 60 Hz frame appends its ~17
// points and replots. Reports the time per frame (append + replot, painted) with the whole series
// in view and with a zoomed window, without and with TensorBoard smoothing, and the time to load
// the million points.
//
//   bench_live_chart [points=1000000] [frames=300]

#include "ui/metric_chart.h"

#include <QApplication>
#include <QElapsedTimer>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

using shardscope::ui::MetricChart;

namespace {

struct Stats {
    double p50, p95, max, mean;
};

Stats summarize(std::vector<double> ms)
{
    std::sort(ms.begin(), ms.end());
    double sum = 0;
    for (double v : ms)
        sum += v;
    return {ms[ms.size() / 2], ms[ms.size() * 95 / 100], ms.back(), sum / static_cast<double>(ms.size())};
}

} // namespace

int main(int argc, char** argv)
{
    QApplication app(argc, argv);
    const int points = argc > 1 ? std::atoi(argv[1]) : 1000000;
    const int frames = argc > 2 ? std::atoi(argv[2]) : 300;

    MetricChart chart(QStringLiteral("loss"));
    chart.resize(1400, 360);
    chart.show();
    QApplication::processEvents();
    const int series = chart.addSeries(QStringLiteral("train"), QColor(0x1f, 0x77, 0xb4));

    std::mt19937 rng(7);
    std::normal_distribution<double> noise(0.0, 0.02);
    double step = 0;
    auto lossAt = [&](double s) { return 2.0 / (1.0 + s / 5000.0) + noise(rng); };

    QElapsedTimer timer;
    timer.start();
    for (int done = 0; done < points;) {
        const int n = std::min(10000, points - done);
        QVector<double> xs(n), ys(n);
        for (int i = 0; i < n; ++i) {
            xs[i] = ++step;
            ys[i] = lossAt(step);
        }
        chart.appendPoints(series, xs, ys);
        done += n;
    }
    const double loadMs = static_cast<double>(timer.nsecsElapsed()) / 1e6;
    chart.replot(QCustomPlot::rpImmediateRefresh);

    // One frame at 60 Hz holds 1000/60 points of 1,000 points/s input.
    auto runFrames = [&](const char* label) {
        std::vector<double> ms;
        double carry = 0;
        for (int f = 0; f < frames; ++f) {
            carry += 1000.0 / 60.0;
            const int n = static_cast<int>(carry);
            carry -= n;
            QElapsedTimer frame;
            frame.start();
            QVector<double> xs(n), ys(n);
            for (int i = 0; i < n; ++i) {
                xs[i] = ++step;
                ys[i] = lossAt(step);
            }
            chart.appendPoints(series, xs, ys);
            chart.replot(QCustomPlot::rpImmediateRefresh); // draw and paint now, to time it
            ms.push_back(static_cast<double>(frame.nsecsElapsed()) / 1e6);
            QApplication::processEvents();
        }
        const auto s = summarize(ms);
        std::printf("%-34s points %9d  frame ms: mean %6.2f  p50 %6.2f  p95 %6.2f  max %6.2f\n", label, chart.pointCount(series),
                    s.mean, s.p50, s.p95, s.max);
        return s;
    };

    std::printf("load %d points in 10k-point appends: %.1f ms\n", points, loadMs);
    const auto full = runFrames("whole series in view (following)");
    chart.applyXRange(QCPRange(step - 10000, step + 500));
    const auto zoomed = runFrames("zoomed to the last 10k steps");
    chart.setFollowing(true);
    // TensorBoard's smoothing on (weight 0.6, its default): a second, smoothed curve of every
    // point over the faint raw one; switching it on smooths the whole series once.
    timer.restart();
    chart.setSmoothing(0.6);
    chart.replot(QCustomPlot::rpImmediateRefresh);
    const double smoothMs = static_cast<double>(timer.nsecsElapsed()) / 1e6;
    std::printf("smoothing on (0.6) over %d points, with one replot: %.1f ms\n", chart.pointCount(series), smoothMs);
    const auto smoothFull = runFrames("smoothed, whole series in view");
    chart.applyXRange(QCPRange(step - 10000, step + 500));
    const auto smoothZoomed = runFrames("smoothed, zoomed to the last 10k");
    const bool ok = full.p95 < 16.0 && zoomed.p95 < 16.0 && smoothFull.p95 < 16.0 && smoothZoomed.p95 < 16.0;
    std::printf("budget 16 ms per frame at p95: %s\n", ok ? "met" : "MISSED");
    return ok ? 0 : 1;
}
