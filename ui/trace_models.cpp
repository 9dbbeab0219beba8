#include "ui/trace_models.h"

#include "ui/format.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace shardscope::ui {

namespace prof = shardscope::profiler;

QString laneTitle(prof::Lane lane)
{
    return QString::fromUtf8(prof::laneName(lane).data(), qsizetype(prof::laneName(lane).size()));
}

QString formatNs(double ns)
{
    const double a = std::abs(ns);
    if (a < 1e3)
        return QStringLiteral("%1 ns").arg(ns, 0, 'f', 0);
    if (a < 1e6)
        return QStringLiteral("%1 µs").arg(ns / 1e3, 0, 'f', a < 1e4 ? 2 : 1);
    if (a < 1e9)
        return QStringLiteral("%1 ms").arg(ns / 1e6, 0, 'f', a < 1e7 ? 2 : 1);
    return QStringLiteral("%1 s").arg(ns / 1e9, 0, 'f', 3);
}

TraceView buildTraceView(std::vector<prof::RankTrace> traces)
{
    TraceView view;
    std::stable_sort(traces.begin(), traces.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
    view.traces = std::move(traces);
    bool any = false;
    for (int t = 0; t < int(view.traces.size()); ++t) {
        const auto& trace = view.traces[std::size_t(t)];
        view.analyses.push_back(prof::analyseRank(trace));
        for (const auto& note : trace.notes)
            view.notes.push_back("rank " + std::to_string(trace.rank) + ": " + note);

        // (lane, track) groups in display order, then levels per Note [Timeline rows].
        std::map<std::pair<int, std::string>, std::vector<int>> groups;
        for (int i = 0; i < int(trace.spans.size()); ++i) {
            const auto& span = trace.spans[std::size_t(i)];
            groups[{int(span.lane), span.track}].push_back(i);
        }
        for (auto& [key, indices] : groups) {
            std::stable_sort(indices.begin(), indices.end(), [&](int a, int b) {
                const auto& sa = trace.spans[std::size_t(a)];
                const auto& sb = trace.spans[std::size_t(b)];
                return std::tie(sa.startNs, sb.endNs) < std::tie(sb.startNs, sa.endNs); // longest first
            });
            const std::size_t firstRow = view.rows.size();
            std::vector<std::int64_t> levelEnd; // ns, run clock: last bar end per level
            for (int i : indices) {
                const auto& span = trace.spans[std::size_t(i)];
                TimelineBar bar{span.startNs + trace.clockOffsetNs, span.endNs + trace.clockOffsetNs, i};
                std::size_t level = 0;
                while (level < levelEnd.size() && levelEnd[level] > bar.startNs)
                    ++level;
                if (level == levelEnd.size()) {
                    levelEnd.push_back(bar.endNs);
                    TimelineRow row;
                    row.trace = t;
                    row.rank = trace.rank;
                    row.lane = prof::Lane(key.first);
                    row.track = key.second;
                    row.level = int(level);
                    QString name = key.second.empty() ? laneTitle(row.lane) : QString::fromStdString(key.second);
                    if (level > 0)
                        name += QStringLiteral(" #%1").arg(level + 1);
                    row.label = QStringLiteral("rank %1 · %2").arg(trace.rank).arg(name);
                    view.rows.push_back(std::move(row));
                }
                levelEnd[level] = bar.endNs;
                auto& row = view.rows[firstRow + level];
                row.maxDurationNs = std::max(row.maxDurationNs, bar.endNs - bar.startNs);
                if (!any || bar.startNs < view.startNs)
                    view.startNs = bar.startNs;
                if (!any || bar.endNs > view.endNs)
                    view.endNs = bar.endNs;
                any = true;
                row.bars.push_back(bar);
                ++view.spanCount;
            }
        }
    }
    return view;
}

// --- CollectiveTableModel ---

void CollectiveTableModel::setAnalyses(const std::vector<prof::RankAnalysis>& analyses)
{
    beginResetModel();
    m_rows.clear();
    for (const auto& analysis : analyses)
        for (const auto& stats : analysis.collectives)
            m_rows.push_back(Row{analysis.rank, stats});
    endResetModel();
}

int CollectiveTableModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(m_rows.size()); }

int CollectiveTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant CollectiveTableModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const Row& row = m_rows[std::size_t(index.row())];
    const auto& s = row.stats;
    if (role == RawRole) {
        switch (Column(index.column())) {
        case Rank:
            return row.rank;
        case Kind:
            return qs(s.kind);
        case Count:
            return qint64(s.count);
        case Bytes:
            return qint64(s.bytes);
        case Time:
            return qint64(s.timeNs);
        case Bandwidth:
            return s.bandwidth();
        case ColumnCount:
            break;
        }
        return {};
    }
    if (role == Qt::DisplayRole) {
        switch (Column(index.column())) {
        case Rank:
            return row.rank;
        case Kind:
            return qs(s.kind);
        case Count:
            return qint64(s.count);
        case Bytes:
            return s.bytes > 0 ? formatBytes(double(s.bytes)) : QStringLiteral("—");
        case Time:
            return formatNs(double(s.timeNs));
        case Bandwidth:
            return s.bandwidth() > 0 ? formatBytes(s.bandwidth()) + QStringLiteral("/s") : QStringLiteral("—");
        case ColumnCount:
            break;
        }
        return {};
    }
    if (role == Qt::TextAlignmentRole && index.column() >= Count)
        return QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
    return {};
}

QVariant CollectiveTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    static const char* const kTitles[ColumnCount] = {QT_TR_NOOP("Rank"),  QT_TR_NOOP("Collective"), QT_TR_NOOP("Count"),
                                                     QT_TR_NOOP("Bytes"), QT_TR_NOOP("Time"),       QT_TR_NOOP("Bandwidth")};
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole || section < 0 || section >= ColumnCount)
        return QAbstractTableModel::headerData(section, orientation, role);
    return tr(kTitles[section]);
}

// --- RankBreakdownModel ---

void RankBreakdownModel::setAnalyses(std::vector<prof::RankAnalysis> analyses)
{
    beginResetModel();
    m_analyses = std::move(analyses);
    endResetModel();
}

int RankBreakdownModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(m_analyses.size()); }

int RankBreakdownModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant RankBreakdownModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const auto& a = m_analyses[std::size_t(index.row())];
    const auto& b = a.total;
    const auto raw = [&]() -> QVariant {
        switch (Column(index.column())) {
        case Rank:
            return a.rank;
        case Source:
            return qs(a.source);
        case Span:
            return qint64(b.spanNs);
        case Compute:
            return b.share(b.computeNs);
        case Comm:
            return b.share(b.commNs);
        case Memory:
            return b.share(b.memoryNs);
        case Idle:
            return b.share(b.idleNs);
        case Overlap:
            return b.overlap();
        case Steps:
            return qint64(a.steps.size());
        case ColumnCount:
            break;
        }
        return {};
    };
    if (role == RawRole)
        return raw();
    if (role == Qt::DisplayRole) {
        switch (Column(index.column())) {
        case Span:
            return formatNs(double(b.spanNs));
        case Compute:
        case Comm:
        case Memory:
        case Idle:
        case Overlap:
            return QStringLiteral("%1 %").arg(raw().toDouble() * 100.0, 0, 'f', 1);
        default:
            return raw();
        }
    }
    if (role == Qt::TextAlignmentRole && index.column() >= Span)
        return QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
    return {};
}

QVariant RankBreakdownModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    static const char* const kTitles[ColumnCount] = {QT_TR_NOOP("Rank"),    QT_TR_NOOP("Source"),  QT_TR_NOOP("Span"),
                                                     QT_TR_NOOP("Compute"), QT_TR_NOOP("Comm"),    QT_TR_NOOP("Memory"),
                                                     QT_TR_NOOP("Idle"),    QT_TR_NOOP("Overlap"), QT_TR_NOOP("Steps")};
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole || section < 0 || section >= ColumnCount)
        return QAbstractTableModel::headerData(section, orientation, role);
    return tr(kTitles[section]);
}

} // namespace shardscope::ui
