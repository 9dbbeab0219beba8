#pragma once

// The Trace page: the open run's profiler traces (or any Chrome trace file). A timeline with a
// lane per rank and stream (ui/trace_timeline.h); the breakdown (compute / communication / memory
// / idle share) per rank and per step and the comm/compute overlap per step as bar charts, with
// exactly the numbers profiler::analyseRank gives; the per-collective table; "Export Chrome
// trace…" writes the merged, clock-aligned file (profiler::writeMergedTrace).
//
// Files (Shardscope's or torch.profiler's, profiler::readTraceFile) are read and analysed on the
// thread pool, with progress and Cancel; a newer load cancels an older one, and the result comes
// back through a queued call that checks the page still exists.

#include "engine/common/result.h"
#include "profiler/trace_model.h"
#include "ui/trace_models.h"

#include <QWidget>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

class QCPBars;
class QComboBox;
class QCustomPlot;
class QLabel;
class QPushButton;
class QTableView;

namespace shardscope::ui {

class TraceTimeline;

// The trace files of a run: the per-rank files the history recorded (`trace` events) that still
// exist, else <runDir>/traces/rank*.json[.gz], else any other *.json[.gz] there (a merged file
// alone, torch.profiler's *.pt.trace.json).
std::vector<std::filesystem::path> findRunTraceFiles(const std::filesystem::path& runDir,
                                                     const std::vector<std::string>& recordedPaths = {});

class TracePage : public QWidget {
    Q_OBJECT
public:
    explicit TracePage(QWidget* parent = nullptr);
    ~TracePage() override;

    // Shows these traces now, on the calling (GUI) thread.
    void setTraces(std::vector<profiler::RankTrace> traces, const QString& title = {});
    // Reads and analyses the files on the thread pool, with progress in the title and a Cancel
    // button; tracesLoaded or loadFailed follows. `expectedRanks` (> 0: the run's rank count)
    // refuses traces of another job size; 0 only asks the files to agree.
    void openFiles(std::vector<std::filesystem::path> files, const QString& title = {}, int expectedRanks = 0);
    void clear();
    // Stops the load in flight; what was shown stays.
    void cancelLoading();
    bool isLoading() const { return m_loading; }

    bool hasTraces() const { return m_view && !m_view->traces.empty(); }
    const TraceView* view() const { return m_view.get(); }
    TraceTimeline* timeline() const { return m_timeline; }
    CollectiveTableModel* collectiveModel() const { return m_collectives; }
    RankBreakdownModel* rankModel() const { return m_ranks; }
    QCustomPlot* rankBreakdownChart() const { return m_rankChart; }
    QCustomPlot* stepBreakdownChart() const { return m_stepChart; }
    QCustomPlot* overlapChart() const { return m_overlapChart; }
    // The rank whose steps the step breakdown shows.
    int stepRank() const;
    void setStepRank(int rank);
    QString title() const;

    // The merged, clock-aligned Chrome trace of the traces shown (ranks' clockOffsetNs applied).
    Result<void> exportMergedTrace(const std::filesystem::path& path) const;

public slots:
    void openTraceFileDialog();
    void exportDialog();

signals:
    void tracesLoaded();
    void loadFailed(const QString& message);

private:
    void applyView(std::shared_ptr<const TraceView> view, const QString& title, const QStringList& errors);
    void updateRankChart();
    void updateStepCharts();

    std::shared_ptr<const TraceView> m_view;
    std::shared_ptr<std::atomic_bool> m_cancel; // the load in flight's
    std::uint64_t m_generation = 0;
    bool m_loading = false;

    QLabel* m_title = nullptr;
    QLabel* m_notes = nullptr;
    QComboBox* m_rankBox = nullptr;
    QPushButton* m_exportButton = nullptr;
    QPushButton* m_cancelButton = nullptr;
    TraceTimeline* m_timeline = nullptr;
    QCustomPlot* m_rankChart = nullptr;
    QCustomPlot* m_stepChart = nullptr;
    QCustomPlot* m_overlapChart = nullptr;
    CollectiveTableModel* m_collectives = nullptr;
    RankBreakdownModel* m_ranks = nullptr;
    QTableView* m_collectiveView = nullptr;
    QTableView* m_rankView = nullptr;
};

} // namespace shardscope::ui
