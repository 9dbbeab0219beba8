#pragma once

// One chart of the workbench: a QCustomPlot with series appended incrementally, value ranges kept
// as points arrive (no O(n) rescan per frame), replots coalesced into one per event-loop turn
// (rpQueuedReplot), and QCustomPlot's adaptive sampling (per-pixel min/max clusters) so a
// million-point series draws as fast as a few thousand. See docs/BENCHMARKS.md, "Workbench charts".
//
// The x axis follows the data until the user drags or zooms; a double click goes back to
// following. ChartGroup links the x range of several charts (zoom one, all follow).

#include <qcustomplot.h>

#include <QObject>
#include <QPointer>
#include <QVector>

#include <vector>

namespace shardscope::ui {

class MetricChart : public QCustomPlot {
    Q_OBJECT
public:
    enum class Style { Line, Markers, Steps };
    enum class ValueFormat { Plain, Bytes };

    explicit MetricChart(const QString& title, QWidget* parent = nullptr);

    int addSeries(const QString& name, const QColor& color, Style style = Style::Line);
    int seriesCount() const { return static_cast<int>(m_series.size()); }
    QCPGraph* series(int index) const { return m_series[static_cast<std::size_t>(index)].graph; }
    int pointCount(int index) const;
    int totalPointCount() const;
    // x must not decrease within a series (steps and times do not).
    void appendPoints(int series, const QVector<double>& x, const QVector<double>& y);
    void appendPoint(int series, double x, double y);
    void clearData(); // keeps the series
    void removeSeries(); // drops every series

    void setValueFormat(ValueFormat format);
    void setLogValueAxis(bool log);
    void setXLabel(const QString& label);
    QString title() const { return m_title->text(); }
    void setTitle(const QString& title) { m_title->setText(title); }

    bool following() const { return m_following; }
    void setFollowing(bool following); // true: ranges track the data again
    void requestReplot(); // coalesced: many calls, one replot
    void applyXRange(const QCPRange& range); // from a linked chart; stops following

signals:
    void xRangeChangedByUser(const QCPRange& range);
    void followingReset();

private:
    struct Series {
        QCPGraph* graph = nullptr;
    };
    void updateRanges();
    void mouseDoubleClickEvent(QMouseEvent* event) override;

    QCPTextElement* m_title = nullptr;
    std::vector<Series> m_series;
    bool m_following = true;
    bool m_hasData = false;
    bool m_applyingRange = false;
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

private:
    std::vector<QPointer<MetricChart>> m_charts;
};

} // namespace shardscope::ui
