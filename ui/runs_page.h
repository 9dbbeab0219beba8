#pragma once

// The Runs page: the run history as a sortable, filterable table (status, type, precision, tag,
// text), with open, compare, rename, tag, note, delete and export. Everything that touches the
// store or the disk runs on the history service's thread (one connection, opened there): the
// list, refreshed every few seconds with the recovery of runs whose launcher died (so runs started
// elsewhere appear by themselves), and every edit.

#include "engine/common/result.h"
#include "storage/run_types.h"

#include <QWidget>

#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

class QLabel;
class QMenu;
class QTableView;
class QTimer;

namespace shardscope::storage {
class RunStore;
}

namespace shardscope::ui {

class ClusterCatchUp;
class HistoryConnection;
class HistoryService;
class RunListModel;
class RunFilterBar;
class RunFilterProxyModel;

class RunsPage : public QWidget {
    Q_OBJECT
public:
    // `history`: the workbench's history service, where every store job runs; none: its own.
    explicit RunsPage(std::filesystem::path databaseFile, QWidget* parent = nullptr, HistoryService* history = nullptr);
    // A catch-up still asking is killed with the page, its answer dropped (the followers it has
    // started live on: they are in sessions of their own).
    ~RunsPage() override = default;

    RunListModel* model() const { return m_model; }
    RunFilterProxyModel* proxy() const { return m_proxy; }
    QTableView* view() const { return m_view; }
    std::vector<std::int64_t> selectedRunIds() const;
    void selectRun(std::int64_t runId);

    // The actions behind the buttons and dialogs (tests call them directly). Each runs on the
    // history thread; false: refused at once (lastError() says why); otherwise
    // operationFinished tells how it ended, and the list is refreshed.
    bool renameRun(std::int64_t runId, const QString& name);
    // An invalid colour: back to the palette's colour for the run's id.
    bool setRunColor(std::int64_t runId, const QColor& color);
    bool setRunTags(std::int64_t runId, const QStringList& tags);
    bool setRunNotes(std::int64_t runId, const QString& notes);
    bool deleteRun(std::int64_t runId);
    // Why these runs cannot be deleted now, in the workbench's words (one is still running); empty
    // when they can.
    QString deleteRefusal(const std::vector<std::int64_t>& ids) const;
    bool exportRun(std::int64_t runId, const QString& file); // .csv or .json by suffix
    QString lastError() const { return m_lastError; }

    // What Runs lists above the table as queued (not started yet, so not in the history).
    QStringList queuedRuns() const;

    // The cluster runs nobody follows here get a follower each, in the background (`shardscope runs
    // follow --all`): this history's pending or running ones whose follower is gone (a closed
    // workbench), and the user's runs submitted from another machine that shares the profiles'
    // folders. The workbench asks once when it opens; clusterCatchUpFinished says what was done.
    void catchUpWithClusterRuns();

public slots:
    void refresh();
    void setQueuedRuns(const QStringList& names);

signals:
    void runOpened(std::int64_t runId);
    // Resume: the selected run goes on from its newest checkpoint as its next attempt.
    void resumeRequested(std::int64_t runId);
    void compareRequested(const std::vector<std::int64_t>& runIds);
    void runsLoaded();
    void errorOccurred(const QString& message);
    // `operation`: "rename", "tags", "notes", "delete", "export"; `error` empty on success.
    void operationFinished(const QString& operation, const QString& error);
    // What `shardscope runs follow --all` said (empty when it could not start).
    void clusterCatchUpFinished(const QString& said, int started);

private:
    void applyRuns(std::vector<storage::RunSummary> runs, const QString& error);
    void fillColumnsMenu(); // the keys that differ between the runs, checked where shown
    using StoreOperation = std::function<Result<void>(storage::RunStore&)>;
    // Runs `operation` on the history thread; a failure is reported (in a message box too when
    // `tellUser`), a success refreshes the list.
    void onStore(const QString& operation, bool tellUser, StoreOperation job);
    // Set while an action runs from a dialog, so that its failure is shown in a message box.
    struct FromDialog {
        explicit FromDialog(bool& flag) : m_flag(flag) { m_flag = true; }
        ~FromDialog() { m_flag = false; }
        bool& m_flag;
    };
    bool m_fromDialog = false;
    bool fail(const QString& message);
    std::int64_t currentRunId() const;
    void showContextMenu(const QPoint& pos);
    void editTags();
    void editNotes();
    void rename();
    void chooseColor();
    void removeSelected();
    void exportCurrent();

    std::filesystem::path m_databaseFile;
    HistoryService* m_history = nullptr;
    std::shared_ptr<HistoryConnection> m_store; // opened and used on the history thread only
    int m_generation = 0;
    QString m_lastError;

    RunListModel* m_model = nullptr;
    QMenu* m_columnsMenu = nullptr; // the config and recipe keys that may be columns
    RunFilterProxyModel* m_proxy = nullptr;
    QTableView* m_view = nullptr;
    RunFilterBar* m_filters = nullptr; // the search box, the choices and the count
    QLabel* m_queued = nullptr; // a sweep's runs waiting their turn
    QStringList m_queuedNames;
    QTimer* m_refreshTimer = nullptr;
    ClusterCatchUp* m_catchUp = nullptr; // `shardscope runs follow --all`
};

} // namespace shardscope::ui
