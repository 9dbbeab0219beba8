#include "ui/trace_timeline.h"

#include "ui/format.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>

namespace shardscope::ui {

namespace prof = shardscope::profiler;

namespace {

QColor laneColor(prof::Lane lane)
{
    switch (lane) {
    case prof::Lane::Compute:
        return workColor(WorkKind::Compute);
    case prof::Lane::Communication:
        return workColor(WorkKind::Communication);
    case prof::Lane::Memory:
        return workColor(WorkKind::Memory);
    case prof::Lane::Host:
        return workColor(WorkKind::Host);
    }
    return Qt::gray;
}

// 1, 2, 5 × 10^k ns: the tick step giving about `target` ticks over `range`.
double tickStep(double range, int target)
{
    const double raw = range / std::max(1, target);
    const double magnitude = std::pow(10.0, std::floor(std::log10(std::max(raw, 1.0))));
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (m * magnitude >= raw)
            return m * magnitude;
    return 10.0 * magnitude;
}

constexpr std::int64_t kMinRangeNs = 1000; // ns: zooming in stops at a microsecond across

} // namespace

TraceTimeline::TraceTimeline(QWidget* parent) : QWidget(parent)
{
    setMouseTracking(true);
    setAutoFillBackground(true);
    QPalette pal = palette();
    pal.setColor(QPalette::Window, Qt::white);
    setPalette(pal);
    setFocusPolicy(Qt::WheelFocus);
}

void TraceTimeline::setView(std::shared_ptr<const TraceView> view)
{
    m_view = std::move(view);
    updateGeometry();
    resetZoom();
}

void TraceTimeline::resetZoom()
{
    if (!m_view || m_view->endNs <= m_view->startNs) {
        setVisibleRange(m_view ? m_view->startNs : 0, (m_view ? m_view->startNs : 0) + kMinRangeNs);
        return;
    }
    // A little margin so that the first and last bars don't touch the edges.
    const std::int64_t margin = (m_view->endNs - m_view->startNs) / 100;
    setVisibleRange(m_view->startNs - margin, m_view->endNs + margin);
}

void TraceTimeline::setVisibleRange(std::int64_t startNs, std::int64_t endNs)
{
    if (endNs - startNs < kMinRangeNs) {
        const std::int64_t mid = startNs + (endNs - startNs) / 2;
        startNs = mid - kMinRangeNs / 2;
        endNs = startNs + kMinRangeNs;
    }
    if (startNs == m_startNs && endNs == m_endNs)
        return;
    m_startNs = startNs;
    m_endNs = endNs;
    update();
    emit visibleRangeChanged(m_startNs, m_endNs);
}

double TraceTimeline::timeAt(double x) const
{
    const double w = std::max(1, width() - kLabelWidth);
    return double(m_startNs) + (x - kLabelWidth) * double(m_endNs - m_startNs) / w;
}

double TraceTimeline::xOf(double ns) const
{
    const double w = std::max(1, width() - kLabelWidth);
    return kLabelWidth + (ns - double(m_startNs)) * w / double(m_endNs - m_startNs);
}

void TraceTimeline::zoomBy(double factor, double anchorX)
{
    anchorX = std::clamp(anchorX, double(kLabelWidth), double(std::max(kLabelWidth, width())));
    const double anchor = timeAt(anchorX);
    const double start = anchor - (anchor - double(m_startNs)) * factor;
    const double end = anchor + (double(m_endNs) - anchor) * factor;
    setVisibleRange(std::llround(start), std::llround(end));
}

int TraceTimeline::rowAt(int y) const
{
    if (!m_view || y < kAxisHeight)
        return -1;
    const int row = (y - kAxisHeight) / kRowHeight;
    return row < int(m_view->rows.size()) ? row : -1;
}

QRect TraceTimeline::rowRect(int row) const { return QRect(0, kAxisHeight + row * kRowHeight, width(), kRowHeight); }

std::optional<TraceTimeline::Hit> TraceTimeline::barAt(QPoint pos) const
{
    const int row = rowAt(pos.y());
    if (row < 0 || pos.x() < kLabelWidth)
        return std::nullopt;
    const auto& bars = m_view->rows[std::size_t(row)].bars;
    // Within 2 px, so that a bar narrower than a pixel can still be pointed at.
    const double slack = 2.0 * double(m_endNs - m_startNs) / std::max(1, width() - kLabelWidth);
    const double t = timeAt(pos.x());
    auto it = std::upper_bound(bars.begin(), bars.end(), t + slack,
                               [](double v, const TimelineBar& b) { return v < double(b.startNs); });
    // Bars within a row are disjoint: the candidate is the last that starts at or before t.
    if (it == bars.begin())
        return std::nullopt;
    --it;
    if (double(it->endNs) + slack < t)
        return std::nullopt;
    return Hit{row, int(it - bars.begin())};
}

QString TraceTimeline::rowToolTip(int rowIndex) const
{
    const auto& row = m_view->rows[std::size_t(rowIndex)];
    QString text = QStringLiteral("<b>%1</b><br>").arg(row.label.toHtmlEscaped());
    switch (row.lane) {
    case prof::Lane::Compute:
        text += tr("Compute: forward, backward and optimizer work (kernels on a GPU, operators on the CPU).");
        break;
    case prof::Lane::Communication:
        text += tr("Communication: collectives (all-reduce, all-gather, reduce-scatter) and their waits.");
        break;
    case prof::Lane::Memory:
        text += tr("Memory: copies between host and device, and memsets.");
        break;
    case prof::Lane::Host:
        text += tr("Host: the rank's CPU-side spans (the Python or C++ thread issuing the work, the data loader).");
        break;
    }
    if (!row.track.empty())
        text += tr("<br>Thread or stream: %1.").arg(qs(row.track).toHtmlEscaped());
    if (row.level > 0)
        text += tr("<br><i>#%1</i>: spans of this lane that overlap the row above in time (nested, or in flight "
                   "together, as two all-reduce buckets are) get a row of their own so that none hides another.")
                    .arg(row.level + 1);
    return text;
}

QString TraceTimeline::tooltipFor(const Hit& hit) const
{
    const auto& row = m_view->rows[std::size_t(hit.row)];
    const auto& bar = row.bars[std::size_t(hit.bar)];
    const auto& span = m_view->traces[std::size_t(row.trace)].spans[std::size_t(bar.span)];
    QString text = QStringLiteral("<b>%1</b><br>%2 · %3 · rank %4<br>%5 at %6")
                       .arg(qs(span.name).toHtmlEscaped(), qs(span.category).toHtmlEscaped(), laneTitle(span.lane))
                       .arg(row.rank)
                       .arg(formatNs(double(span.durationNs())), formatNs(double(bar.startNs - m_view->startNs)));
    if (span.step >= 0)
        text += QStringLiteral("<br>step %1").arg(span.step);
    if (span.bytes > 0)
        text += QStringLiteral("<br>%1").arg(formatBytes(double(span.bytes)));
    if (!span.track.empty())
        text += QStringLiteral("<br>%1").arg(qs(span.track).toHtmlEscaped());
    return text;
}

QSize TraceTimeline::sizeHint() const
{
    const int rows = m_view ? int(m_view->rows.size()) : 0;
    return QSize(800, kAxisHeight + std::max(rows, 4) * kRowHeight + 4);
}

QSize TraceTimeline::minimumSizeHint() const { return QSize(kLabelWidth + 200, sizeHint().height()); }

void TraceTimeline::paintAxis(QPainter& painter) const
{
    painter.fillRect(QRect(0, 0, width(), kAxisHeight), QColor(0xf3, 0xf4, 0xf6));
    painter.setPen(QColor(0x60, 0x60, 0x68));
    const double range = double(m_endNs - m_startNs);
    const double step = tickStep(range, std::max(2, (width() - kLabelWidth) / 110));
    const double origin = m_view ? double(m_view->startNs) : 0.0;
    for (double t = std::ceil((double(m_startNs) - origin) / step) * step; t + origin <= double(m_endNs); t += step) {
        const int x = int(std::lround(xOf(t + origin)));
        painter.setPen(QColor(0xe4, 0xe5, 0xe8));
        painter.drawLine(x, kAxisHeight, x, height());
        painter.setPen(QColor(0x60, 0x60, 0x68));
        painter.drawLine(x, kAxisHeight - 5, x, kAxisHeight);
        painter.drawText(x + 3, 0, 100, kAxisHeight - 4, Qt::AlignLeft | Qt::AlignVCenter, formatNs(t));
    }
    painter.drawLine(0, kAxisHeight - 1, width(), kAxisHeight - 1);
}

void TraceTimeline::paintEvent(QPaintEvent* event)
{
    QPainter painter(this);
    painter.setClipRect(event->rect());
    m_lastPaintedBars = 0;
    if (!m_view || m_view->rows.empty()) {
        painter.setPen(Qt::darkGray);
        painter.drawText(rect(), Qt::AlignCenter,
                         tr("No trace loaded. Open a profiled run (launch --profile) or a trace file (Ctrl+T)."));
        return;
    }
    paintAxis(painter);
    const QFontMetrics metrics(font());
    int firstRow = std::max(0, (event->rect().top() - kAxisHeight) / kRowHeight);
    int lastRow = std::min(int(m_view->rows.size()) - 1, (event->rect().bottom() - kAxisHeight) / kRowHeight);
    for (int r = firstRow; r <= lastRow; ++r) {
        const auto& row = m_view->rows[std::size_t(r)];
        const QRect rr = rowRect(r);
        if (r > 0 && row.rank != m_view->rows[std::size_t(r - 1)].rank) {
            painter.setPen(QColor(0xb0, 0xb0, 0xb8));
            painter.drawLine(0, rr.top(), width(), rr.top());
        }
        painter.setClipRect(QRect(kLabelWidth, rr.top(), width() - kLabelWidth, rr.height()).intersected(event->rect()));
        const QColor color = laneColor(row.lane);
        // Note [Timeline rows]: bars are disjoint and sorted, so none that starts before
        // viewStart - maxDuration can reach into the view.
        const std::int64_t from = m_startNs - row.maxDurationNs;
        auto it = std::lower_bound(row.bars.begin(), row.bars.end(), from,
                                   [](const TimelineBar& b, std::int64_t v) { return b.startNs < v; });
        double lastRight = -1e9; // px: bars ending within the pixel already painted are skipped
        for (; it != row.bars.end() && it->startNs <= m_endNs; ++it) {
            if (it->endNs < m_startNs)
                continue;
            const double x0 = xOf(double(it->startNs));
            const double x1 = std::max(xOf(double(it->endNs)), x0 + 1.0);
            if (x1 <= lastRight + 0.5)
                continue;
            const QRectF bar(std::max(x0, double(kLabelWidth) - 2.0), rr.top() + 3, 0, rr.height() - 6);
            QRectF drawn = bar;
            drawn.setRight(std::min(x1, double(width()) + 2.0));
            painter.fillRect(drawn, color);
            ++m_lastPaintedBars;
            lastRight = x1;
            if (drawn.width() > 30) {
                const auto& span = m_view->traces[std::size_t(row.trace)].spans[std::size_t(it->span)];
                // Dark text on the light fills (gold, mint, sand), white on the dark ones.
                painter.setPen(color.lightnessF() > 0.6 ? QColor(0x20, 0x20, 0x28) : QColor(Qt::white));
                painter.drawText(drawn.adjusted(3, 0, -2, 0), Qt::AlignLeft | Qt::AlignVCenter,
                                 metrics.elidedText(qs(span.name), Qt::ElideRight, int(drawn.width()) - 5));
            }
        }
        painter.setClipRect(event->rect());
        painter.fillRect(QRect(0, rr.top() + 1, kLabelWidth - 1, rr.height() - 1), QColor(0xf7, 0xf7, 0xf9));
        painter.fillRect(QRect(0, rr.top() + 4, 4, rr.height() - 8), color);
        painter.setPen(QColor(0x30, 0x30, 0x36));
        painter.drawText(QRect(8, rr.top(), kLabelWidth - 12, rr.height()), Qt::AlignLeft | Qt::AlignVCenter,
                         metrics.elidedText(row.label, Qt::ElideRight, kLabelWidth - 12));
    }
    painter.setPen(QColor(0xd0, 0xd0, 0xd6));
    painter.drawLine(kLabelWidth - 1, kAxisHeight, kLabelWidth - 1, height());
}

void TraceTimeline::wheelEvent(QWheelEvent* event)
{
    const int delta = event->angleDelta().y();
    if (delta == 0) {
        QWidget::wheelEvent(event);
        return;
    }
    // One notch (120) zooms by 20 %; Shift+wheel pans instead, as in Perfetto's horizontal scroll.
    if (event->modifiers() & Qt::ShiftModifier) {
        const std::int64_t shift = std::llround(double(m_endNs - m_startNs) * 0.1 * (delta > 0 ? -1 : 1));
        setVisibleRange(m_startNs + shift, m_endNs + shift);
    } else {
        zoomBy(std::pow(0.8, delta / 120.0), event->position().x());
    }
    event->accept();
}

void TraceTimeline::mousePressEvent(QMouseEvent* event)
{
    if (event->button() == Qt::LeftButton && event->position().x() >= kLabelWidth) {
        m_dragFrom = event->position().toPoint();
        m_dragStartNs = m_startNs;
        setCursor(Qt::ClosedHandCursor);
        event->accept();
        return;
    }
    QWidget::mousePressEvent(event);
}

void TraceTimeline::mouseMoveEvent(QMouseEvent* event)
{
    if (m_dragFrom && (event->buttons() & Qt::LeftButton)) {
        const std::int64_t range = m_endNs - m_startNs;
        const double nsPerPx = double(range) / std::max(1, width() - kLabelWidth);
        const std::int64_t start = m_dragStartNs - std::llround((event->position().x() - m_dragFrom->x()) * nsPerPx);
        setVisibleRange(start, start + range);
        event->accept();
        return;
    }
    QWidget::mouseMoveEvent(event);
}

void TraceTimeline::mouseReleaseEvent(QMouseEvent* event)
{
    if (m_dragFrom) {
        m_dragFrom.reset();
        unsetCursor();
        event->accept();
        return;
    }
    QWidget::mouseReleaseEvent(event);
}

void TraceTimeline::mouseDoubleClickEvent(QMouseEvent* event)
{
    resetZoom();
    event->accept();
}

bool TraceTimeline::event(QEvent* event)
{
    if (event->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(event);
        const int row = rowAt(help->pos().y());
        if (auto hit = barAt(help->pos()))
            QToolTip::showText(help->globalPos(), tooltipFor(*hit), this);
        else if (row >= 0 && help->pos().x() < kLabelWidth)
            QToolTip::showText(help->globalPos(), rowToolTip(row), this);
        else
            QToolTip::hideText();
        return true;
    }
    return QWidget::event(event);
}

} // namespace shardscope::ui
