#pragma once

// The Compare page: pick runs, see a metric of all of them overlaid (downsampled in the store,
// extremes kept), the summary table and the config difference (identical keys hidden unless
// asked for). "Precision sweep…" launches one recipe in every precision mode and compares them.
// Everything is read from the store on the history service's thread.

#include "ui/run_launcher.h"

#include <QWidget>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

class QCheckBox;
class QComboBox;
class QLabel;
class QListWidget;
class QTableView;
class QTimer;

namespace shardscope::storage {
class RunStore;
}

namespace shardscope::ui {

class ConfigDiffModel;
class HistoryConnection;
class HistoryService;
class MetricChart;
class RunStatsModel;

class ComparePage : public QWidget {
    Q_OBJECT
public:
    // `history`: the workbench's history service, where the store is read; none: its own.
    explicit ComparePage(std::filesystem::path databaseFile, QWidget* parent = nullptr, HistoryService* history = nullptr);
    ~ComparePage() override;

    void setRuns(const std::vector<std::int64_t>& runIds);
    const std::vector<std::int64_t>& runIds() const { return m_runIds; }
    void setMetric(const QString& key);
    RunStatsModel* statsModel() const { return m_stats; }
    ConfigDiffModel* diffModel() const { return m_diff; }
    MetricChart* chart() const { return m_chart; }

    // Launches `request` once per mode, named <name>-<mode>, one after another (the next when the
    // last has ended: runs sharing the machine would compare nothing), and compares them as they
    // appear.
    QString startPrecisionSweep(const LaunchRequest& request, const QStringList& modes);
    // The runs of the sweep still to start.
    int queuedSweepRuns() const { return static_cast<int>(m_sweepQueue.size()); }
    QStringList queuedSweepNames() const;

public slots:
    void reloadRunList();
    void reloadComparison();

signals:
    void runOpened(std::int64_t runId);
    void comparisonUpdated();
    // The sweep's runs still waiting their turn, in order (Runs shows them); empty: none.
    void sweepQueueChanged(const QStringList& waiting);

protected:
    void showEvent(QShowEvent* event) override;
    void hideEvent(QHideEvent* event) override;

private:
    struct Comparison;
    void applyComparison(const Comparison& comparison);
    void syncChecks();
    void showSweepDialog();
    void checkSweep();
    void launchNextQueued(QStringList& errors);

    std::filesystem::path m_databaseFile;
    HistoryService* m_history = nullptr;
    std::shared_ptr<HistoryConnection> m_store; // opened and used on the history thread only
    std::uint64_t m_generation = 0; // of the comparison asked last
    std::vector<std::int64_t> m_runIds;
    QStringList m_sweepNames; // runs of a sweep not yet seen in the store
    std::vector<LaunchRequest> m_sweepQueue; // the sweep's runs still to start, in order
    QString m_sweepRunning; // the sweep's run started last; empty once it has ended
    QListWidget* m_picker = nullptr;
    QComboBox* m_metricBox = nullptr;
    MetricChart* m_chart = nullptr;
    RunStatsModel* m_stats = nullptr;
    ConfigDiffModel* m_diff = nullptr;
    QTableView* m_statsView = nullptr;
    QTableView* m_diffView = nullptr;
    QCheckBox* m_showIdentical = nullptr;
    QLabel* m_message = nullptr;
    QTimer* m_liveTimer = nullptr;
    QTimer* m_listTimer = nullptr; // the run list, while shown
};

} // namespace shardscope::ui
