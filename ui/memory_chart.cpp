#include "ui/memory_chart.h"

#include "ui/format.h"

#include <qcustomplot.h>

#include <QLabel>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace shardscope::ui {

MemoryChart::MemoryChart(QWidget* parent) : QWidget(parent)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    m_summary = new QLabel(this);
    m_summary->setObjectName(QStringLiteral("memorySummary"));
    m_summary->setWordWrap(true);
    m_chart = new QCustomPlot(this);
    m_chart->setObjectName(QStringLiteral("memoryChart"));
    m_chart->setMinimumHeight(200);
    layout->addWidget(m_summary);
    layout->addWidget(m_chart, 1);

    m_deviceBars = new QCPBars(m_chart->xAxis, m_chart->yAxis);
    m_deviceBars->setName(tr("device"));
    m_deviceBars->setBrush(QColor(0x4f, 0x9c, 0xf0));
    m_deviceBars->setPen(Qt::NoPen);
    m_hostBars = new QCPBars(m_chart->xAxis, m_chart->yAxis);
    m_hostBars->setName(tr("host (offloaded)"));
    m_hostBars->setBrush(QColor(0xb0, 0xb0, 0xb0));
    m_hostBars->setPen(Qt::NoPen);
    m_hostBars->moveAbove(m_deviceBars);
    auto ticker = QSharedPointer<QCPAxisTickerText>::create();
    ticker->addTick(1, tr("parameters"));
    ticker->addTick(2, tr("gradients"));
    ticker->addTick(3, tr("optimizer"));
    ticker->addTick(4, tr("activations"));
    m_chart->xAxis->setTicker(ticker);
    m_chart->xAxis->setRange(0.4, 4.6);
    m_chart->xAxis->grid()->setVisible(false);
    m_chart->legend->setVisible(true);
    for (int i = 0; i < 4; ++i) {
        auto* label = new QCPItemText(m_chart);
        label->setPositionAlignment(Qt::AlignHCenter | Qt::AlignBottom);
        label->setPadding(QMargins(0, 0, 0, 2));
        label->setFont(QFont(font().family(), font().pointSize() - 1));
        m_barLabels.push_back(label);
    }
    // Top left, above the headroom left over the bars (see show), clear of any bar.
    m_chart->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignLeft);
}

void MemoryChart::show(const std::optional<config::MemoryEstimate>& estimate, const QString& summary)
{
    const QVector<double> keys{1, 2, 3, 4};
    QVector<double> device(4, 0.0);
    QVector<double> host(4, 0.0);
    if (estimate) {
        const auto& e = *estimate;
        device = {e.parameters, e.gradients, e.optimizer, e.activations};
        host = {e.hostParameters, e.hostGradients, e.hostOptimizer, 0.0};
    }
    m_summary->setText(summary);

    // One unit for the whole chart, the largest that keeps the biggest bar above 1.
    double peak = 0;
    for (int i = 0; i < 4; ++i)
        peak = std::max(peak, device[i] + host[i]);
    static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int unit = 0;
    while (unit < 4 && peak >= 1024.0 * std::pow(1024.0, unit))
        ++unit;
    const double scale = std::pow(1024.0, unit);
    for (int i = 0; i < 4; ++i) {
        device[i] /= scale;
        host[i] /= scale;
    }
    m_deviceBars->setData(keys, device, true);
    m_hostBars->setData(keys, host, true);
    m_chart->yAxis->setLabel(tr("per rank (%1)").arg(QLatin1String(units[unit])));
    m_chart->yAxis->setRange(0, peak > 0 ? peak / scale * 1.4 : 1);
    // Each bar's value above it (device, and host when offloaded), in the units of the summary.
    for (int i = 0; i < 4; ++i) {
        auto* label = m_barLabels[static_cast<std::size_t>(i)];
        const double deviceBytes = device[i] * scale, hostBytes = host[i] * scale;
        label->setText(deviceBytes + hostBytes <= 0 ? QString()
                       : hostBytes > 0              ? tr("%1 + %2 host").arg(formatBytes(deviceBytes), formatBytes(hostBytes))
                                                    : formatBytes(deviceBytes));
        label->position->setCoords(keys[i], device[i] + host[i]);
    }
    m_chart->replot(QCustomPlot::rpQueuedReplot);
}

QStringList MemoryChart::barLabels() const
{
    QStringList labels;
    for (const auto* label : m_barLabels)
        labels << label->text();
    return labels;
}

} // namespace shardscope::ui
