#pragma once

// Launch as the Configure page does it: `shardscope launch` started detached (ui/run_launcher.h),
// then the run history looked at, off the GUI thread, until the launcher has recorded the run
// (runOpened) or has exited without it (message, with what it said). Unsaved files go to scratch
// copies under $SHARDSCOPE_HOME/configure (scratchFile): Launch never writes the user's files.

#include "engine/accelerate/accelerate_config.h"
#include "ui/run_launcher.h"

#include <QObject>
#include <QString>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

class QTimer;

namespace shardscope::ui {

class HistoryService;

// The files the Configure page shows, as a run's files are made of them.
struct ScreenFiles {
    const config::AccelerateConfig* config = nullptr; // what the form shows
    QString configPath; // empty: never saved
    bool configModified = false;
    bool recipeRun = true; // false: a script run, which has no recipe
    QString recipePath; // empty: never saved
    bool recipeModified = false;
    std::function<std::string()> recipeText; // the recipe's text for a copy (paths made absolute)
};

class LaunchController : public QObject {
    Q_OBJECT
public:
    // databaseFile: the run history a launched run is looked up in (the launcher's output files
    // go beside it); `history`: the service that looks.
    LaunchController(std::filesystem::path databaseFile, HistoryService* history, QObject* parent);

    // A file for a run's copy of an unsaved config or recipe, under $SHARDSCOPE_HOME/configure.
    QString scratchFile(const QString& fileName) const;
    // The run's config and recipe files (request.configFile, request.recipeFile): a file as saved,
    // or, unsaved or never saved, a copy of what is on screen for request.runName (scratchFile), so
    // that Launch writes none of the user's files. Empty, or why a copy could not be written.
    QString setRunFiles(LaunchRequest& request, const ScreenFiles& screen) const;
    // Starts the launcher (request.outputFile is set here); empty on success, else why not.
    // runOpened comes once the run is in the history; for a continuation (request.continueRun),
    // once the run is live again (its next attempt started).
    QString start(LaunchRequest request);

signals:
    void runLaunched(const QString& runName);
    void runOpened(std::int64_t runId);
    void message(const QString& text, bool error);

private:
    void poll();
    void stopWaiting();

    std::filesystem::path m_databaseFile;
    HistoryService* m_history = nullptr;
    QTimer* m_pollTimer = nullptr;
    QString m_pendingRun;
    qint64 m_pendingPid = 0; // its launcher
    QString m_pendingOutput; // the launcher's output file
    int m_pollsLeft = 0;
    bool m_waitForLive = false; // a continuation: the run exists already, and counts once it runs again
    double m_launchedAt = 0; // seconds since the epoch (a second early)
    bool m_polling = false; // a look for the launched run is on its way
};

} // namespace shardscope::ui
