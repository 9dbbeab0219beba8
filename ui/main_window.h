#pragma once

// The workbench's main window: a mode bar on the left (Configure, Runs, Run, Compare, Trace), as
// in Qt Creator, and the page of the chosen mode on the right. A run opened anywhere (Runs,
// Compare, a run directory) shows in Run; window geometry and the last mode are remembered.

#include <QMainWindow>

#include <filesystem>

class QLabel;
class QListWidget;
class QStackedWidget;

namespace shardscope::ui {

class ComparePage;
class ConfigurePage;
class HistoryService;
class LaunchController;
class RunPage;
class RunsPage;
class TracePage;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    enum class Mode { Configure, Runs, Run, Compare, Trace };

    // databaseFile: the run history; empty: $SHARDSCOPE_HOME's (storage/store_paths.h).
    explicit MainWindow(QWidget* parent = nullptr, std::filesystem::path databaseFile = {});

    Mode currentMode() const;
    void showMode(Mode mode);
    static QString modeName(Mode mode);
    // The line above each page saying what it is for.
    static QString pageHelp(Mode mode);
    static constexpr int kModeCount = 5;

    RunsPage* runsPage() const { return m_runsPage; }
    RunPage* runPage() const { return m_runPage; }
    ComparePage* comparePage() const { return m_comparePage; }
    ConfigurePage* configurePage() const { return m_configurePage; }
    TracePage* tracePage() const { return m_tracePage; }
    const std::filesystem::path& databaseFile() const { return m_databaseFile; }
    // The workbench's settings (window geometry, last files), beside the history.
    QString settingsFile() const;
    // `wanted` shrunk to `available` and moved inside it (a geometry saved on another screen).
    static QRect fittedGeometry(const QRect& wanted, const QRect& available);

public slots:
    void openRun(std::int64_t runId);
    void openRunDirectory();
    // Loads the run's profiler traces into Trace (or empties it when the run has none).
    void showRunTraces(std::int64_t runId);

signals:
    void modeChanged(shardscope::ui::MainWindow::Mode mode);

protected:
    void closeEvent(QCloseEvent* event) override;

private:
    void restoreWindowGeometry();
    void connectRunPageEnds(); // Resume, and the Trace page after a run seen live ends
    void catchUpWithClusterRuns(); // followers for the cluster runs nobody follows (RunsPage's)
    void addWindowActions(); // Open run directory, Open trace, Refresh
    void showShortcuts();

    std::filesystem::path m_databaseFile;
    QListWidget* m_modeBar = nullptr;
    QStackedWidget* m_pages = nullptr;
    QLabel* m_pageHelp = nullptr;
    HistoryService* m_history = nullptr; // the workbench's way to the history, off the GUI thread
    LaunchController* m_resumes = nullptr; // Resume's launches (--continue_run)
    QLabel* m_shortcutsHelp = nullptr; // under the mode bar
    RunsPage* m_runsPage = nullptr;
    RunPage* m_runPage = nullptr;
    ComparePage* m_comparePage = nullptr;
    ConfigurePage* m_configurePage = nullptr;
    TracePage* m_tracePage = nullptr;
};

} // namespace shardscope::ui
