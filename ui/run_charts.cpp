#include "ui/run_charts.h"

#include "ui/metric_chart.h"

#include <QAction>
#include <QGridLayout>
#include <QMenu>
#include <QSettings>

namespace shardscope::ui {

RunCharts::RunCharts(QWidget* parent) : QScrollArea(parent)
{
    setWidgetResizable(true);
    setFrameShape(QFrame::NoFrame);
    auto* area = new QWidget(this);
    m_grid = new QGridLayout(area);
    m_grid->setContentsMargins(0, 0, 0, 0);
    m_grid->setSpacing(4);
    m_group = new ChartGroup(this);
    const struct {
        const char* name;
        QString title;
    } specs[] = {{"loss", tr("Loss")},
                 {"lr", tr("Learning rate")},
                 {"grad_norm", tr("Grad norm")},
                 {"loss_scale", tr("Loss scale (fp16) · skipped steps")},
                 {"tokens_per_s", tr("Tokens/s (all ranks)")},
                 {"mfu", tr("MFU [%] per rank")},
                 {"step_time", tr("Step time [s] per rank")},
                 {"compute_time", tr("Compute time [s] per rank (without waits) · stragglers")},
                 {"memory", tr("Memory per rank")},
                 {"memory_phases", tr("Memory after forward · backward · optimizer (rank 0)")}};
    for (const auto& spec : specs) {
        const QString name = QLatin1String(spec.name);
        auto* chart = new MetricChart(spec.title, area);
        chart->setObjectName(QStringLiteral("chart_%1").arg(name));
        chart->setXLabel(tr("step"));
        auto* hide = new QAction(tr("Hide this chart"), chart);
        connect(hide, &QAction::triggered, this, [this, name] { setChartHidden(name, true); });
        auto* enlarge = new QAction(tr("Enlarge"), chart);
        enlarge->setCheckable(true);
        enlarge->setObjectName(QStringLiteral("enlarge_%1").arg(name));
        connect(enlarge, &QAction::toggled, this, [this, name](bool on) { setChartEnlarged(name, on); });
        chart->setOwnerActions({hide, enlarge});
        m_charts.push_back(chart);
        m_names.push_back(name);
        m_byName[name] = chart;
        m_group->add(chart);
    }
    chart(QStringLiteral("memory"))->setValueFormat(MetricChart::ValueFormat::Bytes);
    chart(QStringLiteral("memory_phases"))->setValueFormat(MetricChart::ValueFormat::Bytes);
    chart(QStringLiteral("loss_scale"))->setLogValueAxis(true);
    setWidget(area);
    layoutCharts();
}

MetricChart* RunCharts::chart(const QString& name) const
{
    const auto it = m_byName.find(name);
    return it == m_byName.end() ? nullptr : it->second;
}

void RunCharts::setPanels(bool lossScale, bool mfu, bool phaseMemory)
{
    m_lossScale = lossScale;
    m_mfu = mfu;
    m_phaseMemory = phaseMemory;
    layoutCharts();
}

void RunCharts::layoutCharts()
{
    // Called on every poll: the grid is rebuilt only when what decides it changed.
    const auto state = std::make_tuple(m_lossScale, m_mfu, m_phaseMemory, m_hidden, m_enlarged);
    if (m_laidOut && *m_laidOut == state)
        return;
    m_laidOut = state;
    // The loss-scale panel only where there is a loss scale: fp16 (an empty panel misleads); the
    // MFU panel where the run reports MFU (engine runs on a device whose peak is known).
    auto applies = [this](const QString& name) {
        if (name == QLatin1String("mfu"))
            return m_mfu;
        if (name == QLatin1String("memory_phases"))
            return m_phaseMemory;
        return name != QLatin1String("loss_scale") || m_lossScale;
    };
    for (auto* c : m_charts)
        m_grid->removeWidget(c);
    for (int row = 0; row < m_grid->rowCount(); ++row)
        m_grid->setRowStretch(row, 0);
    // In the charts' order, two to a row; an enlarged chart takes a row of its own, twice as tall.
    int row = 0, column = 0;
    for (std::size_t i = 0; i < m_charts.size(); ++i) {
        MetricChart* c = m_charts[i];
        const QString& name = m_names[i];
        const bool shown = applies(name) && !m_hidden.contains(name);
        c->setVisible(shown);
        if (!shown)
            continue;
        const bool enlarged = m_enlarged.contains(name);
        if (enlarged && column == 1) {
            ++row;
            column = 0;
        }
        m_grid->addWidget(c, row, column, 1, enlarged ? 2 : 1);
        m_grid->setRowStretch(row, enlarged ? 2 : 1);
        c->setMinimumHeight(enlarged ? 2 * MetricChart::kMinimumHeight : MetricChart::kMinimumHeight);
        if (enlarged || column == 1) {
            ++row;
            column = 0;
        } else {
            column = 1;
        }
    }
}

void RunCharts::checkEnlargeAction(const QString& name, bool on)
{
    if (auto* action = chart(name)->findChild<QAction*>(QStringLiteral("enlarge_%1").arg(name))) {
        const QSignalBlocker blocker(action);
        action->setChecked(on);
    }
}

void RunCharts::setLayoutSettingsFile(const QString& settingsFile)
{
    m_layoutFile = settingsFile;
    QSettings settings(m_layoutFile, QSettings::IniFormat);
    const QStringList hidden = settings.value(QStringLiteral("run/hiddenCharts")).toStringList();
    const QStringList enlarged = settings.value(QStringLiteral("run/enlargedCharts")).toStringList();
    m_hidden = QSet<QString>(hidden.begin(), hidden.end());
    m_enlarged = QSet<QString>(enlarged.begin(), enlarged.end());
    for (const auto& name : m_names)
        checkEnlargeAction(name, m_enlarged.contains(name));
    layoutCharts();
}

void RunCharts::saveLayout() const
{
    if (m_layoutFile.isEmpty())
        return;
    QSettings settings(m_layoutFile, QSettings::IniFormat);
    QStringList hidden(m_hidden.begin(), m_hidden.end());
    QStringList enlarged(m_enlarged.begin(), m_enlarged.end());
    hidden.sort();
    enlarged.sort();
    settings.setValue(QStringLiteral("run/hiddenCharts"), hidden);
    settings.setValue(QStringLiteral("run/enlargedCharts"), enlarged);
}

void RunCharts::setChartHidden(const QString& name, bool hidden)
{
    if (!chart(name) || chartHidden(name) == hidden)
        return;
    if (hidden)
        m_hidden.insert(name);
    else
        m_hidden.remove(name);
    layoutCharts();
    saveLayout();
}

void RunCharts::setChartEnlarged(const QString& name, bool enlarged)
{
    if (!chart(name) || chartEnlarged(name) == enlarged)
        return;
    if (enlarged)
        m_enlarged.insert(name);
    else
        m_enlarged.remove(name);
    checkEnlargeAction(name, enlarged);
    layoutCharts();
    saveLayout();
}

void RunCharts::resetLayout()
{
    for (const auto& name : QStringList(m_enlarged.begin(), m_enlarged.end()))
        setChartEnlarged(name, false);
    m_hidden.clear();
    layoutCharts();
    saveLayout();
}

void RunCharts::fillMenu(QMenu* menu)
{
    menu->clear();
    for (const auto& name : m_names) {
        QAction* shown = menu->addAction(chart(name)->title());
        shown->setCheckable(true);
        shown->setChecked(!chartHidden(name));
        connect(shown, &QAction::toggled, this, [this, name](bool on) { setChartHidden(name, !on); });
    }
    menu->addSeparator();
    menu->addAction(tr("Reset layout"), this, &RunCharts::resetLayout);
}

} // namespace shardscope::ui
