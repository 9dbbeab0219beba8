#include "ui/run_page.h"

#include "storage/metric_keys.h"
#include "ui/history_service.h"
#include "ui/format.h"
#include "ui/generation_dialog.h"
#include "ui/metric_chart.h"
#include "ui/rank_log_view.h"
#include "ui/run_charts.h"
#include "ui/run_header.h"
#include "ui/shardscope_command.h"

#include <QDateTime>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QSplitter>
#include <QTabWidget>
#include <QTextBrowser>
#include <QTimer>
#include <QVBoxLayout>

#include <csignal>

namespace shardscope::ui {

namespace {

double nowSeconds() { return static_cast<double>(QDateTime::currentMSecsSinceEpoch()) / 1000.0; }

} // namespace

// What one poll brings back from the history thread: the run's new rows, and the files the
// page shows beside them (the selected rank's log from the offset the page had read to).
struct RunPage::Poll {
    std::uint64_t generation = 0;
    std::uint64_t logGeneration = 0;
    Result<RunUpdate> update = makeError("not polled");
    RunFiles files;
};

RunPage::RunPage(QWidget* parent, HistoryService* history)
    : QWidget(parent), m_history(history ? history : new HistoryService(this))
{
    auto* layout = new QVBoxLayout(this);
    m_header = new RunHeader(this);
    layout->addWidget(m_header);

    m_error = new QLabel(this);
    m_error->setObjectName(QStringLiteral("runError"));
    m_error->setTextFormat(Qt::PlainText);
    m_error->setWordWrap(true);
    m_error->setStyleSheet(QStringLiteral("QLabel { background: #fbe3e3; color: #8a1c1c; padding: 6px; border-radius: 3px; }"));
    m_error->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_error->hide();
    layout->addWidget(m_error);
    m_diagnosis = new QLabel(this);
    m_diagnosis->setObjectName(QStringLiteral("runDiagnosis"));
    m_diagnosis->setTextFormat(Qt::PlainText);
    m_diagnosis->setWordWrap(true);
    m_diagnosis->setStyleSheet(
        QStringLiteral("QLabel { background: #eef3fb; color: #1c3a6b; padding: 6px; border-radius: 3px; }"));
    m_diagnosis->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_diagnosis->hide();
    layout->addWidget(m_diagnosis);
    // The launcher's findings while the run goes on (a straggler), above the charts.
    m_alerts = new QLabel(this);
    m_alerts->setObjectName(QStringLiteral("runAlerts"));
    m_alerts->setTextFormat(Qt::PlainText);
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

    // An engine run over a device mesh (HSDP, tensor parallelism): its groups, each rank's place
    // in them on hover.
    m_mesh = new QLabel(this);
    m_mesh->setObjectName(QStringLiteral("runMesh"));
    m_mesh->setWordWrap(true);
    m_mesh->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_mesh->hide();
    layout->addWidget(m_mesh);

    auto* splitter = new QSplitter(Qt::Vertical, this);
    m_charts = new RunCharts(splitter);
    m_group = m_charts->group();
    splitter->addWidget(m_charts);

    // Below the charts: the ranks' logs and, once an eval wrote some, the text samples.
    m_bottomTabs = new QTabWidget(splitter);
    m_bottomTabs->setObjectName(QStringLiteral("runBottomTabs"));
    m_log = new RankLogView(m_bottomTabs);
    m_bottomTabs->addTab(m_log, tr("Log"));
    m_samples = new QTextBrowser(m_bottomTabs);
    m_samples->setObjectName(QStringLiteral("runSamples"));
    m_bottomTabs->addTab(m_samples, tr("Samples"));
    m_bottomTabs->setTabToolTip(1, tr("What the model wrote at each eval from the recipe's training.eval_prompts, "
                                      "newest first"));
    m_bottomTabs->setTabEnabled(1, false);
    splitter->addWidget(m_bottomTabs);
    splitter->setStretchFactor(0, 4);
    splitter->setStretchFactor(1, 1);
    // Four fifths for the charts from the start: left to the size hints, a tall log took most of
    // a 1366x768 screen (the stretch factors only share out later changes of size).
    splitter->setSizes({800, 200});
    layout->addWidget(splitter, 1);

    m_pollTimer = new QTimer(this);
    m_pollTimer->setInterval(500);
    connect(m_pollTimer, &QTimer::timeout, this, &RunPage::pollNow);
    connect(m_header, &RunHeader::xAxisChosen, this, [this](int index) {
        setXAxisMode(index == 1 ? XAxis::Time : index == 2 ? XAxis::Tokens : XAxis::Step);
    });
    connect(m_header, &RunHeader::followRequested, this, [this] {
        m_group->setFollowing(true);
        m_header->setFollowing(true);
    });
    connect(m_group, &ChartGroup::followingChanged, m_header, &RunHeader::setFollowing);
    connect(m_header, &RunHeader::chartsMenuRequested, m_charts, &RunCharts::fillMenu);
    connect(m_header, &RunHeader::smoothingChosen, this, &RunPage::setSmoothing);
    connect(m_header, &RunHeader::stopRequested, this, &RunPage::stopRun);
    connect(m_header, &RunHeader::diagnoseRequested, this, &RunPage::diagnoseRun);
    connect(m_header, &RunHeader::resumeRequested, this, [this] { emit resumeRequested(m_info.runId); });
    connect(m_header, &RunHeader::tryModelRequested, this, &RunPage::tryModel);
    m_diagnose = new ShardscopeCommand(this);
    connect(m_diagnose, &ShardscopeCommand::finished, this, &RunPage::showDiagnosis);
    connect(m_log, &RankLogView::reloadRequested, this, &RunPage::pollNow);
}

void RunPage::tryModel()
{
    if (!m_generationDialog)
        m_generationDialog = new GenerationDialog(this);
    m_generationDialog->setRun(qs(m_info.runDir), qs(m_info.name));
    m_generationDialog->show();
    m_generationDialog->raise();
}

RunPage::~RunPage() = default;

void RunPage::layoutCharts()
{
    m_charts->setPanels(m_info.mixedPrecision == "fp16", m_series.hasMfu(), m_series.hasPhaseMemory());
}

void RunPage::showSamples()
{
    QString html;
    for (auto it = m_sampleSteps.rbegin(); it != m_sampleSteps.rend(); ++it) {
        html += QStringLiteral("<h4>%1</h4>").arg(tr("Step %1").arg(it->first));
        for (const auto& sample : it->second)
            html += QStringLiteral("<p style='white-space: pre-wrap'><span style='color: #666'>%1</span><b>%2</b></p>")
                        .arg(qs(sample.prompt).toHtmlEscaped(), qs(sample.text).toHtmlEscaped());
    }
    m_samples->setHtml(html);
    m_bottomTabs->setTabEnabled(1, !m_sampleSteps.empty());
    m_bottomTabs->setTabText(1,
                             m_sampleSteps.empty() ? tr("Samples") : tr("Samples (step %1)").arg(m_sampleSteps.rbegin()->first));
}

void RunPage::updateUnreportedNotes()
{
    // A script's reporter sends what it knows; a chart it sends nothing for says how to fill it
    // (it drew flat zeros: #45 point 10).
    const bool scriptSteps = !m_command->text().isEmpty() && m_series.lastStep() >= 1;
    const std::pair<const char*, const char*> hows[] = {
        {"lr", "lr="}, {"grad_norm", "grad_norm="}, {"tokens_per_s", "batch= (with input_ids) or tokens="}};
    for (const auto& [name, how] : hows) {
        MetricChart* chart = m_charts->chart(QLatin1String(name));
        chart->setNote(scriptSteps && chart->seriesCount() == 0
                           ? tr("Not reported by the script: pass %1 to reporter.step").arg(QLatin1String(how))
                           : QString());
    }
}

void RunPage::updateMemoryNote()
{
    // RSS beside the Configure page's estimate read as a contradiction (#45 point 7): the chart
    // says what it counts, and gives the model states the estimate counts beside it.
    QString note = m_series.hasDeviceMemory() ? tr("Device: peak allocated in each step (PyTorch's caching allocator)")
                                              : tr("RSS: each rank's whole process (runtime, data, caches, activations)");
    if (const auto& states = m_series.modelStates(); states.params > 0) {
        note += QLatin1Char('\n')
                + tr("Model states kept, rank 0: params %1 · grads %2 · optimizer %3")
                      .arg(formatBytes(states.params), formatBytes(states.grads), formatBytes(states.optimizer));
        if (states.peakParams > 0) // runs recorded before the peaks were reported have none
            note += tr(" (peak %1 · %2)").arg(formatBytes(states.peakParams), formatBytes(states.peakGrads));
    }
    MetricChart* chart = m_charts->chart(QStringLiteral("memory"));
    chart->setNote(note);
    chart->setToolTip(tr("Model states kept: what the layout holds from step to step, as the memory estimate on the "
                         "Configure page counts them (parameters or their shards, gradients or their shards, the "
                         "optimizer's state). Peak: with what a step holds for a moment: units gathered for their "
                         "forward and backward, unsharded gradients until their reduce-scatter, DDP's buckets. "
                         "The curve is more than both: the whole process or the device's allocator."));
}

void RunPage::updateAlerts()
{
    QStringList lines = m_series.alerts();
    // A script run with no step yet: its charts stay empty unless the script reports (a plain
    // script showed a page of empty charts with no word why).
    if (m_commandRead && !m_command->text().isEmpty() && m_series.lastStep() < 0 && m_info.status != storage::RunStatus::Pending)
        lines << tr("No steps reported by this script%1. A script reports its steps through Shardscope's reporter: "
                    "after `import shardscope`, `reporter = shardscope.Reporter(accelerator)` once and "
                    "`reporter.step(loss, batch)` each step (docs/SCRIPTS.md). Without it the charts stay empty; "
                    "its ranks' logs are below.")
                     .arg(storage::isTerminal(m_info.status) ? QString() : tr(" yet"));
    m_alerts->setText(lines.join(QLatin1Char('\n')));
    m_alerts->setVisible(!lines.isEmpty());
}

void RunPage::updateRunColor()
{
    if (m_info.runId <= 0)
        return;
    m_series.setRunColor(runColor(m_info.runId));
}

void RunPage::closeRun()
{
    m_pollTimer->stop();
    m_source.reset();
    ++m_generation; // answers to polls of the run closed are dropped
    m_polling = false;
    m_pollAgain = false;
    m_info = {};
    m_series.reset();
    updateAlerts();
    m_finishedAnnounced = false;
    m_sawLive = false;
    for (auto* c : m_charts->charts())
        c->removeSeries();
    m_group->setFollowing(true);
    m_log->clear();
    m_logsDir.clear();
    m_sampleSteps.clear();
    showSamples();
    m_error->hide();
    m_diagnosis->hide();
    m_command->clear();
    m_command->hide();
    m_mesh->clear();
    m_mesh->hide();
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
    const std::uint64_t logGeneration = m_log->generation();
    const std::string runDir = m_info.runDir;
    const int rank = m_log->rank();
    const std::uint64_t logOffset = m_log->offset();
    const bool readCommand = !m_commandRead;
    m_history->submit<std::shared_ptr<Poll>>(
        this,
        [=] {
            auto poll = std::make_shared<Poll>();
            poll->generation = generation;
            poll->logGeneration = logGeneration;
            poll->update = source->poll();
            // The run directory is known after the first poll.
            RunInfo known;
            known.runDir = runDir;
            poll->files = source->readFiles(poll->update ? poll->update->info : known, rank, logOffset, readCommand);
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
    m_sawLive = m_sawLive || !storage::isTerminal(m_info.status);
    const RunFiles& files = poll.files;
    if (files.command) {
        m_commandRead = true;
        m_command->setText(qs(*files.command));
        m_command->setVisible(!files.command->empty());
    }
    if (files.mesh && !files.mesh->empty()) {
        m_mesh->setText(tr("Device mesh %1").arg(qs(files.mesh->summary)));
        QStringList ranks;
        for (const auto& line : files.mesh->ranks)
            ranks << qs(line);
        m_mesh->setToolTip(ranks.join(QLatin1Char('\n')));
        m_mesh->show();
    }
    m_series.setRun(m_info.runId, m_info.worldSize);
    if (m_info.startedAt)
        m_series.setTimeOrigin(*m_info.startedAt);
    else if (!update.rows.empty())
        m_series.setTimeOrigin(update.rows.front().time);
    const auto appended = m_series.append(update.rows);
    m_series.append(update.evals);
    if (!update.samples.empty()) {
        for (auto& sample : update.samples)
            m_sampleSteps[sample.step].push_back(std::move(sample));
        showSamples();
    }
    if (appended.panelsChanged)
        layoutCharts();
    updateAlerts(); // the straggler and spike flags, and a script that reports nothing
    updateMemoryNote();
    updateUnreportedNotes();
    m_log->setRanks(m_info.worldSize, m_info.rootCauseRank);
    if (!files.logsDir.empty() && qs(files.logsDir) != m_logsDir) {
        // Another attempt began (Resume, a requeue): its logs from their start.
        const bool first = m_logsDir.isEmpty();
        m_logsDir = qs(files.logsDir);
        if (!first) {
            m_log->restart();
            m_pollAgain = true;
        }
    }
    if (poll.logGeneration == m_log->generation() && files.logOffset == m_log->offset()) {
        if (files.logShrunk)
            m_log->restart();
        else
            m_log->append(QByteArray::fromStdString(files.log));
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

void RunPage::setXAxisMode(XAxis mode)
{
    if (mode == m_series.xAxis())
        return;
    m_header->setXAxisIndex(mode == XAxis::Time ? 1 : mode == XAxis::Tokens ? 2 : 0);
    for (auto* c : m_charts->charts()) {
        c->clearData();
        c->setXLabel(mode == XAxis::Time     ? tr("seconds since start")
                     : mode == XAxis::Tokens ? tr("tokens (all ranks)")
                                             : tr("step"));
    }
    m_series.setXAxis(mode);
    m_group->setFollowing(true);
}

void RunPage::setSmoothing(double weight)
{
    m_header->setSmoothing(weight);
    m_group->setSmoothing(weight);
}

QString RunPage::liveRunName() const { return m_source && !storage::isTerminal(m_info.status) ? qs(m_info.name) : QString(); }

void RunPage::updateHeader()
{
    layoutCharts();
    m_header->showRun(m_info, m_series.lastStep(), m_diagnose->running(), nowSeconds());
    if (m_info.status == storage::RunStatus::Failed || !m_info.error.empty()) {
        QString text = m_info.rootCauseRank ? tr("Failed on rank %1: ").arg(*m_info.rootCauseRank) : tr("Failed: ");
        text += m_info.error.empty() ? tr("(no message)") : qs(m_info.error);
        m_error->setText(text);
        m_error->setVisible(storage::isTerminal(m_info.status) || !m_info.error.empty());
    } else {
        m_error->hide();
    }
}

int RunPage::logRank() const { return m_log->rank(); }

void RunPage::setLogRank(int rank) { m_log->setRank(rank); }

void RunPage::setLogFilter(const QString& text) { m_log->setFilter(text); }

QString RunPage::logText() const { return m_log->text(); }

void RunPage::stopRun()
{
    if (storage::isTerminal(m_info.status) || m_info.launcher.pid <= 0)
        return;
    // Only a launcher that is provably still the same process (pid, boot, start time) is
    // signalled: a recycled pid must never receive our signal.
    if (storage::checkLiveness(m_info.launcher) != storage::Liveness::Alive) {
        emit pollFailed(tr("The launcher of this run is not running on this machine."));
        return;
    }
    // As Ctrl-C: the launcher stops every rank after its step and records the run as cancelled.
    // (SIGTERM would have the ranks save a checkpoint first: for a scheduler's preemption.)
    ::kill(static_cast<pid_t>(m_info.launcher.pid), SIGINT);
    m_header->setStopEnabled(false);
    pollNow();
}

void RunPage::diagnoseRun()
{
    if (m_diagnose->running() || m_info.runDir.empty())
        return;
    m_header->setDiagnoseEnabled(false);
    m_diagnosis->setText(tr("Asking the ranks…"));
    m_diagnosis->show();
    // What it says is shown as it is (the ranks' stacks too, which --json leaves out).
    m_diagnose->start({QStringLiteral("runs"), QStringLiteral("diagnose"), qs(m_info.runDir)}, ShardscopeCommand::Output::Text);
}

void RunPage::showDiagnosis(const CommandAnswer& answer)
{
    const QString said = answer.started ? answer.text.trimmed() : tr("Could not run %1: %2").arg(answer.program, answer.error);
    if (answer.arguments.value(2) == qs(m_info.runDir)) // the page may show another run by now
        m_diagnosis->setText(said.isEmpty() ? tr("shardscope runs diagnose said nothing") : said);
    m_header->setDiagnoseEnabled(!storage::isTerminal(m_info.status));
}

// The charts, and their layout (ui/run_charts.h).
const std::vector<MetricChart*>& RunPage::charts() const { return m_charts->charts(); }
MetricChart* RunPage::chart(const QString& name) const { return m_charts->chart(name); }
void RunPage::setLayoutSettingsFile(const QString& settingsFile) { m_charts->setLayoutSettingsFile(settingsFile); }
void RunPage::setChartHidden(const QString& name, bool hidden) { m_charts->setChartHidden(name, hidden); }
void RunPage::setChartEnlarged(const QString& name, bool enlarged) { m_charts->setChartEnlarged(name, enlarged); }
bool RunPage::chartHidden(const QString& name) const { return m_charts->chartHidden(name); }
bool RunPage::chartEnlarged(const QString& name) const { return m_charts->chartEnlarged(name); }
void RunPage::resetChartLayout() { m_charts->resetLayout(); }

} // namespace shardscope::ui
