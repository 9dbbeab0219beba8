#include "ui/compare_models.h"

#include "storage/config_diff.h"
#include "ui/format.h"

#include <QBrush>
#include <QFont>

#include <map>

namespace shardscope::ui {

void RunStatsModel::setStats(std::vector<storage::RunStats> stats)
{
    beginResetModel();
    m_stats = std::move(stats);
    endResetModel();
}

int RunStatsModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(m_stats.size()); }

int RunStatsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant RunStatsModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const auto& s = m_stats[static_cast<std::size_t>(index.row())];
    if (role == Qt::ForegroundRole && index.column() == Status)
        return QBrush(statusColor(s.status));
    if (role == Qt::TextAlignmentRole && index.column() != Run && index.column() != Status && index.column() != PeakMemory)
        return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
    if (role == Qt::ToolTipRole && index.column() == Run)
        return plainToolTip(qs(s.name));
    if (role == Qt::ToolTipRole && index.column() == Mfu && !s.mfuPeak.empty())
        return tr("MFU against %1").arg(qs(s.mfuPeak));
    if (role != Qt::DisplayRole)
        return {};
    auto opt = [](const std::optional<double>& v) { return v ? QVariant(formatNumber(*v)) : QVariant(); };
    switch (index.column()) {
    case Run:
        return QStringLiteral("%1 (%2)").arg(elidedName(qs(s.name))).arg(s.runId);
    case Status:
        return statusText(s.status);
    case Steps:
        return s.steps ? QVariant::fromValue<qint64>(*s.steps) : QVariant();
    case FinalLoss:
        return opt(s.finalLoss);
    case BestLoss:
        return opt(s.bestLoss);
    case TokensPerS:
        return s.meanTokensPerS ? QVariant(QString::number(*s.meanTokensPerS, 'f', 0)) : QVariant();
    case Mfu:
        if (!s.meanMfu)
            return {};
        // An emulated precision is said where its MFU is read: its peak is float32's (mfu.h).
        return s.precisionEmulated ? tr("%1 % (precision emulated here)").arg(100.0 * *s.meanMfu, 0, 'f', 1)
                                   : QStringLiteral("%1 %").arg(100.0 * *s.meanMfu, 0, 'f', 1);
    case PeakMemory: {
        QStringList parts;
        for (const auto& [rank, bytes] : s.peakMemory)
            parts << QStringLiteral("r%1 %2").arg(rank).arg(formatBytes(bytes));
        return parts.join(QStringLiteral(" · "));
    }
    case Skipped:
        return QVariant::fromValue<qint64>(s.skippedSteps);
    case Wall:
        return s.wallSeconds ? QVariant(formatDuration(*s.wallSeconds)) : QVariant();
    }
    return {};
}

QVariant RunStatsModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    switch (section) {
    case Run:
        return tr("Run");
    case Status:
        return tr("Status");
    case Steps:
        return tr("Steps");
    case FinalLoss:
        return tr("Final loss");
    case BestLoss:
        return tr("Best loss");
    case TokensPerS:
        return tr("Tokens/s");
    case Mfu:
        return tr("MFU");
    case PeakMemory:
        return tr("Peak memory per rank");
    case Skipped:
        return tr("Skipped steps");
    case Wall:
        return tr("Wall time");
    }
    return {};
}

std::vector<ConfigRow> buildConfigRows(const std::vector<std::string>& configTexts, const std::vector<std::string>& recipeTexts,
                                       const std::vector<std::string>& ranTexts)
{
    std::vector<ConfigRow> rows;
    auto addFile = [&](const std::vector<std::string>& texts, const std::string& file) {
        std::vector<std::string> order;
        std::map<std::string, std::vector<std::optional<std::string>>> values;
        for (std::size_t run = 0; run < texts.size(); ++run) {
            for (auto& [key, value] : storage::flattenYaml(texts[run])) {
                auto [it, inserted] = values.try_emplace(key, texts.size());
                if (inserted)
                    order.push_back(key);
                it->second[run] = value;
            }
        }
        std::vector<std::string_view> views(texts.begin(), texts.end());
        std::map<std::string, bool> differs;
        for (const auto& d : storage::diffYaml(views, file))
            differs[d.keyPath] = true;
        for (const auto& key : order)
            rows.push_back({file, key, values[key], !differs.count(key)});
    };
    addFile(configTexts, "config");
    addFile(recipeTexts, "recipe");
    addFile(ranTexts, "run");
    return rows;
}

void ConfigDiffModel::setRows(QStringList runNames, std::vector<ConfigRow> rows, QStringList runToolTips)
{
    beginResetModel();
    m_runNames = std::move(runNames);
    m_runToolTips = std::move(runToolTips);
    m_rows = std::move(rows);
    rebuildVisible();
    endResetModel();
}

void ConfigDiffModel::setShowIdentical(bool show)
{
    if (show == m_showIdentical)
        return;
    beginResetModel();
    m_showIdentical = show;
    rebuildVisible();
    endResetModel();
}

void ConfigDiffModel::rebuildVisible()
{
    m_visible.clear();
    for (std::size_t i = 0; i < m_rows.size(); ++i)
        if (m_showIdentical || !m_rows[i].identical)
            m_visible.push_back(i);
}

QStringList ConfigDiffModel::visibleKeys() const
{
    QStringList keys;
    for (auto i : m_visible)
        keys << qs(m_rows[i].file) + QLatin1Char(':') + qs(m_rows[i].keyPath);
    return keys;
}

int ConfigDiffModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : static_cast<int>(m_visible.size());
}

int ConfigDiffModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : FirstRunColumn + static_cast<int>(m_runNames.size());
}

QVariant ConfigDiffModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const auto& row = m_rows[m_visible[static_cast<std::size_t>(index.row())]];
    if (role == Qt::ForegroundRole) {
        if (row.identical)
            return QBrush(QColor(0x90, 0x90, 0x90));
        return {};
    }
    if (role == Qt::FontRole && index.column() >= FirstRunColumn && !row.identical) {
        QFont font;
        font.setBold(true);
        return font;
    }
    if (role != Qt::DisplayRole && role != Qt::ToolTipRole)
        return {};
    switch (index.column()) {
    case FileColumn:
        return qs(row.file);
    case KeyColumn:
        return qs(row.keyPath);
    default: {
        const auto& value = row.values[static_cast<std::size_t>(index.column() - FirstRunColumn)];
        return value ? qs(*value) : tr("(absent)");
    }
    }
}

QVariant ConfigDiffModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation == Qt::Horizontal && role == Qt::ToolTipRole && section - FirstRunColumn >= 0
        && section - FirstRunColumn < m_runToolTips.size())
        return m_runToolTips[section - FirstRunColumn];
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    if (section == FileColumn)
        return tr("File");
    if (section == KeyColumn)
        return tr("Key");
    if (section - FirstRunColumn < m_runNames.size())
        return m_runNames[section - FirstRunColumn];
    return {};
}

} // namespace shardscope::ui
