#include "ui/metric_chart.h"

#include "ui/format.h"

#include <cmath>

namespace shardscope::ui {

namespace {

class BytesTicker : public QCPAxisTicker {
protected:
    QString getTickLabel(double tick, const QLocale&, QChar, int) override { return formatBytes(tick); }
};

} // namespace

MetricChart::MetricChart(const QString& title, QWidget* parent) : QCustomPlot(parent)
{
    setMinimumHeight(120); // four rows of them and the log fit a 1366x768 screen
    setNoAntialiasingOnDrag(true);
    // Antialiased lines cost several times more in the raster engine; charts are dense enough.
    setNotAntialiasedElements(QCP::aeAll);
    setAntialiasedElements(QCP::aeNone);
    setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    axisRect()->setRangeDrag(Qt::Horizontal);
    axisRect()->setRangeZoom(Qt::Horizontal);
    plotLayout()->insertRow(0);
    m_title = new QCPTextElement(this, title, QFont(font().family(), font().pointSize(), QFont::Bold));
    plotLayout()->addElement(0, 0, m_title);
    legend->setVisible(false);
    legend->setFont(QFont(font().family(), font().pointSize() - 1));
    legend->setBrush(QColor(255, 255, 255, 200));
    axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
    xAxis->grid()->setPen(QPen(QColor(225, 225, 225)));
    yAxis->grid()->setPen(QPen(QColor(225, 225, 225)));
    // A drag or wheel zoom is the user taking over the x range.
    connect(this, &QCustomPlot::mousePress, this, [this](QMouseEvent*) { m_following = false; });
    connect(this, &QCustomPlot::mouseWheel, this, [this](QWheelEvent*) { m_following = false; });
    connect(xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this, [this](const QCPRange& range) {
        if (!m_applyingRange && !m_following)
            emit xRangeChangedByUser(range);
    });
}

int MetricChart::addSeries(const QString& name, const QColor& color, Style style)
{
    auto* graph = addGraph();
    graph->setName(name);
    graph->setAdaptiveSampling(true);
    QPen pen(color);
    pen.setWidth(1); // wider pens defeat the fast path of the raster engine
    graph->setPen(pen);
    switch (style) {
    case Style::Line:
        break;
    case Style::Steps:
        graph->setLineStyle(QCPGraph::lsStepLeft);
        break;
    case Style::Markers:
        graph->setLineStyle(QCPGraph::lsNone);
        graph->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, color, color, 6));
        break;
    }
    m_series.push_back({graph});
    legend->setVisible(m_series.size() > 1);
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
    series(index)->addData(x, y, /*alreadySorted=*/true);
    for (qsizetype i = 0; i < x.size(); ++i) {
        if (!std::isfinite(y[i]) || !std::isfinite(x[i]) || (yAxis->scaleType() == QCPAxis::stLogarithmic && y[i] <= 0))
            continue;
        if (!m_hasData) {
            m_xMin = m_xMax = x[i];
            m_yMin = m_yMax = y[i];
            m_hasData = true;
            continue;
        }
        m_xMin = std::min(m_xMin, x[i]);
        m_xMax = std::max(m_xMax, x[i]);
        m_yMin = std::min(m_yMin, y[i]);
        m_yMax = std::max(m_yMax, y[i]);
    }
    updateRanges();
    requestReplot();
}

void MetricChart::appendPoint(int index, double x, double y) { appendPoints(index, QVector<double>{x}, QVector<double>{y}); }

void MetricChart::clearData()
{
    for (auto& s : m_series)
        s.graph->data()->clear();
    m_hasData = false;
    requestReplot();
}

void MetricChart::removeSeries()
{
    clearGraphs();
    m_series.clear();
    m_hasData = false;
    legend->setVisible(false);
    requestReplot();
}

void MetricChart::setValueFormat(ValueFormat format)
{
    if (format == ValueFormat::Bytes)
        yAxis->setTicker(QSharedPointer<QCPAxisTicker>(new BytesTicker));
    else
        yAxis->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
}

void MetricChart::setLogValueAxis(bool log)
{
    yAxis->setScaleType(log ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
    if (log)
        yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
}

void MetricChart::setXLabel(const QString& label) { xAxis->setLabel(label); }

void MetricChart::setFollowing(bool following)
{
    m_following = following;
    if (following) {
        updateRanges();
        requestReplot();
    }
}

void MetricChart::requestReplot() { replot(QCustomPlot::rpQueuedReplot); }

void MetricChart::applyXRange(const QCPRange& range)
{
    m_following = false;
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
    if (yAxis->scaleType() == QCPAxis::stLogarithmic)
        yAxis->setRange(m_yMin / 1.5, m_yMax * 1.5);
    else
        yAxis->setRange(m_yMin - yPad, m_yMax + yPad);
    if (m_following) {
        m_applyingRange = true;
        xAxis->setRange(m_xMin, m_xMax > m_xMin ? m_xMax : m_xMin + 1);
        m_applyingRange = false;
    }
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
}

void ChartGroup::setFollowing(bool following)
{
    for (const auto& chart : m_charts)
        if (chart)
            chart->setFollowing(following);
}

} // namespace shardscope::ui
