#pragma once

// The Compare page's two tables as item models: the summary of each run (final/best loss,
// tokens/s, peak memory per rank, skipped steps, status) and the config/recipe difference, where
// keys with the same value in every run are hidden unless asked for.

#include "storage/run_types.h"

#include <QAbstractTableModel>

#include <optional>
#include <string>
#include <vector>

namespace shardscope::ui {

class RunStatsModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Run, Status, Steps, FinalLoss, BestLoss, TokensPerS, Mfu, PeakMemory, Skipped, Wall, ColumnCount };
    using QAbstractTableModel::QAbstractTableModel;

    void setStats(std::vector<storage::RunStats> stats);
    const std::vector<storage::RunStats>& stats() const { return m_stats; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    std::vector<storage::RunStats> m_stats;
};

struct ConfigRow {
    std::string file; // "config", "recipe" or "run" (storage::ranAsYaml)
    std::string keyPath; // fsdp_config.fsdp_sharding_strategy
    std::vector<std::optional<std::string>> values; // one per run; nullopt: absent
    bool identical = false;
};

// Every key of the runs' configs, recipes and how they ran (storage::ranAsYaml), in document
// order, flagged identical or not; the differing ones are exactly RunStore::compareRuns's.
std::vector<ConfigRow> buildConfigRows(const std::vector<std::string>& configTexts, const std::vector<std::string>& recipeTexts,
                                       const std::vector<std::string>& ranTexts);

class ConfigDiffModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum { FileColumn, KeyColumn, FirstRunColumn };
    using QAbstractTableModel::QAbstractTableModel;

    // runNames: the column headers (elided); runToolTips: their full names.
    void setRows(QStringList runNames, std::vector<ConfigRow> rows, QStringList runToolTips = {});
    void setShowIdentical(bool show);
    bool showIdentical() const { return m_showIdentical; }
    QStringList visibleKeys() const; // "config:key.path" of the shown rows

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    void rebuildVisible();

    QStringList m_runNames;
    QStringList m_runToolTips;
    std::vector<ConfigRow> m_rows;
    std::vector<std::size_t> m_visible; // indices into m_rows
    bool m_showIdentical = false;
};

} // namespace shardscope::ui
