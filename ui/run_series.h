#pragma once

// The Run page's series: every metric row and eval of the open run, kept per (key, rank) with its
// steps, times and values, and drawn on the chart its key belongs to. One table says which
// (kSeries in run_series.cpp: the key, whether it is rank 0's copy of a global value or one series
// per rank, the chart, the label, the colour and the style). A point's x is its step, its time
// since the run began, or the tokens all ranks had seen by then. What the launcher found
// (stragglers, loss spikes) and the fp16 steps that were skipped are marked on the curves, and the
// findings are kept for the line above the charts (alerts()).

#include "storage/run_types.h"

#include <QColor>
#include <QStringList>
#include <QVector>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace shardscope::ui {

class MetricChart;

class RunSeries {
public:
    enum class XAxis { Step, Time, Tokens }; // tokens: seen by all ranks so far
    using ChartLookup = std::function<MetricChart*(const QString& name)>;

    explicit RunSeries(ChartLookup chart);

    // A run opened: its id (its colour) and world size (tokens of all ranks); nothing kept.
    void reset(std::int64_t runId = 0, int worldSize = 1);
    void setRun(std::int64_t runId, int worldSize);
    // The time axis's origin (the run's start), seconds since the epoch; set once.
    void setTimeOrigin(double t0);

    struct Appended {
        bool panelsChanged = false; // the first MFU or memory-per-phase value: a panel appears
        bool alertsChanged = false; // a straggler or a loss spike
    };
    // The rows one poll brought, batched: one append per series.
    Appended append(const std::vector<storage::MetricRow>& rows);
    void append(const std::vector<storage::EvalRecord>& evals);

    XAxis xAxis() const { return m_xAxis; }
    void setXAxis(XAxis mode); // every series drawn again on the new x
    void setRunColor(const QColor& color); // the series drawn in the run's colour take it

    std::int64_t lastStep() const { return m_lastStep; } // rank 0's, -1 before any
    bool hasMfu() const { return m_hasMfu; }
    bool hasPhaseMemory() const { return m_hasPhaseMemory; }
    bool hasDeviceMemory() const { return m_hasDeviceMemory; } // the memory chart draws the device's peak, not RSS
    // Rank 0's model states as its last step reported them, in bytes (engine runs; a script's
    // ranks report none): what the layout keeps, and the peak in the step with what it holds for
    // a moment (storage/metric_keys.h).
    struct ModelStates {
        double params = 0, grads = 0, optimizer = 0, peakParams = 0, peakGrads = 0;
    };
    const ModelStates& modelStates() const { return m_modelStates; }
    QStringList alerts() const; // one line per finding

private:
    struct Series {
        MetricChart* chart = nullptr;
        int index = -1;
        bool inRunColor = false; // drawn in the run's colour (the user may change it)
        QVector<double> steps, times, values;
    };
    Series* seriesFor(const std::string& key, int rank);
    // The memory chart's series for a memory row (null: the row is not drawn), or none when the
    // row is not about memory.
    std::optional<Series*> memorySeries(const storage::MetricRow& row);
    double xOf(double step, double time) const;

    ChartLookup m_chart;
    std::int64_t m_runId = 0;
    int m_worldSize = 1;
    XAxis m_xAxis = XAxis::Step;
    double m_t0 = -1;
    std::int64_t m_lastStep = -1;
    // Tokens seen by all ranks up to each step (rank 0's tokens times the world size: data
    // parallelism gives every rank batches of one size): the x of XAxis::Tokens.
    std::map<std::int64_t, double> m_tokensSeen;
    bool m_hasDeviceMemory = false;
    bool m_hasMfu = false;
    bool m_hasPhaseMemory = false;
    ModelStates m_modelStates;
    std::map<int, std::pair<std::int64_t, double>> m_stragglers; // rank -> (step, compute time over the others')
    struct LossSpike {
        double loss = 0;
        std::int64_t epoch = 0, batch = 0;
    };
    std::map<std::int64_t, LossSpike> m_lossSpikes; // by step, as the launcher reported them
    std::map<std::int64_t, double> m_lossScaleAt; // rank-0 loss scale by step (for skipped markers)
    std::vector<std::int64_t> m_pendingSkips;
    std::map<std::pair<std::string, int>, Series> m_series;
};

} // namespace shardscope::ui
