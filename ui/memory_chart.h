#pragma once

// The Configure page's per-rank memory chart: one bar per category (parameters, gradients,
// optimizer state, activations), device bytes with the host (offloaded) bytes stacked on top, each
// bar's value above it, in one IEC unit for the whole chart; a summary line above it.

#include "engine/estimate/memory_estimate.h"

#include <QWidget>

#include <optional>
#include <vector>

class QCPBars;
class QCPItemText;
class QCustomPlot;
class QLabel;

namespace shardscope::ui {

class MemoryChart : public QWidget {
    Q_OBJECT
public:
    explicit MemoryChart(QWidget* parent = nullptr);

    // The bars of `estimate` (none: empty bars) and the summary (rich text) above them.
    void show(const std::optional<config::MemoryEstimate>& estimate, const QString& summary);
    // The values written above the bars (parameters, gradients, optimizer, activations).
    QStringList barLabels() const;

private:
    QLabel* m_summary = nullptr;
    QCustomPlot* m_chart = nullptr;
    QCPBars* m_deviceBars = nullptr;
    QCPBars* m_hostBars = nullptr;
    std::vector<QCPItemText*> m_barLabels;
};

} // namespace shardscope::ui
