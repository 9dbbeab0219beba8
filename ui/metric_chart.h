#pragma once

// One chart of the workbench: a QCustomPlot with series appended incrementally, value ranges kept
// as points arrive (no O(n) rescan per frame), replots coalesced into one per event-loop turn
// (rpQueuedReplot), and QCustomPlot's adaptive sampling (per-pixel min/max clusters) so a
// million-point series draws as fast as a few thousand. See docs/BENCHMARKS.md, "Workbench charts".
//
// What users of TensorBoard and W&B expect of a chart: the value of every series at the step under
// the mouse (a crosshair and a label); smoothing with TensorBoard's debiased exponential moving
// average, the raw curve faint behind; a log value axis; the legend outside the data; the image
// saved as PNG or SVG and the data as CSV (right-click menu).
//
// The x axis follows the data until the user drags or zooms; a zoomed view whose right edge is
// at the newest point keeps sliding with new points (a view of the past stays put); a double click
// goes back to following. ChartGroup links the x range of several charts (zoom one, all follow).

#include <qcustomplot.h>

#include <QObject>
#include <QPointer>
#include <QVector>

#include <optional>
#include <vector>

namespace shardscope::ui {

// TensorBoard's smoothing (its scalar dashboard's resmoothDataset): a 1st-order IIR filter
// started at 0 and debiased by 1 - weight^n over the n finite values so far; non-finite values
// pass through unsmoothed, and a constant series is left as it is. weight in [0, 1).
QVector<double> tensorBoardSmoothed(const QVector<double>& values, double weight);

// That filter one value at a time (a series that grows keeps one of these).
struct TensorBoardEma {
    double weight = 0;
    double last = 0;
    std::int64_t finiteCount = 0;
    double next(double value); // the smoothed value; a non-finite one passes through
};

class MetricChart : public QCustomPlot {
    Q_OBJECT
public:
    enum class Style { Line, Markers, Steps };
    enum class ValueFormat { Plain, Bytes };

    // Four rows of charts and the log fit a 1366x768 screen.
    static constexpr int kMinimumHeight = 120;

    explicit MetricChart(const QString& title, QWidget* parent = nullptr);

    int addSeries(const QString& name, const QColor& color, Style style = Style::Line);
    int seriesCount() const { return static_cast<int>(m_series.size()); }
    // The raw data's graph (with smoothing on, drawn faint behind the smoothed one).
    QCPGraph* series(int index) const { return m_series[static_cast<std::size_t>(index)].graph; }
    QColor seriesColor(int index) const { return m_series[static_cast<std::size_t>(index)].color; }
    void setSeriesColor(int index, const QColor& color); // e.g. the user chose the run's colour
    QString seriesName(int index) const { return series(index)->name(); }
    int pointCount(int index) const;
    // The marks of non-finite values (NaN, ±inf) along the top of the chart: one per value.
    int nonFiniteCount() const;
    int totalPointCount() const;
    // x must not decrease within a series (steps and times do not).
    void appendPoints(int series, const QVector<double>& x, const QVector<double>& y);
    void appendPoint(int series, double x, double y);
    void clearData(); // keeps the series
    void removeSeries(); // drops every series, and the ranges of what they showed

    void setValueFormat(ValueFormat format);
    void setLogValueAxis(bool log);
    bool logValueAxis() const { return yAxis->scaleType() == QCPAxis::stLogarithmic; }
    void setXLabel(const QString& label);
    QString title() const { return m_title->text(); }
    void setTitle(const QString& title) { m_title->setText(title); }
    // Small text under the plot: what the chart counts (empty: none).
    void setNote(const QString& note);
    QString note() const;

    // 0: off. Line series get a smoothed curve in their colour; the raw one stays, faint.
    void setSmoothing(double weight);
    double smoothing() const { return m_smoothing; }
    // The smoothed values of a line series (its raw values when smoothing is off).
    QVector<double> smoothedValues(int series) const;

    // The point of a series nearest to x (by x), as stored: {x, y}; none when the series is empty.
    std::optional<QPointF> pointNear(int series, double x) const;
    // The hover label's text for x: the x of the nearest point of any series, then "name: value"
    // for each series with a point at that x, "(smoothed s)" added with smoothing on. What the
    // chart shows under the mouse.
    QString hoverText(double x) const;
    // The crosshair and hover label at x (NaN: hidden), as the mouse shows them; a ChartGroup
    // shows its other charts' at the x the mouse is over in one.
    void showHover(double x);
    // The label shown now (empty: the mouse is not over the chart).
    QString shownHoverText() const;

    // The image as PNG or SVG (by the suffix), and the data as CSV (series, x, value per line).
    bool saveImage(const QString& path);
    bool exportCsv(const QString& path) const;

    // Actions of the chart's owner, at the end of the right-click menu (hide, enlarge).
    void setOwnerActions(const QList<QAction*>& actions) { m_ownerActions = actions; }

    bool following() const { return m_following; }
    void setFollowing(bool following); // true: ranges track the data again
    void requestReplot(); // coalesced: many calls, one replot
    void applyXRange(const QCPRange& range); // from a linked chart; stops following

signals:
    // The mouse is over x (NaN: it left the chart): a group shows the same x on its other charts.
    void hovered(double x);
    void xRangeChangedByUser(const QCPRange& range);
    void followingReset();
    void followingChanged(bool following);

protected:
    void mousePressEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;
    void mouseDoubleClickEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void leaveEvent(QEvent* event) override;
    void contextMenuEvent(QContextMenuEvent* event) override;

private:
    // How far from x (a point of the series) another series' point may lie and still be shown at x.
    double hoverTolerance(int series, double x) const;
    void markNonFinite(double x);
    QCPGraph* m_nonFiniteMarks = nullptr; // made with the first non-finite value
    struct Series {
        QCPGraph* graph = nullptr; // raw values
        QCPGraph* smooth = nullptr; // with smoothing on, line series only
        QColor color;
        Style style = Style::Line;
        // TensorBoard's smoothing, carried over appends.
        TensorBoardEma ema;
        bool constant = true; // every value so far equals the first (TensorBoard then smooths none)
        double first = 0;
    };
    void updateRanges();
    void rescanRanges(); // after a change of scale: every point again
    void includeInRanges(double x, double y);
    void resmooth(Series& s); // the whole smoothed curve again
    void applyPens(Series& s); // from s.color: full, or faint behind the smoothed curve
    void appendSmoothed(Series& s, const QVector<double>& x, const QVector<double>& y);
    void updateLegend();
    void setFollowingState(bool following); // emits followingChanged on a change

    QCPTextElement* m_title = nullptr;
    QCPTextElement* m_note = nullptr; // made by the first setNote
    QCPLayoutGrid* m_legendRow = nullptr;
    QCPItemStraightLine* m_crosshair = nullptr;
    QCPItemText* m_hoverLabel = nullptr;
    std::vector<Series> m_series;
    double m_smoothing = 0;
    ValueFormat m_valueFormat = ValueFormat::Plain;
    bool m_following = true;
    QList<QAction*> m_ownerActions;
    bool m_hasData = false;
    bool m_applyingRange = false;
    bool m_userMovingRange = false; // a drag or a wheel zoom is under way
    double m_xMin = 0, m_xMax = 0, m_yMin = 0, m_yMax = 0; // of every finite point
};

// Links the x range of charts: a drag or zoom in one applies to all, a double click in one
// makes all follow the data again.
class ChartGroup : public QObject {
    Q_OBJECT
public:
    using QObject::QObject;
    void add(MetricChart* chart);
    void setFollowing(bool following);
    bool following() const; // every chart follows the data
    void setSmoothing(double weight);

signals:
    void followingChanged(bool following);

private:
    std::vector<QPointer<MetricChart>> m_charts;
};

} // namespace shardscope::ui
