#include "ui/run_header.h"

#include "ui/format.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenu>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSlider>
#include <QVBoxLayout>

#include <cmath>

namespace shardscope::ui {

namespace {

QPushButton* button(QWidget* parent, const QString& text, const char* name, const QString& toolTip)
{
    auto* b = new QPushButton(text, parent);
    b->setObjectName(QLatin1String(name));
    b->setToolTip(toolTip);
    return b;
}

} // namespace

RunHeader::RunHeader(QWidget* parent) : QWidget(parent)
{
    m_title = new QLabel(tr("No run open. Open one from Runs (double click) or launch one from Configure."), this);
    m_title->setObjectName(QStringLiteral("runTitle"));
    m_title->setTextFormat(Qt::PlainText); // recorded text: shown, never read as markup (as the page's error, ...)
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
    m_chartsButton = button(this, tr("Charts"), "chartsButton",
                            tr("Show or hide charts; right-click a chart to hide or enlarge it. The layout is remembered"));
    m_chartsButton->setMenu(new QMenu(m_chartsButton));
    m_followButton = button(this, tr("Follow"), "followButton",
                            tr("Checked: the charts follow new data. A zoom or drag stops that (a view that ends at the newest "
                               "step keeps sliding); click, or double-click a chart, to follow again"));
    m_followButton->setCheckable(true);
    m_followButton->setChecked(true);
    m_stopButton = button(this, tr("Stop"), "stopButton",
                          tr("Stop the run: SIGINT (Ctrl-C) to its launcher, which stops every rank after its step"));
    m_diagnoseButton = button(this, tr("Diagnose"), "diagnoseButton",
                              tr("Ask the ranks where they are: the collective they wait in, the rank that never entered it, "
                                 "each rank's last collective (shardscope runs diagnose)"));
    m_resumeButton = button(this, tr("Resume"), "resumeButton",
                            tr("Go on with this failed or stopped run from its newest checkpoint, as the same run (its next "
                               "attempt): shardscope launch --continue_run"));
    m_tryModelButton = button(this, tr("Try model…"), "tryModelButton",
                              tr("Continue a prompt with the model this run exported, with its tokenizer "
                                 "(shardscope runs generate)"));
    for (QPushButton* b : {m_stopButton, m_diagnoseButton, m_resumeButton, m_tryModelButton})
        b->setEnabled(false);

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_title); // on a line of its own: a long run name never pushes Stop off-screen
    auto* row = new QHBoxLayout;
    row->addWidget(m_status);
    row->addSpacing(12);
    row->addWidget(m_progress);
    row->addStretch(1);
    for (QWidget* w :
         std::initializer_list<QWidget*>{m_smoothingLabel, m_smoothingSlider, m_xAxisBox, m_chartsButton, m_followButton,
                                         m_tryModelButton, m_resumeButton, m_diagnoseButton, m_stopButton})
        row->addWidget(w);
    layout->addLayout(row);

    connect(m_chartsButton->menu(), &QMenu::aboutToShow, this, [this] { emit chartsMenuRequested(m_chartsButton->menu()); });
    connect(m_xAxisBox, &QComboBox::currentIndexChanged, this, &RunHeader::xAxisChosen);
    connect(m_smoothingSlider, &QSlider::valueChanged, this, [this](int value) { emit smoothingChosen(value / 100.0); });
    connect(m_followButton, &QPushButton::clicked, this, &RunHeader::followRequested);
    connect(m_stopButton, &QPushButton::clicked, this, &RunHeader::stopRequested);
    connect(m_diagnoseButton, &QPushButton::clicked, this, &RunHeader::diagnoseRequested);
    connect(m_resumeButton, &QPushButton::clicked, this, [this] {
        m_resumeButton->setEnabled(false); // once: the launcher takes it from here
        emit resumeRequested();
    });
    connect(m_tryModelButton, &QPushButton::clicked, this, &RunHeader::tryModelRequested);
}

QString RunHeader::statusLine() const { return m_status->text(); }

QString RunHeader::progressLine() const { return m_progress->text(); }

void RunHeader::setXAxisIndex(int index) { m_xAxisBox->setCurrentIndex(index); }

void RunHeader::setSmoothing(double weight)
{
    m_smoothingLabel->setText(tr("smoothing %1").arg(weight, 0, 'f', 2));
    const int position = static_cast<int>(std::lround(weight * 100));
    if (m_smoothingSlider->value() != position) {
        const QSignalBlocker blocker(m_smoothingSlider);
        m_smoothingSlider->setValue(position);
    }
}

void RunHeader::setFollowing(bool following) { m_followButton->setChecked(following); }

void RunHeader::setStopEnabled(bool enabled) { m_stopButton->setEnabled(enabled); }

void RunHeader::setDiagnoseEnabled(bool enabled) { m_diagnoseButton->setEnabled(enabled); }

void RunHeader::showRun(const RunInfo& info, std::int64_t lastStep, bool diagnosing, double now)
{
    m_title->setText(elidedName(qs(info.name)));
    m_title->setToolTip(plainToolTip(qs(info.name)));
    m_status->setText(
        QStringLiteral("<b style=\"color:%1\">%2</b> · %3 · %4 · %5 ranks")
            .arg(statusColor(info.status).name(), statusText(info.status),
                 // Recorded text (an imported run's, another machine's run.json): escaped in this rich label.
                 qs(info.distributedType).isEmpty() ? tr("local") : qs(info.distributedType).toHtmlEscaped(),
                 tr("precision %1")
                         .arg(info.mixedPrecision.empty() ? QStringLiteral("?") : qs(info.mixedPrecision).toHtmlEscaped())
                     + (info.precisionEmulated ? tr(" (emulated on this hardware: slower than float32)") : QString()))
            .arg(info.worldSize));
    // What MFU is against, for whoever wonders about the MFU panel's scale.
    m_status->setToolTip(info.mfuPeak.empty() ? QString() : plainToolTip(tr("MFU against %1").arg(qs(info.mfuPeak))));
    // A cluster job: its id, and while it lives what the scheduler says (pending and why, the nodes).
    if (!info.job.empty()) {
        QString job = QStringLiteral(" · ") + qs(info.job).toHtmlEscaped();
        if (!storage::isTerminal(info.status) && !info.statusDetail.empty())
            job += QStringLiteral(" · ") + qs(info.statusDetail).toHtmlEscaped();
        m_status->setText(m_status->text() + job);
    }
    QString progress;
    if (info.startedAt) {
        const double elapsed = info.endedAt.value_or(now) - *info.startedAt;
        progress = tr("elapsed %1").arg(formatDuration(elapsed));
        if (lastStep >= 0) {
            // The recipe's max_steps is the target unless --max_steps overrode it (then the
            // stored recipe is stale and only the step count is shown).
            const bool knownTarget = info.maxSteps && *info.maxSteps >= lastStep;
            progress = (knownTarget ? tr("step %1/%2").arg(lastStep).arg(*info.maxSteps) : tr("step %1").arg(lastStep))
                       + QStringLiteral(" · ") + progress;
            if (!storage::isTerminal(info.status) && info.maxSteps && lastStep > 0 && *info.maxSteps > lastStep) {
                const double perStep = elapsed / static_cast<double>(lastStep);
                progress += tr(" · ETA %1").arg(formatDuration(perStep * static_cast<double>(*info.maxSteps - lastStep)));
            }
        }
    }
    m_progress->setText(progress);
    const bool live = !storage::isTerminal(info.status);
    m_stopButton->setEnabled(live && info.launcher.pid > 0);
    m_diagnoseButton->setEnabled(live && !info.runDir.empty() && !diagnosing);
    // A run of this machine's history that ended short: the launcher checks it has a checkpoint.
    const bool endedShort = storage::isTerminal(info.status) && info.status != storage::RunStatus::Completed;
    m_resumeButton->setEnabled(endedShort && info.runId > 0 && info.job.empty());
    // A completed run has exported its model (where its recipe asked; the command says when not).
    m_tryModelButton->setEnabled(info.status == storage::RunStatus::Completed && !info.runDir.empty() && info.writesText);
}

} // namespace shardscope::ui
