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

#include <QSet>
#include <QWidget>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

class QComboBox;
class QGridLayout;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProcess;
class QPushButton;
class QSlider;
class QTimer;
class QVBoxLayout;

namespace shardscope::ui {

class ChartGroup;
class HistoryService;
class MetricChart;

class RunPage : public QWidget {
    Q_OBJECT
public:
    enum class XAxis { Step, Time, Tokens }; // tokens: seen by all ranks so far

    // `history`: the workbench's history service; none: the page makes its own.
    explicit RunPage(QWidget* parent = nullptr, HistoryService* history = nullptr);
    ~RunPage() override;

    void openRun(std::unique_ptr<RunDataSource> source);
    void openStoreRun(const std::filesystem::path& databaseFile, std::int64_t runId);
    void openRunDirectory(const std::filesystem::path& runDir);
    void closeRun();

    bool hasRun() const { return m_source != nullptr; }
    bool polling() const { return m_polling; } // a poll is on its way
    const RunInfo& info() const { return m_info; }
    XAxis xAxisMode() const { return m_xAxis; }
    void setXAxisMode(XAxis mode);
    // Every chart's smoothing (TensorBoard's weight, 0: off), as the header's slider sets it.
    void setSmoothing(double weight);
    const std::vector<MetricChart*>& charts() const { return m_charts; }
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
    bool chartHidden(const QString& name) const { return m_hiddenCharts.contains(name); }
    bool chartEnlarged(const QString& name) const { return m_enlargedCharts.contains(name); }
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

private:
    struct Raw {
        MetricChart* chart = nullptr;
        int series = -1;
        bool inRunColor = false; // drawn in the run's colour (the user may change it)
        QVector<double> steps, times, values;
    };
    Raw* seriesFor(const std::string& key, int rank);
    void appendRows(const std::vector<storage::MetricRow>& rows);
    // The memory chart's series for a memory row (null: the row is not drawn), or none when the
    // row is not about memory.
    std::optional<Raw*> memorySeries(const storage::MetricRow& row);
    void appendEvals(const std::vector<storage::EvalRecord>& evals);
    void appendTo(Raw& raw, double step, double time, double value);
    void updateHeader();
    void updateRankList();
    void layoutCharts(); // the grid from the layout chosen and the charts that apply to the run
    void saveChartLayout() const;
    void updateChartsMenu();
    void updateAlerts();
    struct Poll; // what one poll brings back
    void applyPoll(Poll& poll);
    void reloadLog();
    void appendLog(const QByteArray& bytes);
    void applyLogFilter();
    double xOf(double step, double time) const;

    HistoryService* m_history = nullptr;
    // Shared with the poll in flight, which may outlive a switch to another run.
    std::shared_ptr<RunDataSource> m_source;
    std::uint64_t m_generation = 0; // which open run an answer belongs to
    std::uint64_t m_logGeneration = 0; // which log (rank, reload) an answer's bytes belong to
    bool m_polling = false;
    bool m_pollAgain = false; // asked while a poll was on its way
    RunInfo m_info;
    bool m_finishedAnnounced = false;
    XAxis m_xAxis = XAxis::Step;
    // Tokens seen by all ranks up to each step (rank 0's tokens times the world size: data
    // parallelism gives every rank batches of one size): the x of XAxis::Tokens.
    std::map<std::int64_t, double> m_tokensSeen;
    double m_t0 = -1; // time origin of the time axis (run start), seconds since the epoch
    std::int64_t m_lastStep = -1;
    bool m_hasDeviceMemory = false;
    bool m_hasMfu = false; // the run reported MFU (its panel is shown)
    bool m_hasPhaseMemory = false; // the run reported memory per phase (its panel is shown)
    std::map<int, std::pair<std::int64_t, double>> m_stragglers; // rank -> (step, compute time over the others')
    struct LossSpike {
        double loss = 0;
        std::int64_t epoch = 0, batch = 0;
    };
    std::map<std::int64_t, LossSpike> m_lossSpikes; // by step, as the launcher reported them
    std::map<std::pair<std::string, int>, Raw> m_raw;
    std::map<std::int64_t, double> m_lossScaleAt; // rank-0 loss scale by step (for skipped markers)
    std::vector<std::int64_t> m_pendingSkips;

    QTimer* m_pollTimer = nullptr;
    QLabel* m_title = nullptr;
    QLabel* m_status = nullptr;
    QLabel* m_progress = nullptr;
    QLabel* m_error = nullptr;
    QLabel* m_alerts = nullptr; // the launcher's findings: stragglers
    QLineEdit* m_command = nullptr; // a script run's command line
    bool m_commandRead = false; // command.sh looked for (once a run directory is known)
    QComboBox* m_xAxisBox = nullptr;
    void buildHeader(QVBoxLayout* layout);
    QWidget* buildCharts(QWidget* parent); // the charts' scroll area
    QPushButton* m_followButton = nullptr; // checked while the charts follow the data
    QSlider* m_smoothingSlider = nullptr;
    QLabel* m_smoothingLabel = nullptr;
    QPushButton* m_stopButton = nullptr;
    QPushButton* m_diagnoseButton = nullptr;
    QLabel* m_diagnosis = nullptr; // what `shardscope runs diagnose` answered
    QProcess* m_diagnoseProcess = nullptr; // running it; null when none runs
    std::vector<MetricChart*> m_charts;
    std::vector<QString> m_chartNames; // "loss", ...: m_charts' names, in their order
    std::map<QString, MetricChart*> m_chartByName;
    QGridLayout* m_chartGrid = nullptr;
    QPushButton* m_chartsButton = nullptr; // its menu shows and hides charts
    QSet<QString> m_hiddenCharts, m_enlargedCharts;
    // What the grid was last laid out for (fp16, MFU reported, hidden, enlarged).
    std::optional<std::tuple<bool, bool, bool, QSet<QString>, QSet<QString>>> m_laidOut;
    QString m_layoutFile;
    ChartGroup* m_group = nullptr;

    QComboBox* m_rankBox = nullptr;
    QLineEdit* m_logFilter = nullptr;
    QPlainTextEdit* m_logView = nullptr;
    QStringList m_logLines; // the selected rank's log, whole lines
    std::uint64_t m_logOffset = 0; // bytes of that log read
    QString m_logPartial; // an unfinished last line
    int m_rankCount = 0;
};

} // namespace shardscope::ui
