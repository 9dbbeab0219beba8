#pragma once

// The Trace page's timeline: one row per rank, lane and track (ui/trace_models.h, Note [Timeline
// rows]), spans drawn as bars coloured by lane with their names where they fit and in a tooltip.
// The wheel zooms around the pointer, a drag pans, a double click shows everything. A custom
// painter rather than QCustomPlot: a trace holds hundreds of thousands of spans, and only those
// that intersect the visible range are looked at (binary search per row).

#include "ui/trace_models.h"

#include <QWidget>

#include <cstdint>
#include <memory>
#include <optional>

namespace shardscope::ui {

class TraceTimeline : public QWidget {
    Q_OBJECT
public:
    explicit TraceTimeline(QWidget* parent = nullptr);

    void setView(std::shared_ptr<const TraceView> view); // shows everything
    const TraceView* view() const { return m_view.get(); }

    // ns, run clock (TimelineBar's clock).
    std::int64_t visibleStartNs() const { return m_startNs; }
    std::int64_t visibleEndNs() const { return m_endNs; }
    void setVisibleRange(std::int64_t startNs, std::int64_t endNs);
    void resetZoom();
    // factor < 1 zooms in; the time under anchorX (widget x) stays where it is.
    void zoomBy(double factor, double anchorX);

    struct Hit {
        int row = -1;
        int bar = -1; // index into TimelineRow::bars
    };
    std::optional<Hit> barAt(QPoint pos) const;
    int rowAt(int y) const; // -1 outside the rows
    QRect rowRect(int row) const;
    // ns of the run clock at widget x, and back (x inside the plot area).
    double timeAt(double x) const;
    double xOf(double ns) const;
    int plotLeft() const { return kLabelWidth; }
    // Bars the last paint drew (after culling and merging of sub-pixel bars): for tests and the
    // benchmark that culling works.
    int lastPaintedBars() const { return m_lastPaintedBars; }
    QString tooltipFor(const Hit& hit) const;
    // A row label's tooltip: what the lane holds and, for "#2" rows, why the row exists.
    QString rowToolTip(int row) const;

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

    static constexpr int kLabelWidth = 200; // px
    static constexpr int kAxisHeight = 22; // px
    static constexpr int kRowHeight = 20; // px

signals:
    void visibleRangeChanged(qint64 startNs, qint64 endNs);

protected:
    void paintEvent(QPaintEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void mouseDoubleClickEvent(QMouseEvent* event) override;
    bool event(QEvent* event) override;

private:
    void paintAxis(class QPainter& painter) const;

    std::shared_ptr<const TraceView> m_view;
    std::int64_t m_startNs = 0;
    std::int64_t m_endNs = 1;
    std::optional<QPoint> m_dragFrom;
    std::int64_t m_dragStartNs = 0;
    int m_lastPaintedBars = 0;
};

} // namespace shardscope::ui
