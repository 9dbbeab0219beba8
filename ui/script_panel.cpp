#include "ui/script_panel.h"

#include "engine/plan/script_plan.h"
#include "ui/format.h"
#include "ui/run_launcher.h"

#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QVBoxLayout>

namespace shardscope::ui {

ScriptPanel::ScriptPanel(QWidget* parent) : QWidget(parent)
{
    auto* outer = new QVBoxLayout(this);
    outer->setContentsMargins(0, 0, 0, 0);
    auto* row = new QHBoxLayout;
    m_scriptPath = new QLineEdit(this);
    m_scriptPath->setObjectName(QStringLiteral("scriptPath"));
    m_scriptPath->setPlaceholderText(tr("your training script (train.py)"));
    auto* browse = new QPushButton(tr("Script…"), this);
    connect(browse, &QPushButton::clicked, this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Accelerate script"), QFileInfo(m_scriptPath->text()).path(),
                                                          tr("Python scripts (*.py);;All files (*)"));
        if (!path.isEmpty())
            m_scriptPath->setText(path);
    });
    m_scriptArgs = new QLineEdit(this);
    m_scriptArgs->setObjectName(QStringLiteral("scriptArgs"));
    m_scriptArgs->setPlaceholderText(tr("its arguments, as on a command line"));
    m_python = new QLineEdit(this);
    m_python->setObjectName(QStringLiteral("scriptPython"));
    m_python->setPlaceholderText(tr("Python (default: the active environment, else python3, else Shardscope's own)"));
    m_command = new QLineEdit(this);
    m_command->setObjectName(QStringLiteral("scriptCommand"));
    m_command->setReadOnly(true); // selectable and copyable
    m_command->setToolTip(tr("The command the launcher runs (also kept as command.sh in the run directory)"));
    row->addWidget(new QLabel(tr("Script:"), this));
    row->addWidget(m_scriptPath, 2);
    row->addWidget(browse);
    row->addWidget(m_scriptArgs, 2);
    row->addWidget(m_python, 1);
    outer->addLayout(row);
    outer->addWidget(m_command);
    for (auto* edit : {m_scriptPath, m_scriptArgs, m_python})
        connect(edit, &QLineEdit::textChanged, this, &ScriptPanel::edited);
}

QString ScriptPanel::script() const { return m_scriptPath->text(); }

QString ScriptPanel::arguments() const { return m_scriptArgs->text(); }

QString ScriptPanel::python() const { return m_python->text(); }

QString ScriptPanel::command() const { return m_command->text(); }

void ScriptPanel::setScript(const QString& path, const QString& arguments, const QString& python)
{
    const QSignalBlocker blockPath(m_scriptPath), blockArgs(m_scriptArgs), blockPython(m_python);
    m_scriptPath->setText(path);
    m_scriptArgs->setText(arguments);
    m_python->setText(python);
    emit edited();
}

std::vector<config::Diagnostic> ScriptPanel::check(const config::AccelerateConfig& cfg, const QString& configPath,
                                                   const config::MachineInfo& machine, QStringList& texts)
{
    config::ScriptInputs inputs;
    inputs.config = cfg;
    inputs.configPath = configPath.isEmpty() ? std::string("config.yaml") : configPath.toStdString();
    inputs.configBaseDir = configPath.isEmpty() ? std::string() : QFileInfo(configPath).absolutePath().toStdString();
    inputs.python = m_python->text().isEmpty() ? std::string("python") : m_python->text().toStdString();
    inputs.script = m_scriptPath->text().isEmpty() ? std::string()
                                                   : QFileInfo(m_scriptPath->text()).absoluteFilePath().toStdString();
    for (const QString& arg : splitCommandLine(m_scriptArgs->text()))
        inputs.scriptArgs.push_back(arg.toStdString());
    inputs.torchrunLogDir = "<run>/logs/torchrun";
    inputs.machine = machine;
    auto planned = config::planScriptRun(inputs);
    for (const auto& d : planned.problems)
        texts << (d.keyPath.rfind("--", 0) == 0
                      ? qs(std::string(d.severity == config::Severity::Error ? "error: " : "warning: ") + d.message)
                      : qs(config::formatDiagnostic(cfg, d)));
    m_command->setText(planned.plan ? qs(planned.plan->commandLine()) : QString());
    return planned.problems;
}

} // namespace shardscope::ui
