#pragma once

// The Runs page: the run history as a sortable, filterable table (status, type, precision, tag,
// text), with open, compare, rename, tag, note, delete and export. The list is read on a worker
// thread (its own store connection) and refreshed every few seconds, so runs started elsewhere
// appear by themselves; edits go through the page's own GUI-thread connection.

#include "storage/run_types.h"

#include <QWidget>

#include <filesystem>
#include <memory>
#include <vector>

class QComboBox;
class QLabel;
class QLineEdit;
class QTableView;
class QTimer;

namespace shardscope::storage {
class RunStore;
}

namespace shardscope::ui {

class RunListModel;
class RunFilterProxyModel;

class RunsPage : public QWidget {
    Q_OBJECT
public:
    explicit RunsPage(std::filesystem::path databaseFile, QWidget* parent = nullptr);
    ~RunsPage() override;

    RunListModel* model() const { return m_model; }
    RunFilterProxyModel* proxy() const { return m_proxy; }
    QTableView* view() const { return m_view; }
    std::vector<std::int64_t> selectedRunIds() const;
    void selectRun(std::int64_t runId);

    // The actions behind the buttons and dialogs (tests call them directly).
    bool renameRun(std::int64_t runId, const QString& name);
    bool setRunTags(std::int64_t runId, const QStringList& tags);
    bool setRunNotes(std::int64_t runId, const QString& notes);
    bool deleteRun(std::int64_t runId);
    bool exportRun(std::int64_t runId, const QString& file); // .csv or .json by suffix
    QString lastError() const { return m_lastError; }

public slots:
    void refresh();

signals:
    void runOpened(std::int64_t runId);
    void compareRequested(const std::vector<std::int64_t>& runIds);
    void runsLoaded();
    void errorOccurred(const QString& message);

private:
    void applyRuns(std::vector<storage::RunSummary> runs, const QString& error);
    void updateFilterChoices();
    void updateCount();
    storage::RunStore* store();
    bool fail(const QString& message);
    std::int64_t currentRunId() const;
    void showContextMenu(const QPoint& pos);
    void editTags();
    void editNotes();
    void rename();
    void removeSelected();
    void exportCurrent();

    std::filesystem::path m_databaseFile;
    std::unique_ptr<storage::RunStore> m_store;
    int m_generation = 0;
    QString m_lastError;

    RunListModel* m_model = nullptr;
    RunFilterProxyModel* m_proxy = nullptr;
    QTableView* m_view = nullptr;
    QComboBox* m_statusBox = nullptr;
    QComboBox* m_typeBox = nullptr;
    QComboBox* m_precisionBox = nullptr;
    QComboBox* m_tagBox = nullptr;
    QLineEdit* m_search = nullptr;
    QLabel* m_count = nullptr;
    QTimer* m_refreshTimer = nullptr;
};

} // namespace shardscope::ui
