#pragma once

// The Run page's charts, in a scroll area (they scroll rather than make the window taller than a
// 1366x768 screen): loss, learning rate, grad norm, loss scale, tokens/s, MFU, step time, compute
// time, memory and memory per phase, sharing one x axis (a ChartGroup). Two to a row in that
// order; a panel shows only where it applies to the run (setPanels), and the user may hide a chart
// or enlarge it (a row of its own, twice as tall): that layout is remembered in the workbench's
// settings file.

#include <QScrollArea>
#include <QSet>

#include <map>
#include <optional>
#include <tuple>
#include <vector>

class QGridLayout;
class QMenu;

namespace shardscope::ui {

class ChartGroup;
class MetricChart;

class RunCharts : public QScrollArea {
    Q_OBJECT
public:
    explicit RunCharts(QWidget* parent = nullptr);

    const std::vector<MetricChart*>& charts() const { return m_charts; }
    MetricChart* chart(const QString& name) const; // "loss", "lr", ...; null for another name
    ChartGroup* group() const { return m_group; }

    // Which panels apply: the loss scale (fp16 runs), MFU and memory per phase (once reported).
    void setPanels(bool lossScale, bool mfu, bool phaseMemory);
    void setLayoutSettingsFile(const QString& settingsFile); // read here, written on every change
    void setChartHidden(const QString& name, bool hidden);
    void setChartEnlarged(const QString& name, bool enlarged);
    bool chartHidden(const QString& name) const { return m_hidden.contains(name); }
    bool chartEnlarged(const QString& name) const { return m_enlarged.contains(name); }
    void resetLayout();
    void fillMenu(QMenu* menu); // a check per chart (shown), and Reset layout

private:
    void layoutCharts(); // the grid, when what decides it changed
    void saveLayout() const;
    void checkEnlargeAction(const QString& name, bool on);

    std::vector<MetricChart*> m_charts;
    std::vector<QString> m_names; // m_charts' names, in their order
    std::map<QString, MetricChart*> m_byName;
    QGridLayout* m_grid = nullptr;
    ChartGroup* m_group = nullptr;
    bool m_lossScale = false, m_mfu = false, m_phaseMemory = false;
    QSet<QString> m_hidden, m_enlarged;
    // What the grid was last laid out for (the panels that apply, hidden, enlarged).
    std::optional<std::tuple<bool, bool, bool, QSet<QString>, QSet<QString>>> m_laidOut;
    QString m_layoutFile;
};

} // namespace shardscope::ui
