#include "ui/generation_dialog.h"

#include "ui/shardscope_command.h"

#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QTextBrowser>
#include <QVBoxLayout>

namespace shardscope::ui {

GenerationDialog::GenerationDialog(QWidget* parent) : QDialog(parent)
{
    setObjectName(QStringLiteral("generationDialog"));
    auto* layout = new QVBoxLayout(this);
    m_prompt = new QPlainTextEdit(this);
    m_prompt->setObjectName(QStringLiteral("generationPrompt"));
    m_prompt->setPlaceholderText(tr("Text for the model to continue"));
    m_prompt->setPlainText(tr("This program is free software"));
    m_prompt->setMaximumHeight(80);
    layout->addWidget(m_prompt);

    auto* form = new QFormLayout;
    m_maxNewTokens = new QSpinBox(this);
    m_maxNewTokens->setRange(1, 4096);
    m_maxNewTokens->setValue(32);
    m_temperature = new QDoubleSpinBox(this);
    m_temperature->setRange(0, 100);
    m_temperature->setSingleStep(0.1);
    m_temperature->setDecimals(2);
    m_temperature->setSpecialValueText(tr("0 (greedy: the most likely token each time)"));
    m_seed = new QSpinBox(this);
    m_seed->setRange(0, 1 << 30);
    m_seed->setToolTip(tr("With a temperature above 0: the same seed gives the same text"));
    form->addRow(tr("New tokens at most"), m_maxNewTokens);
    form->addRow(tr("Temperature"), m_temperature);
    form->addRow(tr("Seed"), m_seed);
    layout->addLayout(form);

    m_generate = new QPushButton(tr("Generate"), this);
    m_generate->setObjectName(QStringLiteral("generateButton"));
    m_generate->setDefault(true);
    layout->addWidget(m_generate, 0, Qt::AlignLeft);
    m_output = new QTextBrowser(this);
    m_output->setObjectName(QStringLiteral("generationOutput"));
    layout->addWidget(m_output, 1);
    m_status = new QLabel(this);
    m_status->setWordWrap(true);
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(m_status);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    layout->addWidget(buttons);
    connect(m_generate, &QPushButton::clicked, this, &GenerationDialog::generate);
    m_command = new ShardscopeCommand(this);
    connect(m_command, &ShardscopeCommand::finished, this, &GenerationDialog::finish);
    resize(560, 420);
}

void GenerationDialog::setRun(const QString& runDir, const QString& runName)
{
    m_runDir = runDir;
    setWindowTitle(tr("Try the model of %1").arg(runName));
    m_output->clear();
    m_continuation.clear();
    m_status->setText(tr("Continues the prompt with the model the run exported, with its tokenizer."));
}

QString GenerationDialog::status() const { return m_status->text(); }

bool GenerationDialog::busy() const { return m_command->running(); }

void GenerationDialog::generate()
{
    if (m_command->running() || m_runDir.isEmpty())
        return;
    m_askedPrompt = m_prompt->toPlainText();
    m_generate->setEnabled(false);
    m_status->setText(tr("Generating…"));
    m_command->start({QStringLiteral("runs"), QStringLiteral("generate"), m_runDir, QStringLiteral("--prompt"), m_askedPrompt,
                      QStringLiteral("--max_new_tokens"), QString::number(m_maxNewTokens->value()),
                      QStringLiteral("--temperature"), QString::number(m_temperature->value()), QStringLiteral("--seed"),
                      QString::number(m_seed->value()), QStringLiteral("--json")});
}

void GenerationDialog::finish(const CommandAnswer& answer)
{
    m_generate->setEnabled(true);
    const QJsonObject reply = answer.json.object();
    if (!answer.started) {
        m_status->setText(tr("Could not run %1: %2").arg(answer.program, answer.error));
    } else if (answer.exitCode != 0 || !reply.contains(QLatin1String("text"))) {
        // The command's own words: what is missing and what to do (no export yet, a script run, ...).
        m_status->setText(answer.error.isEmpty() ? tr("shardscope runs generate failed (exit %1)").arg(answer.exitCode)
                                                 : answer.error);
    } else {
        m_continuation = reply[QLatin1String("text")].toString();
        m_output->setHtml(QStringLiteral("<p style='white-space: pre-wrap'>%1<b>%2</b></p>")
                              .arg(m_askedPrompt.toHtmlEscaped(), m_continuation.toHtmlEscaped()));
        const int tokens = static_cast<int>(reply[QLatin1String("ids")].toArray().size());
        m_status->setText(reply[QLatin1String("ended_at_eos")].toBool()
                              ? tr("%n token(s), ending with the end-of-text token (the continuation in bold).", nullptr, tokens)
                              : tr("%n token(s): the most asked for (the continuation in bold).", nullptr, tokens));
    }
    emit generated();
}

} // namespace shardscope::ui
