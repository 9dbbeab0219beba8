#pragma once

// The Run page: one run, live or finished. Status, elapsed and ETA, Stop; charts sharing one x
// axis (loss train+eval, lr, grad norm, fp16 loss scale with skipped steps marked, tokens/s, step
// time per rank, memory per rank); the per-rank logs with a filter, the failing rank marked.
//
// Data comes from a RunDataSource polled every 500 ms (updates show within a second) on the
// history service's thread, with the selected rank's new log bytes: the window never waits for
// SQLite or the disk. Each poll returns only new rows, which are appended to the charts (never
// re-set), and the charts replot once per event-loop turn however many series changed.

#include "storage/run_types.h"
#include "ui/run_data_source.h"
#include "ui/run_series.h"

#include <QWidget>

#include <filesystem>
#include <map>
#include <memory>
#include <vector>

class QLabel;
class QLineEdit;
class QTabWidget;
class QTextBrowser;
class QTimer;

namespace shardscope::ui {

class ChartGroup;
struct CommandAnswer;
class GenerationDialog;
class HistoryService;
class MetricChart;
class RankLogView;
class RunCharts;
class RunHeader;
class ShardscopeCommand;

class RunPage : public QWidget {
    Q_OBJECT
public:
    using XAxis = RunSeries::XAxis; // tokens: seen by all ranks so far

    // `history`: the workbench's history service; none: the page makes its own.
    explicit RunPage(QWidget* parent = nullptr, HistoryService* history = nullptr);
    ~RunPage() override;

    void openRun(std::unique_ptr<RunDataSource> source);
    void openStoreRun(const std::filesystem::path& databaseFile, std::int64_t runId);
    void openRunDirectory(const std::filesystem::path& runDir);
    void closeRun();

    bool hasRun() const { return m_source != nullptr; }
    bool polling() const { return m_polling; } // a poll is on its way
    // The open run, when it is live (pending or running): its name; empty otherwise.
    QString liveRunName() const;
    std::int64_t runId() const { return m_info.runId; } // 0: none, or a run directory's
    // The open run was live while open (then ended): what it wrote at its end is new to the page.
    bool sawRunLive() const { return m_sawLive; }
    const RunInfo& info() const { return m_info; }
    GenerationDialog* generationDialog() const { return m_generationDialog; } // null until Try model… is first clicked
    XAxis xAxisMode() const { return m_series.xAxis(); }
    void setXAxisMode(XAxis mode);
    // Every chart's smoothing (TensorBoard's weight, 0: off), as the header's slider sets it.
    void setSmoothing(double weight);
    const std::vector<MetricChart*>& charts() const;
    MetricChart* chart(const QString& name) const; // "loss", "lr", "grad_norm", "loss_scale", ...
    QString logText() const;
    // A script run's command line (its run directory's command.sh); empty for an engine run.
    QString scriptCommand() const;
    int logRank() const;
    void setLogRank(int rank);
    void setLogFilter(const QString& text);

    // The chart layout the user chose: charts hidden, charts enlarged (a row of their own, twice
    // as tall). Remembered in `settingsFile` (the workbench's ini beside the history) and read
    // from it here; without one it lasts as long as the page.
    void setLayoutSettingsFile(const QString& settingsFile);
    void setChartHidden(const QString& name, bool hidden);
    void setChartEnlarged(const QString& name, bool enlarged);
    bool chartHidden(const QString& name) const;
    bool chartEnlarged(const QString& name) const;
    void resetChartLayout();

public slots:
    void pollNow();
    void stopRun();
    // Asks the live run's ranks where they wait (`shardscope runs diagnose`, in the background);
    // the answer is shown above the charts.
    void diagnoseRun();
    // The user chose another colour for a run (Runs): the open run's series take it.
    void updateRunColor();

signals:
    void runUpdated();
    void runFinished(shardscope::storage::RunStatus status);
    void pollFailed(const QString& message);
    // Resume: the open run, failed or stopped with a checkpoint, goes on as its next attempt.
    void resumeRequested(std::int64_t runId);

private:
    void updateHeader();
    void layoutCharts(); // the panels that apply to the run
    void updateAlerts();
    void updateMemoryNote(); // what the memory chart draws, and the model states beside it
    void updateUnreportedNotes(); // a script's charts it sends nothing for say so
    void tryModel(); // the generation dialog on this run
    void showSamples(); // m_sampleSteps in the Samples tab, newest step first
    struct Poll; // what one poll brings back
    void applyPoll(Poll& poll);
    void showDiagnosis(const CommandAnswer& answer);

    HistoryService* m_history = nullptr;
    // Shared with the poll in flight, which may outlive a switch to another run.
    std::shared_ptr<RunDataSource> m_source;
    std::uint64_t m_generation = 0; // which open run an answer belongs to
    bool m_polling = false;
    bool m_pollAgain = false; // asked while a poll was on its way
    RunInfo m_info;
    bool m_finishedAnnounced = false;
    bool m_sawLive = false; // a poll found the open run pending or running
    QString m_logsDir; // where the log shown is read from (a resumed run's newest attempt's)
    RunSeries m_series{[this](const QString& name) { return chart(name); }};

    QTimer* m_pollTimer = nullptr;
    RunHeader* m_header = nullptr; // the name, status, progress and the page's controls
    QLabel* m_error = nullptr;
    QLabel* m_alerts = nullptr; // the launcher's findings: stragglers, loss spikes
    QLineEdit* m_command = nullptr; // a script run's command line
    QLabel* m_mesh = nullptr; // an engine run's device mesh (HSDP, tensor parallelism)
    bool m_commandRead = false; // command.sh looked for (once a run directory is known)
    GenerationDialog* m_generationDialog = nullptr;
    QLabel* m_diagnosis = nullptr; // what `shardscope runs diagnose` answered
    ShardscopeCommand* m_diagnose = nullptr; // `shardscope runs diagnose`
    RunCharts* m_charts = nullptr;
    ChartGroup* m_group = nullptr; // the charts' shared x axis
    RankLogView* m_log = nullptr;
    QTabWidget* m_bottomTabs = nullptr; // the log and the samples
    QTextBrowser* m_samples = nullptr;
    std::map<std::int64_t, std::vector<storage::EvalSample>> m_sampleSteps; // by eval step
};

} // namespace shardscope::ui
