#include "ui/batch_script_dialog.h"

#include "ui/launch_controller.h"
#include "ui/shardscope_command.h"

#include <QDialogButtonBox>
#include <QFontDatabase>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QVBoxLayout>

namespace shardscope::ui {

BatchScriptDialog::BatchScriptDialog(LaunchController* launcher, QWidget* parent)
    : QDialog(parent), m_launcher(launcher), m_dryRun(new ShardscopeCommand(this))
{
    setObjectName(QStringLiteral("batchScriptDialog"));
    auto* layout = new QVBoxLayout(this);
    m_view = new QPlainTextEdit(this);
    m_view->setObjectName(QStringLiteral("batchScript"));
    m_view->setReadOnly(true);
    m_view->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    layout->addWidget(m_view);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
    auto* submit = buttons->addButton(tr("Submit"), QDialogButtonBox::AcceptRole);
    submit->setObjectName(QStringLiteral("submitJob"));
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(submit, &QPushButton::clicked, this, [this] { this->submit(); });
    layout->addWidget(buttons);
    resize(760, 560);
    connect(m_dryRun, &ShardscopeCommand::finished, this, &BatchScriptDialog::answered);
}

bool BatchScriptDialog::writing() const { return m_dryRun->running(); }

QString BatchScriptDialog::scriptText() const { return m_view->toPlainText(); }

bool BatchScriptDialog::showScriptOf(const LaunchRequest& request)
{
    if (m_dryRun->running())
        return false;
    m_request = request;
    LaunchRequest dryRun = request;
    dryRun.dryRun = true;
    // The script is shown as the launcher writes it, with its notes (stdout and stderr together).
    m_dryRun->start(launchArguments(dryRun), ShardscopeCommand::Output::Text);
    return true;
}

QString BatchScriptDialog::submit()
{
    if (m_request.runName.isEmpty())
        return tr("No batch script is shown.");
    const QString error = m_launcher->start(m_request);
    if (!error.isEmpty()) {
        emit failed(error);
        return error;
    }
    m_request = {};
    accept();
    return {};
}

void BatchScriptDialog::answered(const CommandAnswer& answer)
{
    if (!answer.started) {
        emit failed(tr("Could not run %1: %2").arg(answer.program, answer.error));
        return;
    }
    if (!answer.succeeded()) {
        emit failed(answer.text.trimmed());
        return;
    }
    setWindowTitle(tr("Batch script of %1 (%2)").arg(m_request.runName, m_request.target));
    m_view->setPlainText(answer.text);
    show();
    emit scriptShown();
}

} // namespace shardscope::ui
