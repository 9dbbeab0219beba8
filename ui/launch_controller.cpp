#include "ui/launch_controller.h"

#include "engine/accelerate/yaml_io.h"
#include "storage/run_store.h"
#include "storage/store_paths.h"
#include "ui/history_service.h"

#include <QDateTime>
#include <QDir>
#include <QTimer>

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <memory>

namespace shardscope::ui {

namespace {

// A continued run counts once its next attempt has begun: live again, or already through an
// attempt started since `since` (a short one).
bool attemptBegun(const storage::RunStore& store, std::int64_t runId, double since)
{
    auto details = store.run(runId);
    if (!details)
        return false;
    if (!storage::isTerminal(details->summary.status))
        return true;
    return std::any_of(details->attempts.begin(), details->attempts.end(),
                       [since](const storage::RunAttempt& a) { return a.attempt > 0 && a.startedAt && *a.startedAt >= since; });
}

} // namespace

LaunchController::LaunchController(std::filesystem::path databaseFile, HistoryService* history, QObject* parent)
    : QObject(parent), m_databaseFile(std::move(databaseFile)), m_history(history)
{
    m_pollTimer = new QTimer(this);
    m_pollTimer->setInterval(500);
    connect(m_pollTimer, &QTimer::timeout, this, &LaunchController::poll);
}

QString LaunchController::scratchFile(const QString& fileName) const
{
    auto home = storage::shardscopeHome();
    QDir dir(home ? QString::fromStdString(home->string()) : QDir::tempPath());
    dir.mkpath(QStringLiteral("configure"));
    return dir.filePath(QStringLiteral("configure/") + fileName);
}

QString LaunchController::setRunFiles(LaunchRequest& request, const ScreenFiles& screen) const
{
    // The launcher reads files, and Launch writes none the user did not save: what is on screen
    // and unsaved goes to a copy for this run under $SHARDSCOPE_HOME/configure; the opened files
    // (bundled examples among them) stay as they are, and so does their "modified" mark.
    request.configFile = screen.configPath;
    if (screen.configModified || screen.configPath.isEmpty()) {
        request.configFile = scratchFile(request.runName + QStringLiteral("-config.yaml"));
        if (auto r = config::saveAccelerateConfig(*screen.config, request.configFile.toStdString()); !r)
            return QString::fromStdString(r.error().message);
    }
    if (!screen.recipeRun)
        return {};
    request.recipeFile = screen.recipePath;
    if (screen.recipeModified || screen.recipePath.isEmpty()) {
        request.recipeFile = scratchFile(request.runName + QStringLiteral("-recipe.yaml"));
        if (auto r = config::writeTextFile(request.recipeFile.toStdString(), screen.recipeText()); !r)
            return QString::fromStdString(r.error().message);
    }
    return {};
}

QString LaunchController::start(LaunchRequest request)
{
    const bool continuation = !request.continueRun.isEmpty();
    const QString name = continuation ? request.continueRun : request.runName;
    request.outputFile = launcherOutputFile(QString::fromStdString(m_databaseFile.parent_path().string()),
                                            continuation ? QStringLiteral("continue-") + name : name);
    const auto result = launchDetached(request);
    if (!result.started)
        return result.error;
    m_pendingRun = name;
    m_waitForLive = continuation;
    m_launchedAt = QDateTime::currentMSecsSinceEpoch() / 1000.0 - 1;
    m_pendingPid = result.pid;
    m_pendingOutput = request.outputFile;
    m_pollsLeft = 120; // 60 s for the launcher to record the run
    m_pollTimer->start();
    emit message(continuation ? tr("Resuming run %1 from its newest checkpoint (pid %2)").arg(name).arg(result.pid)
                              : tr("Launched %1 (pid %2)").arg(name).arg(result.pid),
                 false);
    emit runLaunched(name);
    return {};
}

void LaunchController::stopWaiting()
{
    m_pendingRun.clear();
    m_pollTimer->stop();
}

void LaunchController::poll()
{
    if (m_pendingRun.isEmpty() || --m_pollsLeft < 0) {
        if (!m_pendingRun.isEmpty())
            emit message(tr("%1 did not appear in the run history; see Runs.").arg(m_pendingRun), true);
        stopWaiting();
        return;
    }
    if (m_polling)
        return;
    m_polling = true;
    // In the history (on the history thread), or refused by a launcher that has exited: then
    // what it said, from its output file.
    struct Seen {
        std::int64_t runId = 0;
        bool launcherGone = false;
        QString said;
    };
    m_history->submit<std::shared_ptr<Seen>>(
        this,
        [file = m_databaseFile, name = m_pendingRun.toStdString(), pid = m_pendingPid, output = m_pendingOutput,
         live = m_waitForLive, launchedAt = m_launchedAt] {
            auto seen = std::make_shared<Seen>();
            storage::StoreOptions options;
            options.markInterrupted = false;
            if (auto store = storage::RunStore::open(file, options)) {
                if (auto id = store->resolveRun(name)) {
                    if (!live || attemptBegun(*store, *id, launchedAt)) {
                        seen->runId = *id;
                        return seen;
                    }
                }
            }
            if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
                seen->launcherGone = true;
                seen->said = launcherErrorText(output);
            }
            return seen;
        },
        [this, name = m_pendingRun](std::shared_ptr<Seen> seen) {
            m_polling = false;
            if (name != m_pendingRun)
                return; // another launch since
            if (seen->runId > 0) {
                stopWaiting();
                emit runOpened(seen->runId);
            } else if (seen->launcherGone) {
                emit message(
                    (m_waitForLive ? tr("Run %1 could not go on: %2") : tr("The launch of %1 stopped before the run started: %2"))
                        .arg(m_pendingRun,
                             seen->said.isEmpty() ? tr("the launcher said nothing (%1)").arg(m_pendingOutput) : seen->said),
                    true);
                stopWaiting();
            }
        });
}

} // namespace shardscope::ui
