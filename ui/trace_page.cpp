#include "ui/trace_page.h"

#include "engine/common/run_layout.h"
#include "profiler/chrome_trace.h"
#include "profiler/kineto_trace.h"
#include "ui/format.h"
#include "ui/trace_timeline.h"

#include <QComboBox>
#include <QFileInfo>
#include <QCoreApplication>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMessageBox>
#include <QPointer>
#include <QPushButton>
#include <QScrollArea>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QThreadPool>
#include <QVBoxLayout>

#include <qcustomplot.h>

#include <algorithm>
#include <functional>
#include <set>

namespace shardscope::ui {

namespace prof = shardscope::profiler;
namespace fs = std::filesystem;

namespace {

struct Part {
    const char* name;
    WorkKind kind;
    std::int64_t prof::Breakdown::*field;
};

// The breakdown's four parts, in stacking order (Note [Breakdown] in profiler/analysis.h: they
// add up to the span exactly, so the stacked bars reach 100 %).
const Part kParts[] = {
    {"compute", WorkKind::Compute, &prof::Breakdown::computeNs},
    {"communication", WorkKind::Communication, &prof::Breakdown::commNs},
    {"memory", WorkKind::Memory, &prof::Breakdown::memoryNs},
    {"idle", WorkKind::Idle, &prof::Breakdown::idleNs},
};

QCustomPlot* makeChart(const QString& objectName, const QString& title, const QString& xLabel, QWidget* parent)
{
    auto* plot = new QCustomPlot(parent);
    plot->setObjectName(objectName);
    plot->setMinimumSize(240, 200);
    plot->plotLayout()->insertRow(0);
    auto* heading = new QCPTextElement(plot, title, QFont(plot->font().family(), 10, QFont::Bold));
    plot->plotLayout()->addElement(0, 0, heading);
    plot->xAxis->setLabel(xLabel);
    plot->yAxis->setLabel(QObject::tr("% of time"));
    plot->yAxis->setRange(0, 100);
    auto ticker = QSharedPointer<QCPAxisTickerFixed>::create();
    ticker->setTickStep(1.0);
    ticker->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
    plot->xAxis->setTicker(ticker);
    plot->xAxis->grid()->setVisible(false);
    plot->legend->setVisible(false);
    QFont legendFont = plot->font();
    legendFont.setPointSize(8);
    plot->legend->setFont(legendFont);
    plot->legend->setBrush(QColor(255, 255, 255, 210));
    plot->legend->setRowSpacing(-2);
    return plot;
}

// The legend in a row of its own under the axes, so that it never hides a bar.
void legendBelow(QCustomPlot* plot)
{
    auto* row = new QCPLayoutGrid;
    plot->plotLayout()->addElement(plot->plotLayout()->rowCount(), 0, row);
    row->setMargins(QMargins(0, 0, 0, 4));
    row->addElement(0, 0, plot->legend); // takes it out of the axis rect's inset layout
    plot->legend->setFillOrder(QCPLegend::foColumnsFirst);
    plot->legend->setWrap(2); // two entries a line: the charts are narrow
    plot->legend->setIconSize(14, 10);
    plot->legend->setBorderPen(Qt::NoPen);
    plot->legend->setVisible(true);
    plot->plotLayout()->setRowStretchFactor(plot->plotLayout()->rowCount() - 1, 0.001);
}

struct Loaded {
    std::shared_ptr<const TraceView> view;
    QStringList errors;
};

// Worker side of openFiles: reads each file (Shardscope's or torch.profiler's, plain or gzip),
// keeps the first trace of each rank (a merged file next to the per-rank ones would repeat them),
// refuses traces of another job size than the others (or than `expectedRanks`, the run's), and
// builds the view. `progress` gets the share done in [0, 1] and says whether to go on.
Loaded loadFiles(const std::vector<fs::path>& files, const std::atomic_bool& cancel, int expectedRanks,
                 const std::function<void(double)>& progress)
{
    Loaded loaded;
    std::vector<prof::RankTrace> traces;
    std::set<int> ranks;
    int jobSize = expectedRanks;
    for (std::size_t i = 0; i < files.size(); ++i) {
        if (cancel.load())
            return {};
        const double before = double(i) / double(files.size());
        auto read = prof::readTraceFile(files[i], [&](std::uint64_t done, std::uint64_t total) {
            if (progress && total > 0)
                progress(before + double(done) / double(total) / double(files.size()));
            return !cancel.load();
        });
        if (!read) {
            if (cancel.load())
                return {};
            loaded.errors << qs(read.error().message);
            continue;
        }
        for (auto& trace : *read) {
            if (jobSize == 0 && trace.worldSize > 0)
                jobSize = trace.worldSize; // the first trace that knows says for the others
            if (auto fits = prof::checkRankCount({trace}, jobSize, expectedRanks > 0 ? "the run" : "the job of the other traces");
                !fits) {
                loaded.errors << qs(files[i].filename().string() + ": " + fits.error().message);
                continue;
            }
            if (ranks.insert(trace.rank).second)
                traces.push_back(std::move(trace));
        }
    }
    if (cancel.load())
        return {};
    loaded.view = std::make_shared<const TraceView>(buildTraceView(std::move(traces)));
    return loaded;
}

} // namespace

std::vector<fs::path> findRunTraceFiles(const fs::path& runDir, const std::vector<std::string>& recordedPaths)
{
    std::vector<fs::path> files;
    std::error_code ec;
    for (const auto& recorded : recordedPaths)
        if (!recorded.empty() && fs::is_regular_file(recorded, ec))
            files.emplace_back(recorded);
    if (!files.empty()) {
        std::sort(files.begin(), files.end());
        return files;
    }
    const fs::path dir = RunLayout(runDir).tracesDir();
    std::vector<fs::path> perRank, others;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const fs::path& p = it->path();
        if (!prof::isTraceFileName(p.filename().string()) || !it->is_regular_file(ec))
            continue;
        (p.filename().string().rfind("rank", 0) == 0 ? perRank : others).push_back(p);
    }
    auto& chosen = perRank.empty() ? others : perRank;
    // rank2 before rank10.
    std::sort(chosen.begin(), chosen.end(), [](const fs::path& a, const fs::path& b) {
        const auto sa = a.filename().string(), sb = b.filename().string();
        return sa.size() != sb.size() ? sa.size() < sb.size() : sa < sb;
    });
    return chosen;
}

TracePage::TracePage(QWidget* parent) : QWidget(parent)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(8, 8, 8, 8);

    auto* top = new QHBoxLayout;
    m_title = new QLabel(tr("<b>Trace</b> — no trace loaded"), this);
    m_title->setObjectName(QStringLiteral("traceTitle"));
    top->addWidget(m_title, 1);
    m_cancelButton = new QPushButton(tr("Cancel loading"), this);
    m_cancelButton->setObjectName(QStringLiteral("cancelTraceLoad"));
    m_cancelButton->setVisible(false);
    connect(m_cancelButton, &QPushButton::clicked, this, &TracePage::cancelLoading);
    top->addWidget(m_cancelButton);
    auto* openButton = new QPushButton(tr("Open trace…"), this);
    openButton->setToolTip(tr("Open trace files: Shardscope's or torch.profiler's Chrome traces, .json or .json.gz (Ctrl+T)"));
    connect(openButton, &QPushButton::clicked, this, &TracePage::openTraceFileDialog);
    top->addWidget(openButton);
    auto* resetButton = new QPushButton(tr("Show all"), this);
    resetButton->setToolTip(tr("Zoom out to the whole trace (or double-click the timeline)"));
    top->addWidget(resetButton);
    m_exportButton = new QPushButton(tr("Export Chrome trace…"), this);
    m_exportButton->setObjectName(QStringLiteral("exportButton"));
    m_exportButton->setEnabled(false);
    connect(m_exportButton, &QPushButton::clicked, this, &TracePage::exportDialog);
    top->addWidget(m_exportButton);
    layout->addLayout(top);

    m_notes = new QLabel(this);
    m_notes->setWordWrap(true);
    m_notes->setStyleSheet(QStringLiteral("color: #8a6d00;"));
    m_notes->hide();
    layout->addWidget(m_notes);

    auto* splitter = new QSplitter(Qt::Vertical, this);
    m_timeline = new TraceTimeline;
    m_timeline->setObjectName(QStringLiteral("traceTimeline"));
    m_timeline->setToolTip({}); // tooltips come from TraceTimeline::event
    connect(resetButton, &QPushButton::clicked, m_timeline, &TraceTimeline::resetZoom);
    auto* scroll = new QScrollArea(splitter);
    scroll->setWidget(m_timeline);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::StyledPanel);
    splitter->addWidget(scroll);

    auto* bottom = new QWidget(splitter);
    auto* bottomLayout = new QHBoxLayout(bottom);
    bottomLayout->setContentsMargins(0, 0, 0, 0);
    m_rankChart = makeChart(QStringLiteral("rankBreakdownChart"), tr("Breakdown per rank"), tr("rank"), bottom);
    bottomLayout->addWidget(m_rankChart, 2);

    auto* stepBox = new QWidget(bottom);
    auto* stepLayout = new QVBoxLayout(stepBox);
    stepLayout->setContentsMargins(0, 0, 0, 0);
    stepLayout->setSpacing(2);
    m_rankBox = new QComboBox(stepBox);
    m_rankBox->setObjectName(QStringLiteral("stepRankBox"));
    m_rankBox->setToolTip(tr("The rank whose steps the step breakdown shows"));
    connect(m_rankBox, &QComboBox::currentIndexChanged, this, [this] { updateStepCharts(); });
    stepLayout->addWidget(m_rankBox);
    m_stepChart = makeChart(QStringLiteral("stepBreakdownChart"), tr("Breakdown per step"), tr("step"), stepBox);
    legendBelow(m_stepChart); // the rank chart's colours too
    stepLayout->addWidget(m_stepChart, 1);
    bottomLayout->addWidget(stepBox, 3);

    m_overlapChart = makeChart(QStringLiteral("overlapChart"), tr("Comm/compute overlap per step"), tr("step"), bottom);
    m_overlapChart->yAxis->setLabel(tr("% of communication hidden"));
    legendBelow(m_overlapChart);
    bottomLayout->addWidget(m_overlapChart, 3);

    auto* tabs = new QTabWidget(bottom);
    m_collectives = new CollectiveTableModel(this);
    m_ranks = new RankBreakdownModel(this);
    const auto makeTable = [tabs](QAbstractItemModel* model, const QString& name) {
        auto* proxy = new QSortFilterProxyModel(tabs);
        proxy->setSourceModel(model);
        proxy->setSortRole(CollectiveTableModel::RawRole);
        auto* view = new QTableView(tabs);
        view->setObjectName(name);
        view->setModel(proxy);
        view->setSortingEnabled(true);
        view->sortByColumn(0, Qt::AscendingOrder);
        view->verticalHeader()->hide();
        view->setSelectionBehavior(QAbstractItemView::SelectRows);
        view->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
        view->horizontalHeader()->setStretchLastSection(true);
        return view;
    };
    m_collectiveView = makeTable(m_collectives, QStringLiteral("collectiveTable"));
    m_rankView = makeTable(m_ranks, QStringLiteral("rankTable"));
    tabs->addTab(m_collectiveView, tr("Collectives"));
    tabs->addTab(m_rankView, tr("Ranks"));
    bottomLayout->addWidget(tabs, 5);

    splitter->addWidget(bottom);
    splitter->setStretchFactor(0, 3);
    splitter->setStretchFactor(1, 2);
    layout->addWidget(splitter, 1);

    applyView(std::make_shared<const TraceView>(), {}, {});
}

TracePage::~TracePage()
{
    if (m_cancel)
        m_cancel->store(true);
}

void TracePage::setTraces(std::vector<prof::RankTrace> traces, const QString& title)
{
    if (m_cancel)
        m_cancel->store(true);
    ++m_generation;
    m_loading = false;
    m_cancelButton->setVisible(false);
    applyView(std::make_shared<const TraceView>(buildTraceView(std::move(traces))), title, {});
    emit tracesLoaded();
}

void TracePage::openFiles(std::vector<fs::path> files, const QString& title, int expectedRanks)
{
    if (m_cancel)
        m_cancel->store(true);
    auto cancel = std::make_shared<std::atomic_bool>(false);
    m_cancel = cancel;
    const std::uint64_t generation = ++m_generation;
    m_loading = true;
    m_title->setText(tr("<b>Trace</b> — loading %1…").arg(elidedName(title).toHtmlEscaped()));
    m_title->setToolTip(title);
    m_cancelButton->setVisible(true);
    QPointer<TracePage> guard(this);
    QThreadPool::globalInstance()->start([guard, generation, files = std::move(files), title, cancel, expectedRanks] {
        // Progress goes to the title in whole percents (a few hundred queued calls at most).
        int shownPercent = -1;
        auto progress = [&](double share) {
            const int percent = static_cast<int>(share * 100.0);
            if (percent == shownPercent)
                return;
            shownPercent = percent;
            QMetaObject::invokeMethod(
                QCoreApplication::instance(),
                [guard, generation, title, percent] {
                    if (guard && guard->m_generation == generation && guard->m_loading)
                        guard->m_title->setText(
                            tr("<b>Trace</b> — loading %1… %2 %").arg(elidedName(title).toHtmlEscaped()).arg(percent));
                },
                Qt::QueuedConnection);
        };
        auto loaded = std::make_shared<Loaded>(loadFiles(files, *cancel, expectedRanks, progress));
        if (cancel->load())
            return;
        // The page is only looked at on the GUI thread (the application object's), where a
        // QPointer check cannot race with its destruction.
        QMetaObject::invokeMethod(
            QCoreApplication::instance(),
            [guard, generation, loaded, title] {
                if (!guard || guard->m_generation != generation)
                    return;
                guard->m_loading = false;
                guard->m_cancelButton->setVisible(false);
                if (!loaded->view || loaded->view->traces.empty()) {
                    const QString message = loaded->errors.isEmpty() ? tr("No traces in %1").arg(title)
                                                                     : loaded->errors.join(QLatin1Char('\n'));
                    guard->applyView(std::make_shared<const TraceView>(), title, loaded->errors);
                    emit guard->loadFailed(message);
                    return;
                }
                guard->applyView(loaded->view, title, loaded->errors);
                emit guard->tracesLoaded();
            },
            Qt::QueuedConnection);
    });
}

void TracePage::clear() { setTraces({}, {}); }

void TracePage::cancelLoading()
{
    if (!m_loading)
        return;
    if (m_cancel)
        m_cancel->store(true);
    ++m_generation;
    m_loading = false;
    m_cancelButton->setVisible(false);
    applyView(m_view ? m_view : std::make_shared<const TraceView>(), {}, {tr("Loading was cancelled.")});
    emit loadFailed(tr("Loading was cancelled."));
}

QString TracePage::title() const { return m_title->text(); }

void TracePage::applyView(std::shared_ptr<const TraceView> view, const QString& title, const QStringList& errors)
{
    m_view = std::move(view);
    const auto& v = *m_view;
    if (v.traces.empty()) {
        m_title->setText(
            tr("<b>Trace</b> — no trace loaded. Launch with <tt>--profile</tt> and open the run, or open a trace file."));
    } else {
        QStringList sources;
        for (const auto& t : v.traces)
            if (!sources.contains(qs(t.source)))
                sources << qs(t.source);
        m_title->setText(tr("<b>Trace</b> — %1 · %2 ranks · %3 spans · %4 · source: %5")
                             .arg(title.isEmpty() ? tr("traces") : elidedName(title).toHtmlEscaped())
                             .arg(v.traces.size())
                             .arg(v.spanCount)
                             .arg(formatNs(double(v.endNs - v.startNs)), sources.join(QStringLiteral(", "))));
    }
    QStringList notes = errors;
    for (const auto& note : v.notes)
        notes << qs(note);
    m_notes->setText(notes.join(QLatin1Char('\n')));
    m_notes->setVisible(!notes.isEmpty());
    m_exportButton->setEnabled(!v.traces.empty());

    m_timeline->setView(m_view);
    m_collectives->setAnalyses(v.analyses);
    m_ranks->setAnalyses(v.analyses);

    const QSignalBlocker block(m_rankBox);
    m_rankBox->clear();
    for (const auto& t : v.traces)
        m_rankBox->addItem(tr("Steps of rank %1").arg(t.rank), t.rank);
    updateRankChart();
    updateStepCharts();
}

int TracePage::stepRank() const { return m_rankBox->currentIndex() >= 0 ? m_rankBox->currentData().toInt() : -1; }

void TracePage::setStepRank(int rank)
{
    const int index = m_rankBox->findData(rank);
    if (index >= 0)
        m_rankBox->setCurrentIndex(index);
}

void TracePage::updateRankChart()
{
    m_rankChart->clearPlottables();
    QCPBars* below = nullptr;
    QVector<double> keys;
    for (const auto& a : m_view->analyses)
        keys << a.rank;
    for (const auto& part : kParts) {
        auto* bars = new QCPBars(m_rankChart->xAxis, m_rankChart->yAxis);
        bars->setName(QString::fromLatin1(part.name));
        bars->setPen(Qt::NoPen);
        bars->setBrush(workColor(part.kind));
        bars->setWidth(0.6);
        QVector<double> values;
        for (const auto& a : m_view->analyses)
            values << a.total.share(a.total.*part.field) * 100.0;
        bars->setData(keys, values, true);
        if (below)
            bars->moveAbove(below);
        below = bars;
    }
    if (keys.isEmpty())
        m_rankChart->xAxis->setRange(-0.5, 1.5);
    else
        m_rankChart->xAxis->setRange(keys.front() - 0.6, keys.back() + 0.6);
    m_rankChart->yAxis->setRange(0, 100);
    m_rankChart->replot(QCustomPlot::rpQueuedReplot);
}

void TracePage::updateStepCharts()
{
    // Breakdown per step of the chosen rank, stacked as in the rank chart.
    m_stepChart->clearPlottables();
    const prof::RankAnalysis* chosen = nullptr;
    for (const auto& a : m_view->analyses)
        if (a.rank == stepRank())
            chosen = &a;
    double minStep = 0, maxStep = 1;
    bool anyStep = false;
    const auto noteStep = [&](double step) {
        minStep = anyStep ? std::min(minStep, step) : step;
        maxStep = anyStep ? std::max(maxStep, step) : step;
        anyStep = true;
    };
    QCPBars* below = nullptr;
    for (const auto& part : kParts) {
        auto* bars = new QCPBars(m_stepChart->xAxis, m_stepChart->yAxis);
        bars->setName(QString::fromLatin1(part.name));
        bars->setPen(Qt::NoPen);
        bars->setBrush(workColor(part.kind));
        bars->setWidth(0.7);
        QVector<double> keys, values;
        if (chosen) {
            for (const auto& s : chosen->steps) {
                keys << double(s.step);
                values << s.breakdown.share(s.breakdown.*part.field) * 100.0;
                noteStep(double(s.step));
            }
        }
        bars->setData(keys, values, true);
        if (below)
            bars->moveAbove(below);
        below = bars;
    }
    m_stepChart->xAxis->setRange(minStep - 0.6, maxStep + 0.6);
    m_stepChart->yAxis->setRange(0, 100);
    m_stepChart->replot(QCustomPlot::rpQueuedReplot);

    // Overlap per step, one bar per rank side by side, so that a rank hiding less is seen.
    m_overlapChart->clearPlottables();
    const auto ranks = m_view->analyses.size();
    auto* group = ranks > 1 ? new QCPBarsGroup(m_overlapChart) : nullptr;
    for (const auto& a : m_view->analyses) {
        auto* bars = new QCPBars(m_overlapChart->xAxis, m_overlapChart->yAxis);
        bars->setName(tr("rank %1").arg(a.rank));
        bars->setPen(Qt::NoPen);
        bars->setBrush(rankColor(a.rank)); // as the rank's series on the Run page
        bars->setWidth(0.8 / double(std::max<std::size_t>(ranks, 1)));
        QVector<double> keys, values;
        for (const auto& s : a.steps) {
            keys << double(s.step);
            values << s.breakdown.overlap() * 100.0;
            noteStep(double(s.step));
        }
        bars->setData(keys, values, true);
        if (group)
            bars->setBarsGroup(group);
    }
    m_overlapChart->xAxis->setRange(minStep - 0.6, maxStep + 0.6);
    m_overlapChart->yAxis->setRange(0, 100);
    m_overlapChart->replot(QCustomPlot::rpQueuedReplot);
}

Result<void> TracePage::exportMergedTrace(const fs::path& path) const
{
    if (!hasTraces())
        return makeError("no trace to export: open a profiled run or a trace file first");
    // Each rank's clockOffsetNs as recorded (ClockAlignment::Offsets): the page's timeline uses
    // the same, so the file shows what the page shows.
    return prof::writeMergedTrace(path, m_view->traces, prof::ClockAlignment{});
}

void TracePage::openTraceFileDialog()
{
    const QStringList names = QFileDialog::getOpenFileNames(
        this, tr("Open traces"), {}, tr("Traces: Shardscope, torch.profiler (*.json *.json.gz);;All files (*)"));
    if (names.isEmpty())
        return;
    std::vector<fs::path> files;
    for (const auto& name : names)
        files.emplace_back(name.toStdString());
    openFiles(std::move(files), names.size() == 1 ? QFileInfo(names.front()).fileName() : tr("%1 files").arg(names.size()));
}

void TracePage::exportDialog()
{
    const QString name = QFileDialog::getSaveFileName(this, tr("Export Chrome trace"), QStringLiteral("merged.json"),
                                                      tr("Chrome traces (*.json)"));
    if (name.isEmpty())
        return;
    if (auto written = exportMergedTrace(name.toStdString()); !written)
        QMessageBox::warning(this, tr("Export Chrome trace"), qs(written.error().message));
}

} // namespace shardscope::ui
