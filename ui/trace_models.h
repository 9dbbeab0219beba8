#pragma once

// The Trace page's data, built from the profiler's value types: the timeline's rows (a lane per
// rank, lane and track, overlapping spans stacked onto extra rows) and two tables as item models,
// per-collective statistics and the per-rank breakdown. Everything here is plain data a worker
// thread can build (buildTraceView) and hand to the GUI thread in one piece.

#include "profiler/analysis.h"
#include "profiler/trace_model.h"

#include <QAbstractTableModel>
#include <QString>

#include <cstdint>
#include <string>
#include <vector>

namespace shardscope::ui {

struct TimelineBar {
    std::int64_t startNs = 0; // ns, run clock (the rank's clockOffsetNs applied)
    std::int64_t endNs = 0; // ns, run clock
    int span = -1; // index into the rank's RankTrace::spans
};

struct TimelineRow {
    int trace = -1; // index into TraceView::traces
    int rank = 0;
    profiler::Lane lane = profiler::Lane::Host;
    std::string track; // empty: the lane's own thread
    int level = 0; // 0, or the extra row an overlapping span went to ("communication #2")
    QString label; // "rank 0 · communication #2"
    std::vector<TimelineBar> bars; // by start, never overlapping within a row
    std::int64_t maxDurationNs = 0; // ns, longest bar: how far back a visible bar can start
};

// Note [Timeline rows]: spans of one (rank, lane, track) that overlap in time (two all-reduce
// buckets in flight) would hide each other on one row, so each goes to the first row of that
// group whose last bar has ended, as the Chrome-trace exporter does with threads. Within a row
// bars are then disjoint and sorted, which lets the painter find the visible ones by binary search
// (start >= viewStart - maxDurationNs) however many spans a trace holds.
struct TraceView {
    std::vector<profiler::RankTrace> traces; // ascending rank
    std::vector<profiler::RankAnalysis> analyses; // one per trace, same order
    std::vector<TimelineRow> rows;
    std::int64_t startNs = 0; // ns, run clock: first span start (0 when there are no spans)
    std::int64_t endNs = 0; // ns, run clock: last span end
    std::size_t spanCount = 0;
    std::vector<std::string> notes; // each trace's notes, prefixed "rank N: "
};

// Sorts the traces by rank, analyses each (analyseRank) and lays the spans out in rows. Pure:
// callable from any thread.
TraceView buildTraceView(std::vector<profiler::RankTrace> traces);

QString laneTitle(profiler::Lane lane); // "compute", "communication", ...

// One row per (rank, collective kind): count, bytes, time and bandwidth as analyseRank gives them.
class CollectiveTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Rank, Kind, Count, Bytes, Time, Bandwidth, ColumnCount };
    // The unformatted value of a cell (qint64 or double, bytes / ns / bytes per second), for sorting.
    static constexpr int RawRole = Qt::UserRole + 1;

    struct Row {
        int rank = 0;
        profiler::CollectiveStats stats;
    };

    using QAbstractTableModel::QAbstractTableModel;
    void setAnalyses(const std::vector<profiler::RankAnalysis>& analyses);
    const std::vector<Row>& rows() const { return m_rows; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    std::vector<Row> m_rows;
};

// One row per rank: the whole trace's breakdown (shares of the analysed span) and overlap.
class RankBreakdownModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Rank, Source, Span, Compute, Comm, Memory, Idle, Overlap, Steps, ColumnCount };
    static constexpr int RawRole = Qt::UserRole + 1; // ns for Span, fraction [0, 1] for shares

    using QAbstractTableModel::QAbstractTableModel;
    void setAnalyses(std::vector<profiler::RankAnalysis> analyses);
    const std::vector<profiler::RankAnalysis>& analyses() const { return m_analyses; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    std::vector<profiler::RankAnalysis> m_analyses;
};

QString formatNs(double ns); // "12.3 µs", "4.56 ms", "1.23 s"

} // namespace shardscope::ui
