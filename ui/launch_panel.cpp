#include "ui/launch_panel.h"

#include "ui/diagnostic_model.h"
#include "ui/format.h"
#include "ui/script_panel.h"
#include "ui/target_choice.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QListView>
#include <QPushButton>
#include <QVBoxLayout>

namespace shardscope::ui {

LaunchPanel::LaunchPanel(QWidget* parent) : QWidget(parent)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    m_diagnostics = new DiagnosticModel(this);
    m_diagnosticView = new QListView(this);
    m_diagnosticView->setObjectName(QStringLiteral("diagnostics"));
    m_diagnosticView->setModel(m_diagnostics);
    m_diagnosticView->setWordWrap(true);
    m_problems = new QLabel(this);
    m_problems->setObjectName(QStringLiteral("problemsSummary"));
    layout->addWidget(m_problems);
    layout->addWidget(m_diagnosticView, 1);
    buildLaunchRow(); // created here: the focus goes from the problems to Launch's row, then to the fix
    m_fixButton = new QPushButton(this);
    m_fixButton->setObjectName(QStringLiteral("applyFix"));
    m_fixButton->setToolTip(tr("Change the config so that it runs on this machine (an edit: save it to keep it)"));
    m_fixButton->setVisible(false);
    auto* fixRow = new QHBoxLayout;
    fixRow->addWidget(m_fixButton);
    fixRow->addStretch(1);
    layout->addLayout(fixRow);
    m_scriptPanel = new ScriptPanel(this);
    m_scriptPanel->setVisible(false);
    layout->addWidget(m_scriptPanel);
    auto* launchRow = new QHBoxLayout;
    launchRow->addWidget(m_message, 1);
    for (QWidget* w :
         std::initializer_list<QWidget*>{m_runKind, m_profile, m_target, m_batchScriptButton, m_tuneButton, m_launch})
        launchRow->addWidget(w);
    layout->addLayout(launchRow);

    connect(m_fixButton, &QPushButton::clicked, this, &LaunchPanel::fixRequested);
    connect(m_scriptPanel, &ScriptPanel::edited, this, &LaunchPanel::runChanged);
    connect(m_runKind, &QComboBox::currentIndexChanged, this, [this](int index) {
        m_scriptPanel->setVisible(index == 1);
        m_profile->setVisible(index == 0 && m_target->target().isEmpty()); // a script profiles itself (docs/SCRIPTS.md)
        emit runChanged();
    });
    connect(m_diagnosticView, &QListView::clicked, this,
            [this](const QModelIndex& index) { emit diagnosticChosen(index.data(DiagnosticModel::KeyPathRole).toString()); });
    connect(m_diagnosticView, &QListView::activated, this,
            [this](const QModelIndex& index) { emit diagnosticChosen(index.data(DiagnosticModel::KeyPathRole).toString()); });
}

// The message, Launch, what runs, Profile, the target, Batch script… and Tune….
void LaunchPanel::buildLaunchRow()
{
    m_message = new QLabel(this);
    m_message->setObjectName(QStringLiteral("configureMessage"));
    m_message->setWordWrap(true);
    // A message may hold a long path (a word that cannot wrap): it must not widen the window past
    // the screen and push Launch off it (#45 point 1); it wraps, or is cut, in the room there is.
    m_message->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    m_message->setMinimumWidth(200);
    m_launch = new QPushButton(tr("Launch"), this);
    m_launch->setObjectName(QStringLiteral("launchButton"));
    m_launch->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Return));
    m_launch->setToolTip(tr("Start `shardscope launch` with the config and the recipe as shown (Ctrl+Enter)"));
    m_runKind = new QComboBox(this);
    m_runKind->setObjectName(QStringLiteral("runKind"));
    m_runKind->addItem(tr("Run the recipe (engine)"));
    m_runKind->addItem(tr("Run my Accelerate script"));
    m_runKind->setToolTip(tr("What Launch starts: the recipe in Shardscope's engine, or your own Accelerate or Trainer "
                             "script through the real `accelerate launch`, with this config"));
    m_profile = new QCheckBox(tr("Profile"), this);
    m_profile->setObjectName(QStringLiteral("profileRun"));
    m_profile->setToolTip(tr("Trace steps 3-7 (or the recipe's profile window) for the Trace page: "
                             "`shardscope launch --profile`"));
    m_target = new TargetChoice(this);
    m_batchScriptButton = new QPushButton(tr("Batch script…"), this);
    m_batchScriptButton->setObjectName(QStringLiteral("batchScriptButton"));
    m_batchScriptButton->setToolTip(tr("Show the sbatch script Launch would submit, and submit it from there"));
    m_batchScriptButton->setVisible(false);
    m_tuneButton = new QPushButton(tr("Tune…"), this);
    m_tuneButton->setObjectName(QStringLiteral("tuneButton"));
    m_tuneButton->setToolTip(tr("Find the fastest sharding, micro-batch, checkpointing and offload of this recipe that fit a "
                                "memory budget per rank: short trials, one at a time (`shardscope tune`)"));
    connect(m_target, &TargetChoice::targetChosen, this, &LaunchPanel::targetChanged);
    connect(m_target, &TargetChoice::targetsLoaded, this, [this] {
        m_batchScriptButton->setVisible(!m_target->target().isEmpty());
        emit targetsLoaded();
    });
    connect(m_batchScriptButton, &QPushButton::clicked, this, &LaunchPanel::batchScriptRequested);
    connect(m_tuneButton, &QPushButton::clicked, this, &LaunchPanel::tuneRequested);
    connect(m_launch, &QPushButton::clicked, this, &LaunchPanel::launchRequested);
}

void LaunchPanel::targetChanged()
{
    const bool cluster = !m_target->target().isEmpty();
    m_batchScriptButton->setVisible(cluster);
    m_profile->setVisible(!cluster && !scriptMode()); // a job does not profile yet
    emit runChanged(); // checked again: a cluster target gives each node its rendezvous
}

bool LaunchPanel::scriptMode() const { return m_runKind->currentIndex() == 1; }

void LaunchPanel::setScriptMode(bool script) { m_runKind->setCurrentIndex(script ? 1 : 0); }

bool LaunchPanel::profile() const { return m_profile->isChecked(); }

bool LaunchPanel::canLaunch() const { return m_launch->isEnabled(); }

void LaunchPanel::fillRequest(LaunchRequest& request) const
{
    request.target = m_target->target();
    if (scriptMode()) {
        request.scriptFile = m_scriptPanel->script();
        request.workerArgs = splitCommandLine(m_scriptPanel->arguments());
        request.python = m_scriptPanel->python();
    } else {
        request.profile = m_profile->isChecked() && request.target.isEmpty();
    }
}

void LaunchPanel::showMessage(const QString& text, bool error)
{
    m_message->setStyleSheet(error ? QStringLiteral("color: #c62828;") : QString());
    m_message->setText(text);
}

QString LaunchPanel::message() const { return m_message->text(); }

void LaunchPanel::showCheck(const ConfigureCheck& check, const QString& openError)
{
    m_fixButton->setVisible(check.fix.has_value());
    if (check.fix)
        m_fixButton->setText(tr("Fix: %1").arg(qs(check.fix->label)));
    m_diagnostics->setDiagnostics(check.problems, check.texts);
    const int errors = m_diagnostics->errorCount();
    const int warnings = m_diagnostics->rowCount() - errors;
    m_problems->setText(
        (openError.isEmpty() ? QString()
                             : QStringLiteral("<span style=\"color:#c62828\">%1</span> ").arg(openError.toHtmlEscaped()))
        + (m_diagnostics->rowCount() == 0
               ? tr("<b>Problems:</b> none; the config on screen is valid.")
               : tr("<b>Problems:</b> %1 error(s), %2 warning(s) (click one to go to its field)").arg(errors).arg(warnings)));
    m_launch->setEnabled(errors == 0);
    m_launch->setToolTip(
        errors == 0 ? (scriptMode() ? tr("Start your script with `shardscope launch --script` and the config as shown "
                                         "(Ctrl+Enter); unsaved edits go to a copy for the run, your files stay as they are")
                                    : tr("Start `shardscope launch` with the config and the recipe as shown (Ctrl+Enter); "
                                         "unsaved edits go to a copy for the run, your files stay as they are"))
                    : tr("%n error(s) to fix first", nullptr, errors));
}

} // namespace shardscope::ui
