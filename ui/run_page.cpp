#include "ui/run_page.h"

#include "engine/common/run_layout.h"
#include "engine/plan/run_plan.h"
#include "storage/metric_keys.h"
#include "ui/history_service.h"
#include "ui/format.h"
#include "ui/generation_dialog.h"
#include "ui/metric_chart.h"
#include "ui/rank_log_view.h"
#include "ui/run_charts.h"
#include "ui/run_launcher.h"

#include <QComboBox>
#include <QDateTime>
#include <QFile>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QPlainTextEdit>
#include <QProcess>
#include <QPushButton>
#include <QSlider>
#include <QSplitter>
#include <QTabWidget>
#include <QTextBrowser>
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
    // The engine's device mesh from plan.json, read with the command: its summary (empty for one
    // data-parallel dimension) and each rank's place.
    std::optional<config::MeshDescription> mesh;
    QString logsDir; // the folder `log` was read from
};

// The run's name on a line of its own (a long one never pushes Stop off-screen), then its
// status, progress, smoothing, the x axis, Follow and Stop.
void RunPage::buildHeader(QVBoxLayout* layout)
{
    auto* header = new QHBoxLayout;
    m_title = new QLabel(tr("No run open. Open one from Runs (double click) or launch one from Configure."), this);
    m_title->setObjectName(QStringLiteral("runTitle"));
    m_title->setTextFormat(Qt::PlainText); // recorded text: shown, never read as markup (as m_error, ...)
    QFont titleFont = m_title->font();
    titleFont.setPointSize(titleFont.pointSize() + 3);
    titleFont.setBold(true);
    m_title->setFont(titleFont);
    m_status = new QLabel(this);
    m_status->setObjectName(QStringLiteral("runStatus"));
    m_status->setWordWrap(true); // a cluster job's scheduler text is long: it wraps, never widens the window
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
    connect(m_chartsButton->menu(), &QMenu::aboutToShow, this, [this] { m_charts->fillMenu(m_chartsButton->menu()); });
    m_followButton = new QPushButton(tr("Follow"), this);
    m_followButton->setObjectName(QStringLiteral("followButton"));
    m_followButton->setCheckable(true);
    m_followButton->setChecked(true);
    m_followButton->setToolTip(tr("Checked: the charts follow new data. A zoom or drag stops that (a view that ends at "
                                  "the newest step keeps sliding); click, or double-click a chart, to follow again"));
    m_stopButton = new QPushButton(tr("Stop"), this);
    m_stopButton->setObjectName(QStringLiteral("stopButton"));
    m_stopButton->setToolTip(tr("Stop the run: SIGINT (Ctrl-C) to its launcher, which stops every rank after its step"));
    m_stopButton->setEnabled(false);
    m_diagnoseButton = new QPushButton(tr("Diagnose"), this);
    m_diagnoseButton->setObjectName(QStringLiteral("diagnoseButton"));
    m_diagnoseButton->setToolTip(tr("Ask the ranks where they are: the collective they wait in, the rank that never "
                                    "entered it, each rank's last collective (shardscope runs diagnose)"));
    m_diagnoseButton->setEnabled(false);
    m_resumeButton = new QPushButton(tr("Resume"), this);
    m_resumeButton->setObjectName(QStringLiteral("resumeButton"));
    m_resumeButton->setToolTip(tr("Go on with this failed or stopped run from its newest checkpoint, as the same run "
                                  "(its next attempt): shardscope launch --continue_run"));
    m_resumeButton->setEnabled(false);
    m_tryModelButton = new QPushButton(tr("Try model…"), this);
    m_tryModelButton->setObjectName(QStringLiteral("tryModelButton"));
    m_tryModelButton->setToolTip(tr("Continue a prompt with the model this run exported, with its tokenizer "
                                    "(shardscope runs generate)"));
    m_tryModelButton->setEnabled(false);
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
    header->addWidget(m_tryModelButton);
    header->addWidget(m_resumeButton);
    header->addWidget(m_diagnoseButton);
    header->addWidget(m_stopButton);
    layout->addLayout(header);
}

RunPage::RunPage(QWidget* parent, HistoryService* history)
    : QWidget(parent), m_history(history ? history : new HistoryService(this))
{
    auto* layout = new QVBoxLayout(this);

    buildHeader(layout);

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
    connect(m_resumeButton, &QPushButton::clicked, this, [this] {
        m_resumeButton->setEnabled(false); // once: the launcher takes it from here
        emit resumeRequested(m_info.runId);
    });
    connect(m_log, &RankLogView::reloadRequested, this, &RunPage::pollNow);
    connect(m_tryModelButton, &QPushButton::clicked, this, &RunPage::tryModel);
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
            // The log of the rank shown: the run directory is known after the first poll.
            const std::string dir = poll->update ? poll->update->info.runDir : runDir;
            if (!dir.empty() && readCommand) {
                QFile command(QString::fromStdString(RunLayout(dir).commandFile().string()));
                poll->command = QString();
                if (command.open(QIODevice::ReadOnly))
                    for (const QString& line : QString::fromUtf8(command.read(1 << 20)).split(QLatin1Char('\n')))
                        if (!line.isEmpty() && !line.startsWith(QLatin1Char('#')))
                            *poll->command = line; // the last command line (after the shebang and comments)
                // A script run has no plan.json; an engine run's mesh is in it.
                auto plan = config::loadPlan(RunLayout(dir).planFile().string());
                poll->mesh = plan ? config::describeMesh(*plan) : config::MeshDescription{};
            }
            if (!dir.empty()) {
                const std::string logsDir = poll->update && !poll->update->info.logsDir.empty()
                                                ? poll->update->info.logsDir
                                                : RunLayout(dir).logsDir().string();
                poll->logsDir = QString::fromStdString(logsDir);
                QFile file(QString::fromStdString((std::filesystem::path(logsDir) / RunLayout::rankLogName(rank)).string()));
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
    m_sawLive = m_sawLive || !storage::isTerminal(m_info.status);
    if (poll.command) {
        m_commandRead = true;
        m_command->setText(*poll.command);
        m_command->setVisible(!poll.command->isEmpty());
    }
    if (poll.mesh && !poll.mesh->empty()) {
        m_mesh->setText(tr("Device mesh %1").arg(qs(poll.mesh->summary)));
        QStringList ranks;
        for (const auto& line : poll.mesh->ranks)
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
    if (!poll.logsDir.isEmpty() && poll.logsDir != m_logsDir) {
        // Another attempt began (Resume, a requeue): its logs from their start.
        const bool first = m_logsDir.isEmpty();
        m_logsDir = poll.logsDir;
        if (!first) {
            m_log->restart();
            m_pollAgain = true;
        }
    }
    if (poll.logGeneration == m_log->generation() && poll.logOffset == m_log->offset()) {
        if (poll.logShrunk)
            m_log->restart();
        else
            m_log->append(poll.log);
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
    m_xAxisBox->setCurrentIndex(mode == XAxis::Time ? 1 : mode == XAxis::Tokens ? 2 : 0);
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
    m_smoothingLabel->setText(tr("smoothing %1").arg(weight, 0, 'f', 2));
    const int position = static_cast<int>(std::lround(weight * 100));
    if (m_smoothingSlider->value() != position) {
        const QSignalBlocker blocker(m_smoothingSlider);
        m_smoothingSlider->setValue(position);
    }
    m_group->setSmoothing(weight);
}

QString RunPage::liveRunName() const { return m_source && !storage::isTerminal(m_info.status) ? qs(m_info.name) : QString(); }

void RunPage::updateHeader()
{
    layoutCharts();
    m_title->setText(elidedName(qs(m_info.name)));
    m_title->setToolTip(plainToolTip(qs(m_info.name)));
    m_status->setText(
        QStringLiteral("<b style=\"color:%1\">%2</b> · %3 · %4 · %5 ranks")
            .arg(statusColor(m_info.status).name(), statusText(m_info.status),
                 // Recorded text (an imported run's, another machine's run.json): escaped in this rich label.
                 qs(m_info.distributedType).isEmpty() ? tr("local") : qs(m_info.distributedType).toHtmlEscaped(),
                 tr("precision %1")
                         .arg(m_info.mixedPrecision.empty() ? QStringLiteral("?") : qs(m_info.mixedPrecision).toHtmlEscaped())
                     + (m_info.precisionEmulated ? tr(" (emulated on this hardware: slower than float32)") : QString()))
            .arg(m_info.worldSize));
    // What MFU is against, for whoever wonders about the MFU panel's scale.
    m_status->setToolTip(m_info.mfuPeak.empty() ? QString() : plainToolTip(tr("MFU against %1").arg(qs(m_info.mfuPeak))));
    // A cluster job: its id, and while it lives what the scheduler says (pending and why, the nodes).
    if (!m_info.job.empty()) {
        QString job = QStringLiteral(" · ") + qs(m_info.job).toHtmlEscaped();
        if (!storage::isTerminal(m_info.status) && !m_info.statusDetail.empty())
            job += QStringLiteral(" · ") + qs(m_info.statusDetail).toHtmlEscaped();
        m_status->setText(m_status->text() + job);
    }
    QString progress;
    const std::int64_t lastStep = m_series.lastStep();
    if (m_info.startedAt) {
        const double end = m_info.endedAt.value_or(nowSeconds());
        const double elapsed = end - *m_info.startedAt;
        progress = tr("elapsed %1").arg(formatDuration(elapsed));
        if (lastStep >= 0) {
            // The recipe's max_steps is the target unless --max_steps overrode it (then the
            // stored recipe is stale and only the step count is shown).
            const bool knownTarget = m_info.maxSteps && *m_info.maxSteps >= lastStep;
            progress = (knownTarget ? tr("step %1/%2").arg(lastStep).arg(*m_info.maxSteps) : tr("step %1").arg(lastStep))
                       + QStringLiteral(" · ") + progress;
            if (!storage::isTerminal(m_info.status) && m_info.maxSteps && lastStep > 0 && *m_info.maxSteps > lastStep) {
                const double perStep = elapsed / static_cast<double>(lastStep);
                progress += tr(" · ETA %1").arg(formatDuration(perStep * static_cast<double>(*m_info.maxSteps - lastStep)));
            }
        }
    }
    m_progress->setText(progress);
    const bool live = !storage::isTerminal(m_info.status);
    m_stopButton->setEnabled(live && m_info.launcher.pid > 0);
    m_diagnoseButton->setEnabled(live && !m_info.runDir.empty() && !m_diagnoseProcess);
    // A run of this machine's history that ended short: the launcher checks it has a checkpoint.
    const bool endedShort = storage::isTerminal(m_info.status) && m_info.status != storage::RunStatus::Completed;
    m_resumeButton->setEnabled(endedShort && m_info.runId > 0 && m_info.job.empty());
    // A completed run has exported its model (where its recipe asked; the command says when not).
    m_tryModelButton->setEnabled(m_info.status == storage::RunStatus::Completed && !m_info.runDir.empty() && m_info.writesText);
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
