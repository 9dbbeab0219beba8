#include "ui/run_page.h"

#include "engine/common/run_layout.h"
#include "storage/metric_keys.h"
#include "ui/history_service.h"
#include "ui/format.h"
#include "ui/metric_chart.h"
#include "ui/run_launcher.h"

#include <QAction>
#include <QComboBox>
#include <QDateTime>
#include <QFile>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QPlainTextEdit>
#include <QProcess>
#include <QPushButton>
#include <QScrollArea>
#include <QSettings>
#include <QSlider>
#include <QSplitter>
#include <QTimer>
#include <QVBoxLayout>

#include <cmath>
#include <csignal>

namespace shardscope::ui {

namespace {

double nowSeconds() { return static_cast<double>(QDateTime::currentMSecsSinceEpoch()) / 1000.0; }

} // namespace

// What one poll brings back from the history thread: the run's new rows, and the selected
// rank's log from the offset the page had read to.
struct RunPage::Poll {
    std::uint64_t generation = 0;
    std::uint64_t logGeneration = 0;
    Result<RunUpdate> update = makeError("not polled");
    std::uint64_t logOffset = 0; // where `log` starts
    QByteArray log;
    bool logShrunk = false; // the file is shorter than what was read: rotated or rewritten
    std::optional<QString> command; // a script run's command.sh, its command line; read once
};

// The run's name on a line of its own (a long one never pushes Stop off-screen), then its
// status, progress, smoothing, the x axis, Follow and Stop.
void RunPage::buildHeader(QVBoxLayout* layout)
{
    auto* header = new QHBoxLayout;
    m_title = new QLabel(tr("No run open. Open one from Runs (double click) or launch one from Configure."), this);
    m_title->setObjectName(QStringLiteral("runTitle"));
    QFont titleFont = m_title->font();
    titleFont.setPointSize(titleFont.pointSize() + 3);
    titleFont.setBold(true);
    m_title->setFont(titleFont);
    m_status = new QLabel(this);
    m_status->setObjectName(QStringLiteral("runStatus"));
    m_progress = new QLabel(this);
    m_progress->setObjectName(QStringLiteral("runProgress"));
    m_xAxisBox = new QComboBox(this);
    m_xAxisBox->setObjectName(QStringLiteral("xAxisMode"));
    m_xAxisBox->addItems({tr("x: step"), tr("x: time"), tr("x: tokens")});
    // TensorBoard's smoothing slider (0: raw), for every chart of the page.
    m_smoothingSlider = new QSlider(Qt::Horizontal, this);
    m_smoothingSlider->setObjectName(QStringLiteral("smoothing"));
    m_smoothingSlider->setRange(0, 99);
    m_smoothingSlider->setFixedWidth(110);
    m_smoothingSlider->setToolTip(tr("Smoothing: TensorBoard's debiased exponential moving average; the raw curve "
                                     "stays faint behind. 0: off"));
    m_smoothingLabel = new QLabel(tr("smoothing 0"), this);
    m_chartsButton = new QPushButton(tr("Charts"), this);
    m_chartsButton->setObjectName(QStringLiteral("chartsButton"));
    m_chartsButton->setToolTip(tr("Show or hide charts; right-click a chart to hide or enlarge it. The layout is "
                                  "remembered"));
    m_chartsButton->setMenu(new QMenu(m_chartsButton));
    connect(m_chartsButton->menu(), &QMenu::aboutToShow, this, &RunPage::updateChartsMenu);
    m_followButton = new QPushButton(tr("Follow"), this);
    m_followButton->setObjectName(QStringLiteral("followButton"));
    m_followButton->setCheckable(true);
    m_followButton->setChecked(true);
    m_followButton->setToolTip(tr("Checked: the charts follow new data. A zoom or drag stops that (a view that ends at "
                                  "the newest step keeps sliding); click, or double-click a chart, to follow again"));
    m_stopButton = new QPushButton(tr("Stop"), this);
    m_stopButton->setObjectName(QStringLiteral("stopButton"));
    m_stopButton->setToolTip(tr("Stop the run: SIGTERM to its launcher, which stops every rank"));
    m_stopButton->setEnabled(false);
    m_diagnoseButton = new QPushButton(tr("Diagnose"), this);
    m_diagnoseButton->setObjectName(QStringLiteral("diagnoseButton"));
    m_diagnoseButton->setToolTip(tr("Ask the ranks where they are: the collective they wait in, the rank that never "
                                    "entered it, each rank's last collective (shardscope runs diagnose)"));
    m_diagnoseButton->setEnabled(false);
    // The title on a line of its own: a long run name never pushes Stop off-screen.
    layout->addWidget(m_title);
    header->addWidget(m_status);
    header->addSpacing(12);
    header->addWidget(m_progress);
    header->addStretch(1);
    header->addWidget(m_smoothingLabel);
    header->addWidget(m_smoothingSlider);
    header->addWidget(m_xAxisBox);
    header->addWidget(m_chartsButton);
    header->addWidget(m_followButton);
    header->addWidget(m_diagnoseButton);
    header->addWidget(m_stopButton);
    layout->addLayout(header);
}

QWidget* RunPage::buildCharts(QWidget* parent)
{
    // The charts scroll rather than make the window taller than a 1366x768 screen.
    auto* chartScroll = new QScrollArea(parent);
    chartScroll->setWidgetResizable(true);
    chartScroll->setFrameShape(QFrame::NoFrame);
    auto* chartArea = new QWidget(chartScroll);
    m_chartGrid = new QGridLayout(chartArea);
    m_chartGrid->setContentsMargins(0, 0, 0, 0);
    m_chartGrid->setSpacing(4);
    m_group = new ChartGroup(this);
    const struct {
        const char* name;
        QString title;
    } chartSpecs[] = {{"loss", tr("Loss")},
                      {"lr", tr("Learning rate")},
                      {"grad_norm", tr("Grad norm")},
                      {"loss_scale", tr("Loss scale (fp16) · skipped steps")},
                      {"tokens_per_s", tr("Tokens/s (all ranks)")},
                      {"mfu", tr("MFU [%] per rank")},
                      {"step_time", tr("Step time [s] per rank")},
                      {"compute_time", tr("Compute time [s] per rank (without waits) · stragglers")},
                      {"memory", tr("Memory per rank")},
                      {"memory_phases", tr("Memory after forward · backward · optimizer (rank 0)")}};
    for (const auto& spec : chartSpecs) {
        const QString name = QLatin1String(spec.name);
        auto* chart = new MetricChart(spec.title, chartArea);
        chart->setObjectName(QStringLiteral("chart_%1").arg(name));
        chart->setXLabel(tr("step"));
        auto* hide = new QAction(tr("Hide this chart"), chart);
        connect(hide, &QAction::triggered, this, [this, name] { setChartHidden(name, true); });
        auto* enlarge = new QAction(tr("Enlarge"), chart);
        enlarge->setCheckable(true);
        enlarge->setObjectName(QStringLiteral("enlarge_%1").arg(name));
        connect(enlarge, &QAction::toggled, this, [this, name](bool on) { setChartEnlarged(name, on); });
        chart->setOwnerActions({hide, enlarge});
        m_charts.push_back(chart);
        m_chartNames.push_back(name);
        m_chartByName[name] = chart;
        m_group->add(chart);
    }
    chart(QStringLiteral("memory"))->setValueFormat(MetricChart::ValueFormat::Bytes);
    chart(QStringLiteral("memory_phases"))->setValueFormat(MetricChart::ValueFormat::Bytes);
    chart(QStringLiteral("loss_scale"))->setLogValueAxis(true);
    chartScroll->setWidget(chartArea);
    layoutCharts();
    return chartScroll;
}

RunPage::RunPage(QWidget* parent, HistoryService* history)
    : QWidget(parent), m_history(history ? history : new HistoryService(this))
{
    auto* layout = new QVBoxLayout(this);

    buildHeader(layout);

    m_error = new QLabel(this);
    m_error->setObjectName(QStringLiteral("runError"));
    m_error->setWordWrap(true);
    m_error->setStyleSheet(QStringLiteral("QLabel { background: #fbe3e3; color: #8a1c1c; padding: 6px; border-radius: 3px; }"));
    m_error->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_error->hide();
    layout->addWidget(m_error);
    m_diagnosis = new QLabel(this);
    m_diagnosis->setObjectName(QStringLiteral("runDiagnosis"));
    m_diagnosis->setWordWrap(true);
    m_diagnosis->setStyleSheet(
        QStringLiteral("QLabel { background: #eef3fb; color: #1c3a6b; padding: 6px; border-radius: 3px; }"));
    m_diagnosis->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_diagnosis->hide();
    layout->addWidget(m_diagnosis);
    // The launcher's findings while the run goes on (a straggler), above the charts.
    m_alerts = new QLabel(this);
    m_alerts->setObjectName(QStringLiteral("runAlerts"));
    m_alerts->setWordWrap(true);
    m_alerts->setStyleSheet(QStringLiteral("QLabel { background: #fff4d6; color: #6b4a00; padding: 4px; border-radius: 3px; }"));
    m_alerts->hide();
    layout->addWidget(m_alerts);

    // A script run's exact command (the run directory's command.sh), selectable and copyable.
    m_command = new QLineEdit(this);
    m_command->setObjectName(QStringLiteral("runCommand"));
    m_command->setReadOnly(true);
    m_command->setToolTip(tr("The command the launcher ran for this script run (command.sh in the run directory); "
                             "select it to copy, or paste it into a shell to run the script again without Shardscope"));
    m_command->hide();
    layout->addWidget(m_command);

    auto* splitter = new QSplitter(Qt::Vertical, this);
    splitter->addWidget(buildCharts(splitter));

    auto* logPanel = new QWidget(splitter);
    auto* logLayout = new QVBoxLayout(logPanel);
    logLayout->setContentsMargins(0, 0, 0, 0);
    auto* logBar = new QHBoxLayout;
    m_rankBox = new QComboBox(logPanel);
    m_rankBox->setObjectName(QStringLiteral("logRank"));
    m_logFilter = new QLineEdit(logPanel);
    m_logFilter->setObjectName(QStringLiteral("logFilter"));
    m_logFilter->setPlaceholderText(tr("Filter log lines…"));
    m_logFilter->setClearButtonEnabled(true);
    logBar->addWidget(new QLabel(tr("Log of"), logPanel));
    logBar->addWidget(m_rankBox);
    logBar->addWidget(m_logFilter, 1);
    logLayout->addLayout(logBar);
    m_logView = new QPlainTextEdit(logPanel);
    m_logView->setObjectName(QStringLiteral("logView"));
    m_logView->setReadOnly(true);
    m_logView->setLineWrapMode(QPlainTextEdit::NoWrap);
    m_logView->setMaximumBlockCount(20000);
    m_logView->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    logLayout->addWidget(m_logView);
    splitter->addWidget(logPanel);
    splitter->setStretchFactor(0, 4);
    splitter->setStretchFactor(1, 1);
    // Four fifths for the charts from the start: left to the size hints, a tall log took most of
    // a 1366x768 screen (the stretch factors only share out later changes of size).
    splitter->setSizes({800, 200});
    layout->addWidget(splitter, 1);

    m_pollTimer = new QTimer(this);
    m_pollTimer->setInterval(500);
    connect(m_pollTimer, &QTimer::timeout, this, &RunPage::pollNow);
    connect(m_xAxisBox, &QComboBox::currentIndexChanged, this, [this](int index) {
        setXAxisMode(index == 1 ? XAxis::Time : index == 2 ? XAxis::Tokens : XAxis::Step);
    });
    connect(m_followButton, &QPushButton::clicked, this, [this] {
        m_group->setFollowing(true);
        m_followButton->setChecked(true);
    });
    connect(m_group, &ChartGroup::followingChanged, m_followButton, &QPushButton::setChecked);
    connect(m_smoothingSlider, &QSlider::valueChanged, this, [this](int value) { setSmoothing(value / 100.0); });
    connect(m_stopButton, &QPushButton::clicked, this, &RunPage::stopRun);
    connect(m_diagnoseButton, &QPushButton::clicked, this, &RunPage::diagnoseRun);
    connect(m_rankBox, &QComboBox::currentIndexChanged, this, [this] { reloadLog(); });
    connect(m_logFilter, &QLineEdit::textChanged, this, &RunPage::applyLogFilter);
}

RunPage::~RunPage() = default;

void RunPage::layoutCharts()
{
    // Called on every poll: the grid is rebuilt only when what decides it changed.
    const auto state = std::make_tuple(m_info.mixedPrecision == "fp16", m_hasMfu, m_hasPhaseMemory, m_hiddenCharts,
                                       m_enlargedCharts);
    if (m_laidOut && *m_laidOut == state)
        return;
    m_laidOut = state;
    // The loss-scale panel only where there is a loss scale: fp16 (an empty panel misleads); the
    // MFU panel where the run reports MFU (engine runs on a device whose peak is known).
    auto applies = [this](const QString& name) {
        if (name == QLatin1String("mfu"))
            return m_hasMfu;
        if (name == QLatin1String("memory_phases"))
            return m_hasPhaseMemory;
        return name != QLatin1String("loss_scale") || m_info.mixedPrecision == "fp16";
    };
    for (auto* c : m_charts)
        m_chartGrid->removeWidget(c);
    for (int row = 0; row < m_chartGrid->rowCount(); ++row)
        m_chartGrid->setRowStretch(row, 0);
    // In the charts' order, two to a row; an enlarged chart takes a row of its own, twice as tall.
    int row = 0, column = 0;
    for (std::size_t i = 0; i < m_charts.size(); ++i) {
        MetricChart* c = m_charts[i];
        const QString& name = m_chartNames[i];
        const bool shown = applies(name) && !m_hiddenCharts.contains(name);
        c->setVisible(shown);
        if (!shown)
            continue;
        const bool enlarged = m_enlargedCharts.contains(name);
        if (enlarged && column == 1) {
            ++row;
            column = 0;
        }
        m_chartGrid->addWidget(c, row, column, 1, enlarged ? 2 : 1);
        m_chartGrid->setRowStretch(row, enlarged ? 2 : 1);
        c->setMinimumHeight(enlarged ? 2 * MetricChart::kMinimumHeight : MetricChart::kMinimumHeight);
        if (enlarged || column == 1) {
            ++row;
            column = 0;
        } else {
            column = 1;
        }
    }
}

void RunPage::setLayoutSettingsFile(const QString& settingsFile)
{
    m_layoutFile = settingsFile;
    QSettings settings(m_layoutFile, QSettings::IniFormat);
    const QStringList hidden = settings.value(QStringLiteral("run/hiddenCharts")).toStringList();
    const QStringList enlarged = settings.value(QStringLiteral("run/enlargedCharts")).toStringList();
    m_hiddenCharts = QSet<QString>(hidden.begin(), hidden.end());
    m_enlargedCharts = QSet<QString>(enlarged.begin(), enlarged.end());
    for (const auto& name : m_chartNames) {
        if (auto* action = chart(name)->findChild<QAction*>(QStringLiteral("enlarge_%1").arg(name))) {
            const QSignalBlocker blocker(action);
            action->setChecked(m_enlargedCharts.contains(name));
        }
    }
    layoutCharts();
}

void RunPage::saveChartLayout() const
{
    if (m_layoutFile.isEmpty())
        return;
    QSettings settings(m_layoutFile, QSettings::IniFormat);
    QStringList hidden(m_hiddenCharts.begin(), m_hiddenCharts.end());
    QStringList enlarged(m_enlargedCharts.begin(), m_enlargedCharts.end());
    hidden.sort();
    enlarged.sort();
    settings.setValue(QStringLiteral("run/hiddenCharts"), hidden);
    settings.setValue(QStringLiteral("run/enlargedCharts"), enlarged);
}

void RunPage::setChartHidden(const QString& name, bool hidden)
{
    if (!chart(name) || chartHidden(name) == hidden)
        return;
    if (hidden)
        m_hiddenCharts.insert(name);
    else
        m_hiddenCharts.remove(name);
    layoutCharts();
    saveChartLayout();
}

void RunPage::setChartEnlarged(const QString& name, bool enlarged)
{
    MetricChart* c = chart(name);
    if (!c || chartEnlarged(name) == enlarged)
        return;
    if (enlarged)
        m_enlargedCharts.insert(name);
    else
        m_enlargedCharts.remove(name);
    if (auto* action = c->findChild<QAction*>(QStringLiteral("enlarge_%1").arg(name))) {
        const QSignalBlocker blocker(action);
        action->setChecked(enlarged);
    }
    layoutCharts();
    saveChartLayout();
}

void RunPage::resetChartLayout()
{
    for (const auto& name : QStringList(m_enlargedCharts.begin(), m_enlargedCharts.end()))
        setChartEnlarged(name, false);
    m_hiddenCharts.clear();
    layoutCharts();
    saveChartLayout();
}

void RunPage::updateChartsMenu()
{
    QMenu* menu = m_chartsButton->menu();
    menu->clear();
    for (const auto& name : m_chartNames) {
        QAction* shown = menu->addAction(chart(name)->title());
        shown->setCheckable(true);
        shown->setChecked(!chartHidden(name));
        connect(shown, &QAction::toggled, this, [this, name](bool on) { setChartHidden(name, !on); });
    }
    menu->addSeparator();
    menu->addAction(tr("Reset layout"), this, &RunPage::resetChartLayout);
}

void RunPage::updateAlerts()
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
    m_alerts->setText(lines.join(QLatin1Char('\n')));
    m_alerts->setVisible(!lines.isEmpty());
}

void RunPage::updateRunColor()
{
    if (m_info.runId <= 0)
        return;
    const QColor color = runColor(m_info.runId);
    for (auto& [id, raw] : m_raw) {
        (void)id;
        if (raw.inRunColor)
            raw.chart->setSeriesColor(raw.series, color);
    }
}

MetricChart* RunPage::chart(const QString& name) const
{
    const auto it = m_chartByName.find(name);
    return it == m_chartByName.end() ? nullptr : it->second;
}

void RunPage::closeRun()
{
    m_pollTimer->stop();
    m_source.reset();
    ++m_generation; // answers to polls of the run closed are dropped
    m_polling = false;
    m_pollAgain = false;
    m_info = {};
    m_hasMfu = false;
    m_hasPhaseMemory = false;
    m_stragglers.clear();
    m_lossSpikes.clear();
    updateAlerts();
    m_finishedAnnounced = false;
    m_t0 = -1;
    m_lastStep = -1;
    m_hasDeviceMemory = false;
    m_raw.clear();
    m_lossScaleAt.clear();
    m_tokensSeen.clear();
    m_pendingSkips.clear();
    for (auto* c : m_charts)
        c->removeSeries();
    m_group->setFollowing(true);
    m_rankCount = 0;
    m_rankBox->clear();
    m_logLines.clear();
    m_logView->clear();
    m_logOffset = 0;
    m_logPartial.clear();
    m_error->hide();
    m_diagnosis->hide();
    m_command->clear();
    m_command->hide();
    m_commandRead = false;
}

void RunPage::openRun(std::unique_ptr<RunDataSource> source)
{
    closeRun();
    m_source = std::move(source);
    pollNow();
    m_pollTimer->start();
}

void RunPage::openStoreRun(const std::filesystem::path& databaseFile, std::int64_t runId)
{
    openRun(std::make_unique<StoreRunSource>(databaseFile, runId));
}

QString RunPage::scriptCommand() const { return m_command->text(); }

void RunPage::openRunDirectory(const std::filesystem::path& runDir) { openRun(std::make_unique<EventFileRunSource>(runDir)); }

void RunPage::pollNow()
{
    if (!m_source)
        return;
    if (m_polling) {
        m_pollAgain = true; // one at a time; the next starts when this one is answered
        return;
    }
    m_polling = true;
    auto source = m_source;
    const std::uint64_t generation = m_generation;
    const std::uint64_t logGeneration = m_logGeneration;
    const std::string runDir = m_info.runDir;
    const int rank = logRank();
    const std::uint64_t logOffset = m_logOffset;
    const bool readCommand = !m_commandRead;
    m_history->submit<std::shared_ptr<Poll>>(
        this,
        [=] {
            auto poll = std::make_shared<Poll>();
            poll->generation = generation;
            poll->logGeneration = logGeneration;
            poll->update = source->poll();
            // The log of the rank shown: the run directory is known after the first poll.
            const std::string dir = poll->update ? poll->update->info.runDir : runDir;
            if (!dir.empty() && readCommand) {
                QFile command(QString::fromStdString(RunLayout(dir).commandFile().string()));
                poll->command = QString();
                if (command.open(QIODevice::ReadOnly))
                    for (const QString& line : QString::fromUtf8(command.read(1 << 20)).split(QLatin1Char('\n')))
                        if (!line.isEmpty() && !line.startsWith(QLatin1Char('#')))
                            *poll->command = line; // the last command line (after the shebang and comments)
            }
            if (!dir.empty()) {
                QFile file(QString::fromStdString(RunLayout(dir).rankLog(rank).string()));
                if (file.open(QIODevice::ReadOnly)) {
                    poll->logOffset = logOffset;
                    if (static_cast<std::uint64_t>(file.size()) < logOffset) {
                        poll->logShrunk = true;
                    } else {
                        file.seek(static_cast<qint64>(logOffset));
                        poll->log = file.read(4 * 1024 * 1024); // the rest next poll
                    }
                }
            }
            return poll;
        },
        [this](std::shared_ptr<Poll> poll) { applyPoll(*poll); });
}

void RunPage::applyPoll(Poll& poll)
{
    if (poll.generation != m_generation)
        return; // an answer about a run no longer open
    m_polling = false;
    if (!poll.update) {
        emit pollFailed(qs(poll.update.error().message));
        return;
    }
    RunUpdate& update = *poll.update;
    m_info = update.info;
    if (poll.command) {
        m_commandRead = true;
        m_command->setText(*poll.command);
        m_command->setVisible(!poll.command->isEmpty());
    }
    if (m_t0 < 0) {
        if (m_info.startedAt)
            m_t0 = *m_info.startedAt;
        else if (!update.rows.empty())
            m_t0 = update.rows.front().time;
    }
    appendRows(update.rows);
    appendEvals(update.evals);
    updateRankList();
    if (poll.logGeneration == m_logGeneration && poll.logOffset == m_logOffset) {
        if (poll.logShrunk)
            reloadLog();
        else
            appendLog(poll.log);
    }
    updateHeader();
    emit runUpdated();

    if (update.more || m_pollAgain) {
        m_pollAgain = false;
        QTimer::singleShot(0, this, &RunPage::pollNow);
    } else if (storage::isTerminal(m_info.status) && update.rows.empty()) {
        // Everything of a finished run is in: nothing more will come.
        m_pollTimer->stop();
        if (!m_finishedAnnounced) {
            m_finishedAnnounced = true;
            emit runFinished(m_info.status);
        }
    }
}

double RunPage::xOf(double step, double time) const
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

RunPage::Raw* RunPage::seriesFor(const std::string& key, int rank)
{
    const auto id = std::make_pair(key, rank);
    if (auto it = m_raw.find(id); it != m_raw.end())
        return &it->second;

    namespace k = storage::keys;
    MetricChart* target = nullptr;
    QString name;
    // The run's global series in its colour (as in Runs and Compare), per-rank ones in the rank's.
    QColor color = m_info.runId > 0 ? runColor(m_info.runId) : paletteColor(0);
    auto style = MetricChart::Style::Line;
    const bool rankZero = rank == 0;
    // Loss, lr, grad norm, loss scale and throughput are global (equal on every rank): rank 0's
    // copy is the series. Step time and memory differ per rank: one series each.
    if (key == k::kLoss && rankZero) {
        target = chart(QStringLiteral("loss"));
        name = tr("train");
    } else if (key == "eval.loss" && rankZero) {
        target = chart(QStringLiteral("loss"));
        name = tr("eval");
        color = color == paletteColor(1) ? paletteColor(2) : paletteColor(1);
        style = MetricChart::Style::Markers;
    } else if (key == k::kLr && rankZero) {
        target = chart(QStringLiteral("lr"));
        name = tr("lr");
    } else if (key == k::kGradNorm && rankZero) {
        target = chart(QStringLiteral("grad_norm"));
        name = tr("grad norm");
    } else if (key == k::kLossScale && rankZero) {
        target = chart(QStringLiteral("loss_scale"));
        name = tr("loss scale");
        style = MetricChart::Style::Steps;
    } else if (key == "skipped.marker" && rankZero) {
        target = chart(QStringLiteral("loss_scale"));
        name = tr("skipped step");
        color = paletteColor(3);
        style = MetricChart::Style::Markers;
    } else if (key == k::kTokensPerS && rankZero) {
        target = chart(QStringLiteral("tokens_per_s"));
        name = tr("tokens/s");
    } else if (key == k::kStepTime) {
        target = chart(QStringLiteral("step_time"));
        name = tr("rank %1").arg(rank);
        color = rankColor(rank);
    } else if (key == "loss_spike.marker") {
        target = chart(QStringLiteral("loss"));
        name = tr("loss spike");
        color = paletteColor(3);
        style = MetricChart::Style::Markers;
    } else if (key == storage::keys::kComputeTime) {
        target = chart(QStringLiteral("compute_time"));
        name = tr("rank %1").arg(rank);
        color = rankColor(rank);
    } else if (key == "straggler.marker") {
        target = chart(QStringLiteral("compute_time"));
        name = tr("straggler (rank %1)").arg(rank);
        color = paletteColor(3);
        style = MetricChart::Style::Markers;
    } else if (key == "mfu") {
        target = chart(QStringLiteral("mfu"));
        name = tr("rank %1").arg(rank);
        color = rankColor(rank);
    } else if (key == k::kMemAfterForward || key == k::kMemAfterBackward || key == k::kMemAfterOptimizer) {
        // Where memory grows within a step: the three ends of its phases, rank 0's.
        target = chart(QStringLiteral("memory_phases"));
        const int phase = key == k::kMemAfterForward ? 0 : key == k::kMemAfterBackward ? 1 : 2;
        name = phase == 0 ? tr("after forward") : phase == 1 ? tr("after backward") : tr("after optimizer");
        color = paletteColor(4 + phase);
        style = phase == 2 ? MetricChart::Style::Steps : MetricChart::Style::Line;
    } else if (key == "memory") {
        target = chart(QStringLiteral("memory"));
        name = tr("rank %1").arg(rank);
        color = rankColor(rank);
    }
    if (!target)
        return nullptr;
    Raw raw;
    raw.chart = target;
    raw.inRunColor = m_info.runId > 0 && color == runColor(m_info.runId);
    raw.series = target->addSeries(name, color, style);
    return &m_raw.emplace(id, std::move(raw)).first->second;
}

void RunPage::appendTo(Raw& raw, double step, double time, double value)
{
    raw.steps.push_back(step);
    raw.times.push_back(time);
    raw.values.push_back(value);
    raw.chart->appendPoint(raw.series, xOf(step, time), value);
}

std::optional<RunPage::Raw*> RunPage::memorySeries(const storage::MetricRow& row)
{
    namespace k = storage::keys;
    if (row.key == k::kMemPeakAllocated) {
        if (row.value <= 0)
            return nullptr;
        if (!m_hasDeviceMemory) {
            // A device allocator reports: its peak is the memory that matters, not RSS.
            m_hasDeviceMemory = true;
            for (auto it = m_raw.begin(); it != m_raw.end(); ++it)
                if (it->first.first == "memory") {
                    it->second.steps.clear();
                    it->second.times.clear();
                    it->second.values.clear();
                    it->second.chart->clearData();
                }
        }
        return seriesFor("memory", row.rank);
    }
    if (row.key == k::kMemRss)
        return m_hasDeviceMemory ? nullptr : seriesFor("memory", row.rank);
    if (row.key == k::kMemAfterForward || row.key == k::kMemAfterBackward || row.key == k::kMemAfterOptimizer) {
        if (row.rank != 0)
            return nullptr;
        if (!m_hasPhaseMemory) {
            m_hasPhaseMemory = true; // engine runs report it; a script run does not
            layoutCharts();
        }
        return seriesFor(row.key, 0);
    }
    return std::nullopt;
}

void RunPage::appendRows(const std::vector<storage::MetricRow>& rows)
{
    namespace k = storage::keys;
    // Batch per series: one addData per series per poll, not one per row.
    std::map<Raw*, std::tuple<QVector<double>, QVector<double>, QVector<double>>> batches;
    bool alertsChanged = false; // a straggler or a loss spike arrived: the line above the charts, once
    auto queue = [&](Raw* raw, double step, double time, double value) {
        if (!raw)
            return;
        auto& [steps, times, values] = batches[raw];
        steps.push_back(step);
        times.push_back(time);
        values.push_back(value);
    };
    // Tokens first: a step's x by tokens is known before its other rows are placed.
    for (const auto& row : rows) {
        if (row.rank != 0 || row.key != k::kTokens)
            continue;
        auto last = m_tokensSeen.empty() ? 0.0 : m_tokensSeen.rbegin()->second;
        if (m_tokensSeen.empty() || row.step > m_tokensSeen.rbegin()->first)
            m_tokensSeen[row.step] = last + row.value * std::max(m_info.worldSize, 1);
    }
    for (const auto& row : rows) {
        const auto step = static_cast<double>(row.step);
        if (row.rank == 0)
            m_lastStep = std::max(m_lastStep, row.step);
        if (auto memory = memorySeries(row)) {
            queue(*memory, step, row.time, row.value);
            continue;
        }
        if (row.key == k::kLossSpike || row.key == k::kLossSpikeEpoch || row.key == k::kLossSpikeBatch) {
            // Marked on the loss curve, said above the charts with where its data was.
            alertsChanged = true;
            LossSpike& spike = m_lossSpikes[row.step];
            if (row.key == k::kLossSpike) {
                spike.loss = row.value;
                queue(seriesFor("loss_spike.marker", 0), step, row.time, row.value);
            } else {
                (row.key == k::kLossSpikeEpoch ? spike.epoch : spike.batch) = static_cast<std::int64_t>(row.value);
            }
            continue;
        }
        if (row.key == k::kStraggler) {
            // Marked on the rank's compute-time curve, and said above the charts.
            alertsChanged = true;
            m_stragglers[row.rank] = {row.step, row.value};
            const auto it = m_raw.find({k::kComputeTime, row.rank});
            const auto queued = it == m_raw.end() ? batches.end() : batches.find(&it->second);
            const double y = queued != batches.end() && !std::get<2>(queued->second).isEmpty()
                                 ? std::get<2>(queued->second).back()
                             : it != m_raw.end() && !it->second.values.isEmpty() ? it->second.values.back()
                                                                                 : 0.0;
            queue(seriesFor("straggler.marker", row.rank), step, row.time, y);
            continue;
        }
        if (row.key == k::kMfu) {
            if (!m_hasMfu) {
                m_hasMfu = true; // the panel appears with the first value (a script run has none)
                layoutCharts();
            }
            queue(seriesFor("mfu", row.rank), step, row.time, 100.0 * row.value);
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
        queue(seriesFor("skipped.marker", 0), static_cast<double>(skippedStep), m_t0, it->second);
    }
    m_pendingSkips = std::move(stillPending);
    if (alertsChanged)
        updateAlerts();

    for (auto& [raw, batch] : batches) {
        auto& [steps, times, values] = batch;
        QVector<double> xs;
        xs.reserve(steps.size());
        for (qsizetype i = 0; i < steps.size(); ++i)
            xs.push_back(xOf(steps[i], times[i]));
        raw->steps += steps;
        raw->times += times;
        raw->values += values;
        raw->chart->appendPoints(raw->series, xs, values);
    }
}

void RunPage::appendEvals(const std::vector<storage::EvalRecord>& evals)
{
    for (const auto& eval : evals) {
        if (eval.name != "loss")
            continue;
        if (auto* raw = seriesFor("eval.loss", eval.rank))
            appendTo(*raw, static_cast<double>(eval.step), eval.time, eval.value);
    }
}

void RunPage::setXAxisMode(XAxis mode)
{
    if (mode == m_xAxis)
        return;
    m_xAxis = mode;
    m_xAxisBox->setCurrentIndex(mode == XAxis::Time ? 1 : mode == XAxis::Tokens ? 2 : 0);
    for (auto* c : m_charts) {
        c->clearData();
        c->setXLabel(mode == XAxis::Time     ? tr("seconds since start")
                     : mode == XAxis::Tokens ? tr("tokens (all ranks)")
                                             : tr("step"));
    }
    for (auto& [id, raw] : m_raw) {
        QVector<double> xs;
        xs.reserve(raw.steps.size());
        for (qsizetype i = 0; i < raw.steps.size(); ++i)
            xs.push_back(xOf(raw.steps[i], raw.times[i]));
        raw.chart->appendPoints(raw.series, xs, raw.values);
    }
    m_group->setFollowing(true);
}

void RunPage::setSmoothing(double weight)
{
    m_smoothingLabel->setText(tr("smoothing %1").arg(weight, 0, 'f', 2));
    const int position = static_cast<int>(std::lround(weight * 100));
    if (m_smoothingSlider->value() != position) {
        const QSignalBlocker blocker(m_smoothingSlider);
        m_smoothingSlider->setValue(position);
    }
    m_group->setSmoothing(weight);
}

void RunPage::updateHeader()
{
    layoutCharts();
    m_title->setText(elidedName(qs(m_info.name)));
    m_title->setToolTip(qs(m_info.name));
    m_status->setText(
        QStringLiteral("<b style=\"color:%1\">%2</b> · %3 · %4 · %5 ranks")
            .arg(statusColor(m_info.status).name(), statusText(m_info.status),
                 qs(m_info.distributedType).isEmpty() ? tr("local") : qs(m_info.distributedType),
                 tr("precision %1").arg(m_info.mixedPrecision.empty() ? QStringLiteral("?") : qs(m_info.mixedPrecision)))
            .arg(m_info.worldSize));
    QString progress;
    if (m_info.startedAt) {
        const double end = m_info.endedAt.value_or(nowSeconds());
        const double elapsed = end - *m_info.startedAt;
        progress = tr("elapsed %1").arg(formatDuration(elapsed));
        if (m_lastStep >= 0) {
            // The recipe's max_steps is the target unless --max_steps overrode it (then the
            // stored recipe is stale and only the step count is shown).
            const bool knownTarget = m_info.maxSteps && *m_info.maxSteps >= m_lastStep;
            progress = (knownTarget ? tr("step %1/%2").arg(m_lastStep).arg(*m_info.maxSteps) : tr("step %1").arg(m_lastStep))
                       + QStringLiteral(" · ") + progress;
            if (!storage::isTerminal(m_info.status) && m_info.maxSteps && m_lastStep > 0 && *m_info.maxSteps > m_lastStep) {
                const double perStep = elapsed / static_cast<double>(m_lastStep);
                progress += tr(" · ETA %1").arg(formatDuration(perStep * static_cast<double>(*m_info.maxSteps - m_lastStep)));
            }
        }
    }
    m_progress->setText(progress);
    const bool live = !storage::isTerminal(m_info.status);
    m_stopButton->setEnabled(live && m_info.launcher.pid > 0);
    m_diagnoseButton->setEnabled(live && !m_info.runDir.empty() && !m_diagnoseProcess);
    if (m_info.status == storage::RunStatus::Failed || !m_info.error.empty()) {
        QString text = m_info.rootCauseRank ? tr("Failed on rank %1: ").arg(*m_info.rootCauseRank) : tr("Failed: ");
        text += m_info.error.empty() ? tr("(no message)") : qs(m_info.error);
        m_error->setText(text);
        m_error->setVisible(storage::isTerminal(m_info.status) || !m_info.error.empty());
    } else {
        m_error->hide();
    }
}

void RunPage::updateRankList()
{
    const int ranks = std::max(m_info.worldSize, 1);
    if (ranks != m_rankCount) {
        const QSignalBlocker blocker(m_rankBox);
        const int keep = m_rankBox->currentIndex();
        m_rankBox->clear();
        for (int r = 0; r < ranks; ++r)
            m_rankBox->addItem(tr("rank %1").arg(r), r);
        m_rankBox->setCurrentIndex(keep >= 0 && keep < ranks ? keep : 0);
        m_rankCount = ranks;
        reloadLog();
    }
    // The failing rank: red in the list, and its log shown once when the failure is first seen.
    if (m_info.rootCauseRank && *m_info.rootCauseRank < m_rankBox->count()) {
        const int failing = *m_info.rootCauseRank;
        const QString label = tr("rank %1 — failed").arg(failing);
        if (m_rankBox->itemText(failing) != label) {
            m_rankBox->setItemText(failing, label);
            m_rankBox->setItemData(failing, QColor(0xd6, 0x27, 0x28), Qt::ForegroundRole);
            m_rankBox->setCurrentIndex(failing);
        }
    }
}

int RunPage::logRank() const { return m_rankBox->currentData().isValid() ? m_rankBox->currentData().toInt() : 0; }

void RunPage::setLogRank(int rank) { m_rankBox->setCurrentIndex(rank); }

void RunPage::setLogFilter(const QString& text) { m_logFilter->setText(text); }

QString RunPage::logText() const { return m_logView->toPlainText(); }

// The log is read with each poll (on the history thread); a reload starts it over from the
// beginning, for another rank or a rewritten file.
void RunPage::reloadLog()
{
    ++m_logGeneration; // bytes already on their way belong to the log shown before
    m_logLines.clear();
    m_logOffset = 0;
    m_logPartial.clear();
    m_logView->clear();
    pollNow();
}

void RunPage::appendLog(const QByteArray& bytes)
{
    if (bytes.isEmpty())
        return;
    m_logOffset += static_cast<std::uint64_t>(bytes.size());
    QString text = m_logPartial + QString::fromUtf8(bytes);
    const auto lastNewline = text.lastIndexOf(QLatin1Char('\n'));
    m_logPartial = text.mid(lastNewline + 1);
    if (lastNewline < 0)
        return;
    const QStringList lines = text.left(lastNewline).split(QLatin1Char('\n'));
    m_logLines += lines;
    const QString filter = m_logFilter->text();
    for (const auto& line : lines)
        if (filter.isEmpty() || line.contains(filter, Qt::CaseInsensitive))
            m_logView->appendPlainText(line);
}

void RunPage::applyLogFilter()
{
    const QString filter = m_logFilter->text();
    QStringList shown;
    for (const auto& line : std::as_const(m_logLines))
        if (filter.isEmpty() || line.contains(filter, Qt::CaseInsensitive))
            shown << line;
    m_logView->setPlainText(shown.join(QLatin1Char('\n')));
}

void RunPage::stopRun()
{
    if (storage::isTerminal(m_info.status) || m_info.launcher.pid <= 0)
        return;
    // Only a launcher that is provably still the same process (pid, boot, start time) is
    // signalled: a recycled pid must never receive our SIGTERM.
    if (storage::checkLiveness(m_info.launcher) != storage::Liveness::Alive) {
        emit pollFailed(tr("The launcher of this run is not running on this machine."));
        return;
    }
    // The launcher forwards SIGTERM to every rank and records the run as cancelled.
    ::kill(static_cast<pid_t>(m_info.launcher.pid), SIGTERM);
    m_stopButton->setEnabled(false);
    pollNow();
}

void RunPage::diagnoseRun()
{
    if (m_diagnoseProcess || m_info.runDir.empty())
        return;
    m_diagnoseProcess = new QProcess(this);
    m_diagnoseProcess->setProcessChannelMode(QProcess::MergedChannels);
    m_diagnoseButton->setEnabled(false);
    m_diagnosis->setText(tr("Asking the ranks…"));
    m_diagnosis->show();
    QProcess* process = m_diagnoseProcess;
    const std::string askedRun = m_info.runDir;
    auto done = [this, process, askedRun] {
        QString answer = QString::fromUtf8(process->readAll()).trimmed();
        if (process->error() == QProcess::FailedToStart)
            answer = tr("Could not run %1: %2").arg(process->program(), process->errorString());
        if (m_info.runDir == askedRun) // the page may show another run by now
            m_diagnosis->setText(answer.isEmpty() ? tr("shardscope runs diagnose said nothing") : answer);
        m_diagnoseProcess = nullptr;
        process->deleteLater();
        m_diagnoseButton->setEnabled(!storage::isTerminal(m_info.status));
    };
    connect(process, &QProcess::finished, this, done);
    connect(process, &QProcess::errorOccurred, this, [process, done](QProcess::ProcessError error) {
        if (error == QProcess::FailedToStart)
            done();
    });
    process->start(launcherProgram(), {QStringLiteral("runs"), QStringLiteral("diagnose"), qs(m_info.runDir)});
}

} // namespace shardscope::ui
