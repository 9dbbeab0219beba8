#include "ui/run_series.h"

#include "storage/metric_keys.h"
#include "ui/format.h"
#include "ui/metric_chart.h"

#include <QCoreApplication>

#include <algorithm>
#include <tuple>

namespace shardscope::ui {

namespace {

namespace k = storage::keys;

// The synthetic keys: series that are no metric of their own.
constexpr const char* kEvalLoss = "eval.loss";
constexpr const char* kSkippedMarker = "skipped.marker"; // at the loss scale the step was skipped with
constexpr const char* kLossSpikeMarker = "loss_spike.marker";
constexpr const char* kStragglerMarker = "straggler.marker"; // on the rank's compute-time curve
constexpr const char* kMemory = "memory"; // the device's peak allocated, else the RSS

// A series' colour: the run's own (as in Runs and Compare), the other one of the run's two
// palette neighbours (eval beside train), the rank's, or a palette colour.
enum : int { kRunColour = -1, kBesideRunColour = -2, kRankColour = -3 };

struct SeriesSpec {
    const char* key;
    bool rankZero; // a global value (equal on every rank): rank 0's copy is the series
    const char* chart;
    const char* label; // %1: the rank
    int colour; // kRunColour, kBesideRunColour, kRankColour or a palette index
    MetricChart::Style style;
};

using Style = MetricChart::Style;
// Loss, lr, grad norm, loss scale and throughput are global; step time, compute time, MFU and
// memory differ per rank: one series each.
const SeriesSpec kSeries[] = {
    {k::kLoss, true, "loss", QT_TRANSLATE_NOOP("RunPage", "train"), kRunColour, Style::Line},
    {kEvalLoss, true, "loss", QT_TRANSLATE_NOOP("RunPage", "eval"), kBesideRunColour, Style::Markers},
    {kLossSpikeMarker, false, "loss", QT_TRANSLATE_NOOP("RunPage", "loss spike"), 3, Style::Markers},
    {k::kLr, true, "lr", QT_TRANSLATE_NOOP("RunPage", "lr"), kRunColour, Style::Line},
    {k::kGradNorm, true, "grad_norm", QT_TRANSLATE_NOOP("RunPage", "grad norm"), kRunColour, Style::Line},
    {k::kLossScale, true, "loss_scale", QT_TRANSLATE_NOOP("RunPage", "loss scale"), kRunColour, Style::Steps},
    {kSkippedMarker, true, "loss_scale", QT_TRANSLATE_NOOP("RunPage", "skipped step"), 3, Style::Markers},
    {k::kTokensPerS, true, "tokens_per_s", QT_TRANSLATE_NOOP("RunPage", "tokens/s"), kRunColour, Style::Line},
    {k::kStepTime, false, "step_time", QT_TRANSLATE_NOOP("RunPage", "rank %1"), kRankColour, Style::Line},
    {k::kComputeTime, false, "compute_time", QT_TRANSLATE_NOOP("RunPage", "rank %1"), kRankColour, Style::Line},
    {kStragglerMarker, false, "compute_time", QT_TRANSLATE_NOOP("RunPage", "straggler (rank %1)"), 3, Style::Markers},
    {k::kMfu, false, "mfu", QT_TRANSLATE_NOOP("RunPage", "rank %1"), kRankColour, Style::Line},
    // Where memory grows within a step: the three ends of its phases, rank 0's.
    {k::kMemAfterForward, true, "memory_phases", QT_TRANSLATE_NOOP("RunPage", "after forward"), 4, Style::Line},
    {k::kMemAfterBackward, true, "memory_phases", QT_TRANSLATE_NOOP("RunPage", "after backward"), 5, Style::Line},
    {k::kMemAfterOptimizer, true, "memory_phases", QT_TRANSLATE_NOOP("RunPage", "after optimizer"), 6, Style::Steps},
    {kMemory, false, "memory", QT_TRANSLATE_NOOP("RunPage", "rank %1"), kRankColour, Style::Line},
};

QString tr(const char* text) { return QCoreApplication::translate("RunPage", text); }

} // namespace

RunSeries::RunSeries(ChartLookup chart) : m_chart(std::move(chart)) { }

void RunSeries::reset(std::int64_t runId, int worldSize)
{
    *this = RunSeries(std::move(m_chart));
    setRun(runId, worldSize);
}

void RunSeries::setRun(std::int64_t runId, int worldSize)
{
    m_runId = runId;
    m_worldSize = std::max(worldSize, 1);
}

void RunSeries::setTimeOrigin(double t0)
{
    if (m_t0 < 0)
        m_t0 = t0;
}

double RunSeries::xOf(double step, double time) const
{
    switch (m_xAxis) {
    case XAxis::Step:
        break;
    case XAxis::Time:
        return time - std::max(m_t0, 0.0);
    case XAxis::Tokens: {
        // The tokens seen by the end of the step (the last known count at or before it).
        auto it = m_tokensSeen.upper_bound(static_cast<std::int64_t>(step));
        return it == m_tokensSeen.begin() ? 0.0 : std::prev(it)->second;
    }
    }
    return step;
}

RunSeries::Series* RunSeries::seriesFor(const std::string& key, int rank)
{
    const auto id = std::make_pair(key, rank);
    if (auto it = m_series.find(id); it != m_series.end())
        return &it->second;
    const auto spec = std::find_if(std::begin(kSeries), std::end(kSeries), [&](const SeriesSpec& s) { return key == s.key; });
    if (spec == std::end(kSeries) || (spec->rankZero && rank != 0))
        return nullptr;
    MetricChart* chart = m_chart(QString::fromLatin1(spec->chart));
    if (!chart)
        return nullptr;
    const QColor run = m_runId > 0 ? runColor(m_runId) : paletteColor(0);
    const QColor colour = spec->colour == kRunColour         ? run
                          : spec->colour == kBesideRunColour ? (run == paletteColor(1) ? paletteColor(2) : paletteColor(1))
                          : spec->colour == kRankColour      ? rankColor(rank)
                                                             : paletteColor(spec->colour);
    QString label = tr(spec->label);
    if (label.contains(QLatin1String("%1")))
        label = label.arg(rank);
    Series series;
    series.chart = chart;
    series.inRunColor = m_runId > 0 && colour == runColor(m_runId);
    series.index = chart->addSeries(label, colour, spec->style);
    return &m_series.emplace(id, std::move(series)).first->second;
}

std::optional<RunSeries::Series*> RunSeries::memorySeries(const storage::MetricRow& row)
{
    if (row.key == k::kMemPeakAllocated) {
        if (row.value <= 0)
            return nullptr;
        if (!m_hasDeviceMemory) {
            // A device allocator reports: its peak is the memory that matters, not RSS.
            m_hasDeviceMemory = true;
            for (auto& [id, series] : m_series)
                if (id.first == kMemory) {
                    series.steps.clear();
                    series.times.clear();
                    series.values.clear();
                    series.chart->clearData();
                }
        }
        return seriesFor(kMemory, row.rank);
    }
    if (row.key == k::kMemRss)
        return m_hasDeviceMemory ? nullptr : seriesFor(kMemory, row.rank);
    if (row.key == k::kMemAfterForward || row.key == k::kMemAfterBackward || row.key == k::kMemAfterOptimizer)
        return row.rank == 0 ? seriesFor(row.key, 0) : nullptr;
    return std::nullopt;
}

RunSeries::Appended RunSeries::append(const std::vector<storage::MetricRow>& rows)
{
    Appended appended;
    // Batch per series: one addData per series per poll, not one per row.
    std::map<Series*, std::tuple<QVector<double>, QVector<double>, QVector<double>>> batches;
    auto queue = [&](Series* series, double step, double time, double value) {
        if (!series)
            return;
        auto& [steps, times, values] = batches[series];
        steps.push_back(step);
        times.push_back(time);
        values.push_back(value);
    };
    // Tokens first: a step's x by tokens is known before its other rows are placed.
    for (const auto& row : rows) {
        if (row.rank != 0 || row.key != k::kTokens)
            continue;
        const auto last = m_tokensSeen.empty() ? 0.0 : m_tokensSeen.rbegin()->second;
        if (m_tokensSeen.empty() || row.step > m_tokensSeen.rbegin()->first)
            m_tokensSeen[row.step] = last + row.value * m_worldSize;
    }
    for (const auto& row : rows) {
        const auto step = static_cast<double>(row.step);
        if (row.rank == 0)
            m_lastStep = std::max(m_lastStep, row.step);
        if (row.rank == 0 && !m_hasPhaseMemory
            && (row.key == k::kMemAfterForward || row.key == k::kMemAfterBackward || row.key == k::kMemAfterOptimizer))
            m_hasPhaseMemory = appended.panelsChanged = true; // engine runs report it; a script run does not
        if (row.rank == 0) {
            const std::pair<const char*, double ModelStates::*> states[] = {{k::kMemParams, &ModelStates::params},
                                                                            {k::kMemGrads, &ModelStates::grads},
                                                                            {k::kMemOptimizer, &ModelStates::optimizer},
                                                                            {k::kMemPeakParams, &ModelStates::peakParams},
                                                                            {k::kMemPeakGrads, &ModelStates::peakGrads}};
            for (const auto& [key, field] : states)
                if (row.key == key)
                    m_modelStates.*field = row.value;
        }
        if (auto memory = memorySeries(row)) {
            queue(*memory, step, row.time, row.value);
            continue;
        }
        if (row.key == k::kLossSpike || row.key == k::kLossSpikeEpoch || row.key == k::kLossSpikeBatch) {
            // Marked on the loss curve, said above the charts with where its data was.
            appended.alertsChanged = true;
            LossSpike& spike = m_lossSpikes[row.step];
            if (row.key == k::kLossSpike) {
                spike.loss = row.value;
                queue(seriesFor(kLossSpikeMarker, 0), step, row.time, row.value);
            } else {
                (row.key == k::kLossSpikeEpoch ? spike.epoch : spike.batch) = static_cast<std::int64_t>(row.value);
            }
            continue;
        }
        if (row.key == k::kStraggler) {
            // Marked on the rank's compute-time curve (at its last value), and said above the charts.
            appended.alertsChanged = true;
            m_stragglers[row.rank] = {row.step, row.value};
            const auto it = m_series.find({k::kComputeTime, row.rank});
            const auto queued = it == m_series.end() ? batches.end() : batches.find(&it->second);
            const double y = queued != batches.end() && !std::get<2>(queued->second).isEmpty()
                                 ? std::get<2>(queued->second).back()
                             : it != m_series.end() && !it->second.values.isEmpty() ? it->second.values.back()
                                                                                    : 0.0;
            queue(seriesFor(kStragglerMarker, row.rank), step, row.time, y);
            continue;
        }
        if (row.key == k::kMfu) {
            if (!m_hasMfu)
                m_hasMfu = appended.panelsChanged = true; // the panel appears with the first value (a script run has none)
            queue(seriesFor(k::kMfu, row.rank), step, row.time, 100.0 * row.value);
            continue;
        }
        if (row.rank == 0 && row.key == k::kLossScale) {
            m_lossScaleAt[row.step] = row.value;
            if (m_lossScaleAt.size() > 4096)
                m_lossScaleAt.erase(m_lossScaleAt.begin());
        }
        if (row.rank == 0 && row.key == k::kSkipped && row.value != 0) {
            m_pendingSkips.push_back(row.step);
            continue;
        }
        queue(seriesFor(row.key, row.rank), step, row.time, row.value);
    }
    // A skipped step is marked on the loss-scale curve at the scale it was skipped with.
    std::vector<std::int64_t> stillPending;
    for (auto skippedStep : m_pendingSkips) {
        const auto it = m_lossScaleAt.find(skippedStep);
        if (it == m_lossScaleAt.end()) {
            if (m_lastStep <= skippedStep + 1)
                stillPending.push_back(skippedStep);
            continue;
        }
        queue(seriesFor(kSkippedMarker, 0), static_cast<double>(skippedStep), m_t0, it->second);
    }
    m_pendingSkips = std::move(stillPending);

    for (auto& [series, batch] : batches) {
        auto& [steps, times, values] = batch;
        QVector<double> xs;
        xs.reserve(steps.size());
        for (qsizetype i = 0; i < steps.size(); ++i)
            xs.push_back(xOf(steps[i], times[i]));
        series->steps += steps;
        series->times += times;
        series->values += values;
        series->chart->appendPoints(series->index, xs, values);
    }
    return appended;
}

void RunSeries::append(const std::vector<storage::EvalRecord>& evals)
{
    for (const auto& eval : evals) {
        if (eval.name != "loss")
            continue;
        if (Series* series = seriesFor(kEvalLoss, eval.rank)) {
            series->steps.push_back(static_cast<double>(eval.step));
            series->times.push_back(eval.time);
            series->values.push_back(eval.value);
            series->chart->appendPoint(series->index, xOf(static_cast<double>(eval.step), eval.time), eval.value);
        }
    }
}

void RunSeries::setXAxis(XAxis mode)
{
    m_xAxis = mode;
    for (auto& [id, series] : m_series) {
        QVector<double> xs;
        xs.reserve(series.steps.size());
        for (qsizetype i = 0; i < series.steps.size(); ++i)
            xs.push_back(xOf(series.steps[i], series.times[i]));
        series.chart->appendPoints(series.index, xs, series.values);
    }
}

void RunSeries::setRunColor(const QColor& color)
{
    for (auto& [id, series] : m_series)
        if (series.inRunColor)
            series.chart->setSeriesColor(series.index, color);
}

QStringList RunSeries::alerts() const
{
    QStringList lines;
    for (const auto& [rank, flag] : m_stragglers)
        lines << tr("Straggler: rank %1 computed %2× as long as the other ranks (forward and backward without waits; "
                    "medians of the steps up to step %3)")
                     .arg(rank)
                     .arg(flag.second, 0, 'f', 2)
                     .arg(flag.first);
    if (!m_lossSpikes.empty()) {
        QStringList steps;
        for (const auto& [step, spike] : m_lossSpikes)
            steps << tr("%1 (loss %2; its data: epoch %3, batch %4 of rank 0)")
                         .arg(step)
                         .arg(formatNumber(spike.loss))
                         .arg(spike.epoch)
                         .arg(spike.batch);
        lines << tr("Loss spike at step %1").arg(steps.join(QStringLiteral(", ")));
    }
    return lines;
}

} // namespace shardscope::ui
