#include "ui/metric_chart.h"

#include "engine/common/text_format.h"
#include "ui/format.h"

#include <QContextMenuEvent>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QMenu>
#include <QSvgGenerator>
#include <QTextStream>

#include <algorithm>
#include <cmath>
#include <limits>

namespace shardscope::ui {

namespace {

class BytesTicker : public QCPAxisTicker {
protected:
    QString getTickLabel(double tick, const QLocale&, QChar, int) override { return formatBytes(tick); }
};

QString shortest(double value) { return QString::fromStdString(shortestNumber(value)); }

QString csvField(const QString& text) { return QString::fromStdString(shardscope::csvField(text.toStdString())); }

} // namespace

double TensorBoardEma::next(double value)
{
    if (!std::isfinite(value))
        return value;
    last = last * weight + (1 - weight) * value;
    ++finiteCount;
    // The average started at 0 is biased towards 0 by weight^n: divide that out.
    const double debias = weight == 1 ? 1 : 1 - std::pow(weight, static_cast<double>(finiteCount));
    return last / debias;
}

QVector<double> tensorBoardSmoothed(const QVector<double>& values, double weight)
{
    // TensorBoard leaves a constant series alone (its #786): == as in JavaScript, NaN never equal.
    const bool constant = std::all_of(values.begin(), values.end(), [&](double v) { return v == values.front(); });
    if (constant)
        return values;
    QVector<double> out;
    out.reserve(values.size());
    TensorBoardEma ema{weight};
    for (double v : values)
        out.push_back(ema.next(v));
    return out;
}

MetricChart::MetricChart(const QString& title, QWidget* parent) : QCustomPlot(parent)
{
    setMinimumHeight(kMinimumHeight);
    setNoAntialiasingOnDrag(true);
    // Antialiased lines cost several times more in the raster engine; charts are dense enough.
    setNotAntialiasedElements(QCP::aeAll);
    setAntialiasedElements(QCP::aeNone);
    setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    setMouseTracking(true); // the hover label follows the mouse without a button pressed
    axisRect()->setRangeDrag(Qt::Horizontal);
    axisRect()->setRangeZoom(Qt::Horizontal);
    // The title row holds the title and, beside it, the legend: outside the data, and no row of
    // its own to take height from a short chart.
    plotLayout()->insertRow(0);
    m_legendRow = new QCPLayoutGrid;
    plotLayout()->addElement(0, 0, m_legendRow);
    m_title = new QCPTextElement(this, title, QFont(font().family(), font().pointSize(), QFont::Bold));
    m_legendRow->addElement(0, 0, m_title);
    m_legendRow->addElement(0, 1, legend); // out of the axis rect's inset layout
    m_legendRow->setColumnStretchFactor(0, 1);
    m_legendRow->setColumnStretchFactor(1, 0.001);
    legend->setFillOrder(QCPLegend::foColumnsFirst);
    legend->setWrap(4);
    legend->setIconSize(14, 8);
    legend->setBorderPen(Qt::NoPen);
    legend->setMargins(QMargins(4, 0, 4, 0)); // no taller than the title: the row is the title's
    legend->setFont(QFont(font().family(), font().pointSize() - 1));
    legend->setVisible(false);
    xAxis->grid()->setPen(QPen(QColor(225, 225, 225)));
    yAxis->grid()->setPen(QPen(QColor(225, 225, 225)));
    setValueFormat(ValueFormat::Plain); // the value axis's ticker, few ticks: the charts are short

    // The crosshair and the hover label on a layer of their own: moving the mouse redraws that
    // layer only, not a million points.
    layer(QStringLiteral("overlay"))->setMode(QCPLayer::lmBuffered);
    m_crosshair = new QCPItemStraightLine(this);
    m_crosshair->setLayer(QStringLiteral("overlay"));
    m_crosshair->setPen(QPen(QColor(120, 120, 120), 1, Qt::DashLine));
    m_crosshair->setClipToAxisRect(true);
    m_crosshair->setVisible(false);
    m_hoverLabel = new QCPItemText(this);
    m_hoverLabel->setLayer(QStringLiteral("overlay"));
    m_hoverLabel->position->setType(QCPItemPosition::ptAxisRectRatio);
    m_hoverLabel->position->setCoords(0.01, 0.02);
    m_hoverLabel->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
    m_hoverLabel->setTextAlignment(Qt::AlignLeft);
    m_hoverLabel->setBrush(QColor(255, 255, 255, 225));
    m_hoverLabel->setPen(QPen(QColor(190, 190, 190)));
    m_hoverLabel->setPadding(QMargins(4, 2, 4, 2));
    m_hoverLabel->setVisible(false);

    // A drag or wheel zoom that moves the x range is the user taking it over (a click alone, or a
    // right click for the menu, is not: the chart keeps following).
    connect(xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this, [this](const QCPRange& range) {
        if (m_applyingRange || !m_userMovingRange)
            return;
        setFollowingState(false);
        emit xRangeChangedByUser(range);
    });
}

int MetricChart::addSeries(const QString& name, const QColor& color, Style style)
{
    auto* graph = addGraph();
    graph->setName(name);
    graph->setAdaptiveSampling(true);
    if (style == Style::Steps)
        graph->setLineStyle(QCPGraph::lsStepLeft);
    else if (style == Style::Markers)
        graph->setLineStyle(QCPGraph::lsNone);
    Series s;
    s.graph = graph;
    s.color = color;
    s.style = style;
    applyPens(s);
    m_series.push_back(s);
    if (m_smoothing > 0)
        resmooth(m_series.back());
    updateLegend();
    return static_cast<int>(m_series.size()) - 1;
}

int MetricChart::pointCount(int index) const
{
    if (index < 0 || index >= seriesCount())
        return 0;
    return series(index)->dataCount();
}

int MetricChart::totalPointCount() const
{
    int total = 0;
    for (const auto& s : m_series)
        total += s.graph->dataCount();
    return total;
}

void MetricChart::appendPoints(int index, const QVector<double>& x, const QVector<double>& y)
{
    if (x.isEmpty())
        return;
    Series& s = m_series[static_cast<std::size_t>(index)];
    // A zoomed view whose right edge shows the newest point slides on with new points.
    const bool viewAtEnd = !m_following && m_hasData && xAxis->range().upper >= m_xMax;
    const double oldMax = m_xMax;
    // A non-finite value is a gap in its curve (NaN breaks a QCPGraph's line; an infinity would
    // draw to the edge and stretch nothing) and a mark along the top of the chart at its x.
    QVector<double> values = y;
    for (qsizetype i = 0; i < values.size(); ++i)
        if (!std::isfinite(values[i])) {
            markNonFinite(x[i]);
            values[i] = std::numeric_limits<double>::quiet_NaN();
        }
    s.graph->addData(x, values, /*alreadySorted=*/true);
    if (s.smooth)
        appendSmoothed(s, x, values);
    for (qsizetype i = 0; i < x.size(); ++i)
        includeInRanges(x[i], y[i]);
    if (viewAtEnd && m_xMax > oldMax) {
        const QCPRange r = xAxis->range();
        m_applyingRange = true;
        xAxis->setRange(r.lower + (m_xMax - oldMax), r.upper + (m_xMax - oldMax));
        m_applyingRange = false;
    }
    updateRanges();
    requestReplot();
}

void MetricChart::markNonFinite(double x)
{
    if (!m_nonFiniteMarks) {
        // On the hidden right axis, fixed at 0..1: the marks stay at the top whatever the values' scale.
        yAxis2->setRange(0, 1);
        m_nonFiniteMarks = addGraph(xAxis, yAxis2);
        m_nonFiniteMarks->setName(tr("non-finite (NaN or infinite)"));
        m_nonFiniteMarks->setLineStyle(QCPGraph::lsNone);
        const QColor red(200, 30, 30);
        m_nonFiniteMarks->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssTriangleInverted, red, red, 7));
        m_nonFiniteMarks->removeFromLegend();
    }
    m_nonFiniteMarks->addData(x, 0.96);
}

int MetricChart::nonFiniteCount() const { return m_nonFiniteMarks ? m_nonFiniteMarks->dataCount() : 0; }

void MetricChart::appendPoint(int index, double x, double y) { appendPoints(index, QVector<double>{x}, QVector<double>{y}); }

void MetricChart::appendSmoothed(Series& s, const QVector<double>& x, const QVector<double>& y)
{
    const bool wasConstant = s.constant;
    const bool firstPoints = s.graph->dataCount() == static_cast<int>(y.size());
    if (firstPoints)
        s.first = y.front();
    for (double v : y)
        s.constant = s.constant && v == s.first;
    if (wasConstant && !s.constant) {
        resmooth(s); // TensorBoard judges constancy over the whole series: every point again
        return;
    }
    QVector<double> smoothed;
    smoothed.reserve(y.size());
    for (double v : y)
        smoothed.push_back(s.constant ? v : s.ema.next(v));
    s.smooth->addData(x, smoothed, /*alreadySorted=*/true);
}

void MetricChart::applyPens(Series& s)
{
    // Width 1: wider pens defeat the fast path of the raster engine.
    if (s.style == Style::Markers)
        s.graph->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, s.color, s.color, 6));
    QColor raw = s.color;
    if (s.smooth) {
        s.smooth->setPen(QPen(s.color, 1));
        raw.setAlpha(70);
    }
    s.graph->setPen(QPen(raw, 1));
}

void MetricChart::setSeriesColor(int index, const QColor& color)
{
    Series& s = m_series[static_cast<std::size_t>(index)];
    s.color = color;
    applyPens(s);
    requestReplot();
}

void MetricChart::resmooth(Series& s)
{
    if (s.style != Style::Line)
        return;
    if (!s.smooth) {
        s.smooth = addGraph();
        s.smooth->setAdaptiveSampling(true);
        s.smooth->setName(s.graph->name());
        applyPens(s);
    }
    QVector<double> xs, ys;
    xs.reserve(s.graph->dataCount());
    ys.reserve(s.graph->dataCount());
    for (auto it = s.graph->data()->constBegin(); it != s.graph->data()->constEnd(); ++it) {
        xs.push_back(it->key);
        ys.push_back(it->value);
    }
    // The whole curve, and the state appendSmoothed carries on from.
    s.first = ys.isEmpty() ? 0 : ys.front();
    s.constant = std::all_of(ys.begin(), ys.end(), [&](double v) { return v == s.first; });
    s.ema = TensorBoardEma{m_smoothing};
    QVector<double> smoothed;
    smoothed.reserve(ys.size());
    for (double v : ys)
        smoothed.push_back(s.constant ? v : s.ema.next(v));
    s.smooth->setData(xs, smoothed, /*alreadySorted=*/true);
}

void MetricChart::setSmoothing(double weight)
{
    weight = std::clamp(weight, 0.0, 0.999);
    if (weight == m_smoothing)
        return;
    m_smoothing = weight;
    for (auto& s : m_series) {
        if (weight > 0) {
            resmooth(s);
        } else if (s.smooth) {
            removeGraph(s.smooth);
            s.smooth = nullptr;
            applyPens(s);
        }
    }
    updateLegend();
    requestReplot();
}

QVector<double> MetricChart::smoothedValues(int index) const
{
    const Series& s = m_series[static_cast<std::size_t>(index)];
    QVector<double> out;
    const QCPGraph* graph = s.smooth ? s.smooth : s.graph;
    for (auto it = graph->data()->constBegin(); it != graph->data()->constEnd(); ++it)
        out.push_back(it->value);
    return out;
}

void MetricChart::updateLegend()
{
    // With smoothing on, the legend shows the smoothed curve's pen (the raw one is faint). Built
    // again in the series' order: QCustomPlot adds a graph to the legend when it is made, so the
    // smoothed curves, made later, would come out of order (rank 1 before rank 0).
    legend->clearItems();
    for (auto& s : m_series)
        (s.smooth ? s.smooth : s.graph)->addToLegend();
    legend->setVisible(m_series.size() > 1);
}

std::optional<QPointF> MetricChart::pointNear(int index, double x) const
{
    if (index < 0 || index >= seriesCount())
        return std::nullopt;
    const auto data = series(index)->data();
    if (data->isEmpty())
        return std::nullopt;
    // The first point at or after x, and the one before it: the nearer of the two.
    auto after = std::lower_bound(data->constBegin(), data->constEnd(), x,
                                  [](const QCPGraphData& d, double key) { return d.key < key; });
    if (after == data->constEnd())
        --after;
    auto best = after;
    if (after != data->constBegin()) {
        auto before = after - 1;
        if (std::abs(before->key - x) <= std::abs(after->key - x))
            best = before;
    }
    return QPointF(best->key, best->value);
}

double MetricChart::hoverTolerance(int index, double x) const
{
    // Half the gap to the series' neighbouring points: the next step's point is nearer the next step.
    const auto data = series(index)->data();
    auto at = data->findBegin(x, false);
    double gap = std::numeric_limits<double>::infinity();
    if (at != data->constEnd() && at != data->constBegin())
        gap = std::min(gap, x - (at - 1)->key);
    if (at != data->constEnd() && at + 1 != data->constEnd())
        gap = std::min(gap, (at + 1)->key - x);
    return gap / 2;
}

QString MetricChart::hoverText(double x) const
{
    // The point nearest the mouse, of any series, gives the x shown; the other series show their
    // value at that x only where they have one (an eval every 50 steps is not the value at step 31).
    int nearestSeries = -1;
    double shownX = 0;
    for (int i = 0; i < seriesCount(); ++i)
        if (const auto p = pointNear(i, x); p && (nearestSeries < 0 || std::abs(p->x() - x) < std::abs(shownX - x))) {
            nearestSeries = i;
            shownX = p->x();
        }
    if (nearestSeries < 0)
        return {};
    const double tolerance = hoverTolerance(nearestSeries, shownX);
    QStringList lines;
    const bool bytes = m_valueFormat == ValueFormat::Bytes;
    auto value = [bytes](double v) { return bytes ? formatBytes(v) : QString::number(v, 'g', 6); };
    for (int i = 0; i < seriesCount(); ++i) {
        const auto p = pointNear(i, shownX);
        if (!p || (i != nearestSeries && !(std::abs(p->x() - shownX) < tolerance)))
            continue;
        QString line = QStringLiteral("%1: %2").arg(seriesName(i), value(p->y()));
        if (const QCPGraph* smooth = m_series[static_cast<std::size_t>(i)].smooth) {
            auto it = smooth->data()->findBegin(p->x(), false);
            if (it != smooth->data()->constEnd() && it->key == p->x())
                line += tr(" (smoothed %1)").arg(value(it->value));
        }
        lines << line;
    }
    lines.prepend(QStringLiteral("%1 %2").arg(xAxis->label().isEmpty() ? QStringLiteral("x") : xAxis->label(),
                                              QString::number(shownX, 'g', 10)));
    return lines.join(QLatin1Char('\n'));
}

QString MetricChart::shownHoverText() const { return m_hoverLabel->visible() ? m_hoverLabel->text() : QString(); }

void MetricChart::showHover(double x)
{
    const QString text = std::isfinite(x) ? hoverText(x) : QString();
    const bool show = !text.isEmpty();
    if (show) {
        const auto p = pointNear(0, x);
        const double at = p ? p->x() : x;
        m_crosshair->point1->setCoords(at, 0);
        m_crosshair->point2->setCoords(at, 1);
        m_hoverLabel->setText(text);
        // Away from the mouse: the label sits in the half the mouse is not in.
        const bool mouseLeft = xAxis->coordToPixel(x) < axisRect()->center().x();
        m_hoverLabel->position->setCoords(mouseLeft ? 0.99 : 0.01, 0.02);
        m_hoverLabel->setPositionAlignment((mouseLeft ? Qt::AlignRight : Qt::AlignLeft) | Qt::AlignTop);
    }
    m_crosshair->setVisible(show);
    m_hoverLabel->setVisible(show);
    layer(QStringLiteral("overlay"))->replot();
}

void MetricChart::mouseMoveEvent(QMouseEvent* event)
{
    QCustomPlot::mouseMoveEvent(event);
    if (axisRect()->rect().contains(event->pos())) {
        const double x = xAxis->pixelToCoord(event->pos().x());
        showHover(x);
        emit hovered(x);
    } else if (m_hoverLabel->visible()) {
        showHover(std::nan(""));
        emit hovered(std::nan(""));
    }
}

void MetricChart::leaveEvent(QEvent* event)
{
    QCustomPlot::leaveEvent(event);
    m_crosshair->setVisible(false);
    m_hoverLabel->setVisible(false);
    layer(QStringLiteral("overlay"))->replot();
    emit hovered(std::nan(""));
}

void MetricChart::contextMenuEvent(QContextMenuEvent* event)
{
    QMenu menu(this);
    QAction* log = menu.addAction(tr("Log scale"));
    log->setCheckable(true);
    log->setChecked(logValueAxis());
    connect(log, &QAction::toggled, this, [this](bool on) { setLogValueAxis(on); });
    menu.addAction(tr("Follow the data"), this, [this] {
        setFollowing(true);
        emit followingReset();
    });
    menu.addSeparator();
    menu.addAction(tr("Save image…"), this, [this] {
        const QString path = QFileDialog::getSaveFileName(this, tr("Save chart"), title() + QStringLiteral(".png"),
                                                          tr("PNG image (*.png);;SVG image (*.svg)"));
        if (!path.isEmpty())
            saveImage(path);
    });
    menu.addAction(tr("Export data as CSV…"), this, [this] {
        const QString path = QFileDialog::getSaveFileName(this, tr("Export chart data"), title() + QStringLiteral(".csv"),
                                                          tr("CSV (*.csv)"));
        if (!path.isEmpty())
            exportCsv(path);
    });
    if (!m_ownerActions.isEmpty()) {
        menu.addSeparator();
        menu.addActions(m_ownerActions);
    }
    menu.exec(event->globalPos());
}

bool MetricChart::saveImage(const QString& path)
{
    if (QFileInfo(path).suffix().compare(QLatin1String("svg"), Qt::CaseInsensitive) != 0)
        return savePng(path);
    QSvgGenerator svg;
    svg.setFileName(path);
    svg.setSize(size());
    svg.setViewBox(rect());
    svg.setTitle(title());
    QCPPainter painter;
    if (!painter.begin(&svg))
        return false;
    toPainter(&painter, width(), height());
    return painter.end();
}

bool MetricChart::exportCsv(const QString& path) const
{
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate))
        return false;
    QTextStream out(&file);
    out << "series," << csvField(xAxis->label().isEmpty() ? QStringLiteral("x") : xAxis->label()) << ",value\n";
    for (int i = 0; i < seriesCount(); ++i) {
        const QString name = csvField(seriesName(i));
        for (auto it = series(i)->data()->constBegin(); it != series(i)->data()->constEnd(); ++it)
            out << name << ',' << shortest(it->key) << ',' << shortest(it->value) << '\n';
    }
    out.flush();
    return file.error() == QFileDevice::NoError;
}

void MetricChart::clearData()
{
    for (auto& s : m_series) {
        s.graph->data()->clear();
        if (s.smooth)
            s.smooth->data()->clear();
        s.constant = true;
        s.ema = TensorBoardEma{m_smoothing};
    }
    if (m_nonFiniteMarks)
        m_nonFiniteMarks->data()->clear();
    m_hasData = false;
    requestReplot();
}

void MetricChart::removeSeries()
{
    clearGraphs();
    m_nonFiniteMarks = nullptr; // deleted with the graphs
    m_series.clear();
    m_hasData = false;
    legend->setVisible(false);
    // Nothing of the previous run's ranges stays behind.
    xAxis->setRange(0, 1);
    yAxis->setRange(logValueAxis() ? 1 : 0, logValueAxis() ? 10 : 1);
    m_crosshair->setVisible(false);
    m_hoverLabel->setVisible(false);
    requestReplot();
}

void MetricChart::setValueFormat(ValueFormat format)
{
    m_valueFormat = format;
    if (format == ValueFormat::Bytes)
        yAxis->setTicker(QSharedPointer<QCPAxisTicker>(new BytesTicker));
    else
        yAxis->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
    yAxis->ticker()->setTickCount(3);
}

void MetricChart::setLogValueAxis(bool log)
{
    if (log == logValueAxis())
        return;
    yAxis->setScaleType(log ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
    if (log) {
        yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
        yAxis->ticker()->setTickCount(3);
    } else {
        setValueFormat(m_valueFormat);
    }
    rescanRanges(); // zeros and negatives leave a log axis's range, and come back to a linear one
    requestReplot();
}

void MetricChart::rescanRanges()
{
    m_hasData = false;
    for (const auto& s : m_series)
        for (auto it = s.graph->data()->constBegin(); it != s.graph->data()->constEnd(); ++it)
            includeInRanges(it->key, it->value);
    updateRanges();
}

void MetricChart::includeInRanges(double x, double y)
{
    if (!std::isfinite(y) || !std::isfinite(x) || (logValueAxis() && y <= 0))
        return; // what the value axis cannot show
    if (!m_hasData) {
        m_xMin = m_xMax = x;
        m_yMin = m_yMax = y;
        m_hasData = true;
        return;
    }
    m_xMin = std::min(m_xMin, x);
    m_xMax = std::max(m_xMax, x);
    m_yMin = std::min(m_yMin, y);
    m_yMax = std::max(m_yMax, y);
}

void MetricChart::setXLabel(const QString& label) { xAxis->setLabel(label); }

void MetricChart::setNote(const QString& note)
{
    if (!m_note) {
        if (note.isEmpty())
            return;
        plotLayout()->insertRow(plotLayout()->rowCount()); // under the axis rect
        m_note = new QCPTextElement(this, QString(), QFont(font().family(), font().pointSize() - 1));
        m_note->setTextColor(QColor(90, 90, 90));
        m_note->setMargins(QMargins(4, 0, 4, 2));
        plotLayout()->addElement(plotLayout()->rowCount() - 1, 0, m_note);
    }
    if (m_note->text() == note)
        return;
    m_note->setText(note);
    m_note->setVisible(!note.isEmpty());
    replot(QCustomPlot::rpQueuedReplot);
}

QString MetricChart::note() const { return m_note ? m_note->text() : QString(); }

void MetricChart::setFollowing(bool following)
{
    setFollowingState(following);
    if (following) {
        updateRanges();
        requestReplot();
    }
}

void MetricChart::requestReplot() { replot(QCustomPlot::rpQueuedReplot); }

void MetricChart::applyXRange(const QCPRange& range)
{
    setFollowingState(false);
    m_applyingRange = true;
    xAxis->setRange(range);
    m_applyingRange = false;
    requestReplot();
}

void MetricChart::updateRanges()
{
    if (!m_hasData)
        return;
    const double yPad = m_yMax > m_yMin ? (m_yMax - m_yMin) * 0.05 : std::max(std::abs(m_yMax) * 0.05, 1e-12);
    if (logValueAxis())
        yAxis->setRange(m_yMin / 1.5, m_yMax * 1.5);
    else
        yAxis->setRange(m_yMin - yPad, m_yMax + yPad);
    if (m_following) {
        m_applyingRange = true;
        xAxis->setRange(m_xMin, m_xMax > m_xMin ? m_xMax : m_xMin + 1);
        m_applyingRange = false;
    }
}

void MetricChart::setFollowingState(bool following)
{
    if (following == m_following)
        return;
    m_following = following;
    emit followingChanged(following);
}

void MetricChart::mousePressEvent(QMouseEvent* event)
{
    m_userMovingRange = event->button() == Qt::LeftButton;
    QCustomPlot::mousePressEvent(event);
}

void MetricChart::mouseReleaseEvent(QMouseEvent* event)
{
    QCustomPlot::mouseReleaseEvent(event);
    m_userMovingRange = false;
}

void MetricChart::wheelEvent(QWheelEvent* event)
{
    m_userMovingRange = true;
    QCustomPlot::wheelEvent(event);
    m_userMovingRange = false;
}

void MetricChart::mouseDoubleClickEvent(QMouseEvent* event)
{
    QCustomPlot::mouseDoubleClickEvent(event);
    setFollowing(true);
    emit followingReset();
}

void ChartGroup::add(MetricChart* chart)
{
    m_charts.emplace_back(chart);
    connect(chart, &MetricChart::xRangeChangedByUser, this, [this, chart](const QCPRange& range) {
        for (const auto& other : m_charts)
            if (other && other != chart)
                other->applyXRange(range);
    });
    connect(chart, &MetricChart::followingReset, this, [this] { setFollowing(true); });
    // One crosshair for the run: the step under the mouse on every chart, each saying its values.
    connect(chart, &MetricChart::hovered, this, [this, chart](double x) {
        for (const auto& other : m_charts)
            if (other && other != chart)
                other->showHover(x);
    });
    connect(chart, &MetricChart::followingChanged, this, [this] { emit followingChanged(following()); });
}

bool ChartGroup::following() const
{
    return std::all_of(m_charts.begin(), m_charts.end(), [](const auto& chart) { return !chart || chart->following(); });
}

void ChartGroup::setFollowing(bool following)
{
    for (const auto& chart : m_charts)
        if (chart)
            chart->setFollowing(following);
}

void ChartGroup::setSmoothing(double weight)
{
    for (const auto& chart : m_charts)
        if (chart)
            chart->setSmoothing(weight);
}

} // namespace shardscope::ui
