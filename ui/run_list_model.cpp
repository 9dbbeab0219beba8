#include "ui/run_list_model.h"

#include "ui/format.h"

#include <QBrush>
#include <QDateTime>

#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_map>

namespace shardscope::ui {

namespace {

std::optional<double> durationOf(const storage::RunSummary& run)
{
    if (!run.startedAt)
        return std::nullopt;
    return run.endedAt.value_or(static_cast<double>(QDateTime::currentMSecsSinceEpoch()) / 1000.0) - *run.startedAt;
}

QString tagsText(const storage::RunSummary& run)
{
    QStringList tags;
    for (const auto& tag : run.tags)
        tags << qs(tag);
    return tags.join(QStringLiteral(", "));
}

} // namespace

void RunListModel::setRuns(std::vector<storage::RunSummary> runs)
{
    rememberRunColors(runs);
    // Same ids in the same order (the common case of a periodic refresh): update in place.
    const bool sameIds = runs.size() == m_runs.size()
                         && std::equal(runs.begin(), runs.end(), m_runs.begin(),
                                       [](const auto& a, const auto& b) { return a.id == b.id; });
    if (sameIds) {
        m_runs = std::move(runs);
        if (!m_runs.empty())
            emit dataChanged(index(0, 0), index(rowCount() - 1, columnCount() - 1));
        return;
    }
    beginResetModel();
    m_runs = std::move(runs);
    endResetModel();
}

const storage::RunSummary* RunListModel::runAt(int row) const
{
    if (row < 0 || row >= rowCount())
        return nullptr;
    return &m_runs[static_cast<std::size_t>(row)];
}

int RunListModel::rowOfRun(std::int64_t runId) const
{
    for (std::size_t i = 0; i < m_runs.size(); ++i)
        if (m_runs[i].id == runId)
            return static_cast<int>(i);
    return -1;
}

int RunListModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(m_runs.size()); }

int RunListModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount + static_cast<int>(m_settingColumns.size());
}

void RunListModel::addSettings(const std::map<std::int64_t, Settings>& settings)
{
    for (const auto& [id, values] : settings)
        m_settings[id] = values;
    if (!m_settingColumns.isEmpty() && !m_runs.empty())
        emit dataChanged(index(0, ColumnCount), index(rowCount() - 1, columnCount() - 1));
}

void RunListModel::setSettingColumns(const QStringList& keys)
{
    if (keys == m_settingColumns)
        return;
    beginResetModel();
    m_settingColumns = keys;
    endResetModel();
}

QStringList RunListModel::differingSettings() const
{
    struct Seen {
        std::set<QString> values;
        std::size_t runs = 0; // runs that have the key
    };
    std::map<QString, Seen> seen;
    std::size_t known = 0; // runs whose settings are known
    for (const auto& run : m_runs) {
        const auto it = m_settings.find(run.id);
        if (it == m_settings.end())
            continue;
        ++known;
        for (const auto& [key, value] : it->second) {
            seen[key].values.insert(value);
            ++seen[key].runs;
        }
    }
    QStringList differing; // two values, or a run without the key
    for (const auto& [key, s] : seen)
        if (s.values.size() > 1 || s.runs < known)
            differing << key;
    return differing;
}

QVariant RunListModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const auto& run = m_runs[static_cast<std::size_t>(index.row())];
    if (index.column() >= ColumnCount) { // a setting's column
        if (role != Qt::DisplayRole && role != SortRole && role != Qt::ToolTipRole && role != RunIdRole)
            return {};
        if (role == RunIdRole)
            return QVariant::fromValue<qint64>(run.id);
        const QString& key = m_settingColumns[index.column() - ColumnCount];
        const auto settings = m_settings.find(run.id);
        if (settings == m_settings.end() || !settings->second.count(key))
            return {}; // sorted last (RunFilterProxyModel::lessThan)
        return settings->second.find(key)->second;
    }
    switch (role) {
    case RunIdRole:
        return QVariant::fromValue<qint64>(run.id);
    case StatusRole:
        return static_cast<int>(run.status);
    case TagsRole: {
        QStringList tags;
        for (const auto& tag : run.tags)
            tags << qs(tag);
        return tags;
    }
    case SearchTextRole:
        return QStringList{qs(run.name), tagsText(run), qs(run.runDir), qs(run.host)}.join(QLatin1Char('\n'));
    case Qt::ForegroundRole:
        if (index.column() == Status)
            return QBrush(statusColor(run.status));
        return {};
    case Qt::TextAlignmentRole:
        switch (index.column()) {
        case Id:
        case Ranks:
        case Steps:
        case Loss:
        case Duration:
            return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
        default:
            return {};
        }
    case Qt::DecorationRole:
        if (index.column() == Name)
            return runColor(run.id); // the run's colour on every page
        return {};
    case Qt::ToolTipRole:
        if (index.column() == Name)
            return QStringLiteral("<p>%1<br>%2</p>").arg(qs(run.name).toHtmlEscaped(), qs(run.runDir).toHtmlEscaped());
        return {};
    case Qt::DisplayRole:
    case SortRole: {
        const bool sort = role == SortRole;
        switch (index.column()) {
        case Id:
            return QVariant::fromValue<qint64>(run.id);
        case Name:
            return qs(run.name);
        case Status:
            return sort ? QVariant(static_cast<int>(run.status)) : QVariant(statusText(run.status));
        case Type:
            return qs(run.distributedType);
        case Precision:
            return qs(run.mixedPrecision);
        case Ranks:
            return run.worldSize;
        case Steps:
            return run.lastStep ? QVariant::fromValue<qint64>(*run.lastStep) : (sort ? QVariant(-1) : QVariant());
        case Loss:
            if (!run.lastLoss)
                return sort ? QVariant(std::numeric_limits<double>::infinity()) : QVariant();
            return sort ? QVariant(*run.lastLoss) : QVariant(formatNumber(*run.lastLoss));
        case Created:
            return sort ? QVariant(run.createdAt) : QVariant(formatTime(run.createdAt));
        case Duration: {
            const auto d = durationOf(run);
            if (!d)
                return sort ? QVariant(-1.0) : QVariant();
            return sort ? QVariant(*d) : QVariant(formatDuration(*d));
        }
        case Tags:
            return tagsText(run);
        case Group:
            return groupOf(run);
        case Traces: // profiled runs: open them in Trace
            return sort ? QVariant(run.traceCount)
                        : (run.traceCount > 0 ? QVariant(tr("%n file(s)", nullptr, run.traceCount)) : QVariant());
        }
        return {};
    }
    default:
        return {};
    }
}

QVariant RunListModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    if (section >= ColumnCount && section < columnCount()) {
        QString key = m_settingColumns[section - ColumnCount];
        return key.replace(key.indexOf(QLatin1Char('.')), 1, QStringLiteral(": ")); // "recipe: optimizer.lr"
    }
    switch (section) {
    case Id:
        return tr("ID");
    case Name:
        return tr("Name");
    case Status:
        return tr("Status");
    case Type:
        return tr("Type");
    case Precision:
        return tr("Precision");
    case Ranks:
        return tr("Ranks");
    case Steps:
        return tr("Steps");
    case Loss:
        return tr("Loss");
    case Created:
        return tr("Created");
    case Duration:
        return tr("Duration");
    case Tags:
        return tr("Tags");
    case Traces:
        return tr("Traces");
    case Group:
        return tr("Group");
    }
    return {};
}

QString RunListModel::groupOf(const storage::RunSummary& run)
{
    for (const auto& tag : run.tags)
        if (tag.rfind("sweep:", 0) == 0)
            return QString::fromStdString(tag);
    return run.tags.empty() ? QString() : QString::fromStdString(run.tags.front());
}

RunFilterProxyModel::RunFilterProxyModel(QObject* parent) : QSortFilterProxyModel(parent)
{
    setSortRole(RunListModel::SortRole);
    setSortCaseSensitivity(Qt::CaseInsensitive);
}

void RunFilterProxyModel::setStatusFilter(std::optional<storage::RunStatus> status)
{
    m_status = status;
    invalidateRowsFilter();
}

void RunFilterProxyModel::setTypeFilter(const QString& distributedType)
{
    m_type = distributedType;
    invalidateRowsFilter();
}

void RunFilterProxyModel::setPrecisionFilter(const QString& precision)
{
    m_precision = precision;
    invalidateRowsFilter();
}

void RunFilterProxyModel::setTagFilter(const QString& tag)
{
    m_tag = tag;
    invalidateRowsFilter();
}

void RunFilterProxyModel::setTextFilter(const QString& text)
{
    m_text = text.trimmed();
    invalidateRowsFilter();
}

void RunFilterProxyModel::setGrouped(bool grouped)
{
    if (grouped == m_grouped)
        return;
    m_grouped = grouped;
    invalidate();
}

bool RunFilterProxyModel::lessThan(const QModelIndex& left, const QModelIndex& right) const
{
    // A strict order of text: without case first, then with it (two spellings are never equal).
    const auto textBefore = [](const QString& a, const QString& b) {
        const int folded = a.compare(b, Qt::CaseInsensitive);
        return folded != 0 ? folded < 0 : a.compare(b, Qt::CaseSensitive) < 0;
    };
    const bool ascending = sortOrder() == Qt::AscendingOrder;
    if (m_grouped) {
        const QString a = left.siblingAtColumn(RunListModel::Group).data().toString();
        const QString b = right.siblingAtColumn(RunListModel::Group).data().toString();
        if (a != b) {
            // Groups in name order, no group last, whichever way the column is sorted.
            const bool before = !a.isEmpty() && (b.isEmpty() || textBefore(a, b));
            return ascending ? before : !before;
        }
    }
    if (left.column() >= RunListModel::ColumnCount) { // a setting: numbers as numbers, none last
        const QVariant a = left.data(RunListModel::SortRole), b = right.data(RunListModel::SortRole);
        if (!a.isValid() || !b.isValid())
            return a.isValid() == ascending && a.isValid() != b.isValid();
        bool aNumber = false, bNumber = false;
        const double x = a.toString().toDouble(&aNumber), y = b.toString().toDouble(&bNumber);
        if (aNumber && bNumber)
            return x < y;
        if (aNumber != bNumber)
            return aNumber; // numbers before text
        return textBefore(a.toString(), b.toString());
    }
    return QSortFilterProxyModel::lessThan(left, right);
}

bool RunFilterProxyModel::filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const
{
    const auto* model = qobject_cast<const RunListModel*>(sourceModel());
    if (!model || sourceParent.isValid())
        return false;
    const auto* run = model->runAt(sourceRow);
    if (!run)
        return false;
    if (m_status && run->status != *m_status)
        return false;
    if (!m_type.isEmpty() && qs(run->distributedType).compare(m_type, Qt::CaseInsensitive) != 0)
        return false;
    if (!m_precision.isEmpty() && qs(run->mixedPrecision).compare(m_precision, Qt::CaseInsensitive) != 0)
        return false;
    if (!m_tag.isEmpty() && std::none_of(run->tags.begin(), run->tags.end(), [&](const std::string& t) {
            return qs(t).compare(m_tag, Qt::CaseInsensitive) == 0;
        }))
        return false;
    if (!m_text.isEmpty()) {
        const auto text = model->index(sourceRow, 0).data(RunListModel::SearchTextRole).toString();
        if (!text.contains(m_text, Qt::CaseInsensitive))
            return false;
    }
    return true;
}

} // namespace shardscope::ui
