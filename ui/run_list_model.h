#pragma once

// The run history as a table: RunListModel holds RunSummary rows as the store returns them;
// RunFilterProxyModel filters (status, type, precision, tag, text) and sorts them on the GUI side,
// so typing in the search box never waits on SQLite.

#include "storage/run_types.h"

#include <QAbstractTableModel>
#include <QSortFilterProxyModel>

#include <map>
#include <optional>
#include <vector>

namespace shardscope::ui {

class RunListModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Id, Name, Status, Type, Precision, Ranks, Steps, Loss, Created, Duration, Tags, Traces, Group, ColumnCount };
    enum Role { RunIdRole = Qt::UserRole + 1, SortRole, StatusRole, TagsRole, SearchTextRole, GroupRole };

    // The group a run belongs to: its sweep ("sweep:<name>" tag), else its first tag; "" none.
    static QString groupOf(const storage::RunSummary& run);

    using QAbstractTableModel::QAbstractTableModel;

    // Replaces the rows; rows whose run id is kept are updated in place (selections survive a
    // refresh of a live history).
    void setRuns(std::vector<storage::RunSummary> runs);
    const std::vector<storage::RunSummary>& runs() const { return m_runs; }
    const storage::RunSummary* runAt(int row) const;
    int rowOfRun(std::int64_t runId) const; // -1 when absent

    // Settings of the runs (RunStore::runSettings: "recipe.optimizer.lr" -> "0.001"), merged into
    // those known; the ones chosen are columns after the fixed ones, as W&B shows a run's config.
    using Settings = std::map<QString, QString>;
    void addSettings(const std::map<std::int64_t, Settings>& settings);
    bool hasSettings(std::int64_t runId) const { return m_settings.count(runId) != 0; }
    void setSettingColumns(const QStringList& keys);
    const QStringList& settingColumns() const { return m_settingColumns; }
    // The keys whose values are not the same in every listed run (the ones worth a column).
    QStringList differingSettings() const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    std::vector<storage::RunSummary> m_runs;
    std::map<std::int64_t, Settings> m_settings;
    QStringList m_settingColumns;
};

class RunFilterProxyModel : public QSortFilterProxyModel {
    Q_OBJECT
public:
    explicit RunFilterProxyModel(QObject* parent = nullptr);

    void setStatusFilter(std::optional<storage::RunStatus> status);
    void setTypeFilter(const QString& distributedType); // empty: any
    void setPrecisionFilter(const QString& precision); // empty: any
    void setTagFilter(const QString& tag); // empty: any
    void setTextFilter(const QString& text); // substring of name, notes-free fields, tags, dir
    // Grouped: the runs of one group (RunListModel::groupOf) side by side, groups in name order and
    // runs without one last; within a group, the column sorted by.
    void setGrouped(bool grouped);
    bool grouped() const { return m_grouped; }

protected:
    bool filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const override;
    bool lessThan(const QModelIndex& left, const QModelIndex& right) const override;

private:
    std::optional<storage::RunStatus> m_status;
    QString m_type, m_precision, m_tag, m_text;
    bool m_grouped = false;
};

} // namespace shardscope::ui
