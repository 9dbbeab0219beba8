#include "ui/config_wizard.h"

#include <QApplication>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QStackedWidget>
#include <QVBoxLayout>

namespace shardscope::ui {

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

constexpr int kValueIndexRole = Qt::UserRole + 1;

} // namespace

ConfigWizard::ConfigWizard(config::Hardware hardware, QWidget* parent)
    : QWidget(parent), m_hardware(std::move(hardware)), m_session(m_hardware)
{
    auto* layout = new QVBoxLayout(this);
    m_progress = new QLabel(this);
    m_progress->setObjectName(QStringLiteral("wizardProgress"));
    m_preamble = new QLabel(this);
    m_preamble->setWordWrap(true);
    m_preamble->setStyleSheet(QStringLiteral("color: #666;"));
    m_prompt = new QLabel(this);
    m_prompt->setObjectName(QStringLiteral("wizardPrompt"));
    m_prompt->setWordWrap(true);
    m_prompt->setStyleSheet(QStringLiteral("font-weight: bold;"));
    m_inputs = new QStackedWidget(this);
    m_choices = new QListWidget(m_inputs);
    m_choices->setObjectName(QStringLiteral("wizardChoices"));
    m_line = new QLineEdit(m_inputs);
    m_line->setObjectName(QStringLiteral("wizardAnswer"));
    m_done = new QLabel(m_inputs);
    m_done->setObjectName(QStringLiteral("wizardDone"));
    m_done->setWordWrap(true);
    m_done->setAlignment(Qt::AlignTop | Qt::AlignLeft);
    m_inputs->addWidget(m_choices);
    m_inputs->addWidget(m_line);
    m_inputs->addWidget(m_done);
    m_error = new QLabel(this);
    m_error->setObjectName(QStringLiteral("wizardError"));
    m_error->setWordWrap(true);
    m_error->setStyleSheet(QStringLiteral("color: #c62828;"));

    auto* buttons = new QHBoxLayout;
    auto* restartButton = new QPushButton(tr("Start over"), this);
    m_back = new QPushButton(tr("Back"), this);
    m_next = new QPushButton(tr("Next"), this);
    m_next->setObjectName(QStringLiteral("wizardNext"));
    buttons->addWidget(restartButton);
    buttons->addStretch(1);
    buttons->addWidget(m_back);
    buttons->addWidget(m_next);

    layout->addWidget(m_progress);
    layout->addWidget(m_preamble);
    layout->addWidget(m_prompt);
    layout->addWidget(m_inputs, 1);
    layout->addWidget(m_error);
    layout->addLayout(buttons);

    connect(restartButton, &QPushButton::clicked, this, &ConfigWizard::restart);
    connect(m_back, &QPushButton::clicked, this, &ConfigWizard::back);
    connect(m_next, &QPushButton::clicked, this, &ConfigWizard::acceptAnswer);
    // Enter on the list (QAbstractItemView emits activated) or in the line accepts, as in a terminal.
    connect(m_choices, &QListWidget::activated, this, [this] { acceptAnswer(); });
    connect(m_line, &QLineEdit::returnPressed, this, &ConfigWizard::acceptAnswer);
    m_choices->installEventFilter(this);
    showCurrent();
}

bool ConfigWizard::eventFilter(QObject* watched, QEvent* event)
{
    if (watched != m_choices || event->type() != QEvent::KeyPress)
        return QWidget::eventFilter(watched, event);
    const auto* key = static_cast<QKeyEvent*>(event);
    const QString text = key->text();
    if (text.isEmpty() || !text.at(0).isPrint() || (key->modifiers() & (Qt::ControlModifier | Qt::AltModifier))) {
        m_typed.clear();
        return false;
    }
    if (!m_sinceTyped.isValid() || m_sinceTyped.elapsed() > QApplication::keyboardInputInterval())
        m_typed.clear();
    m_sinceTyped.restart();
    m_typed += text;
    // A full label or value selects its row; the list's prefix search still runs for the rest.
    if (selectTypedChoice(m_typed))
        return true;
    return false;
}

bool ConfigWizard::selectTypedChoice(const QString& typed)
{
    const config::Question* q = m_session.current();
    if (!q || q->kind != config::QuestionKind::Choice)
        return false;
    const auto index = config::matchChoice(m_session.choicesFor(*q), typed.toStdString());
    if (!index)
        return false;
    m_choices->setCurrentRow(static_cast<int>(*index));
    return true;
}

QString ConfigWizard::currentQuestionId() const
{
    const config::Question* q = m_session.current();
    return q ? qs(q->id) : QString();
}

void ConfigWizard::restart()
{
    m_steps.clear();
    m_session = config::QuestionnaireSession(m_hardware);
    m_error->clear();
    showCurrent();
}

void ConfigWizard::back()
{
    if (m_steps.empty())
        return;
    m_steps.pop_back();
    const auto steps = m_steps;
    m_steps.clear();
    m_session = config::QuestionnaireSession(m_hardware);
    for (const auto& step : steps)
        apply(step, nullptr);
    m_error->clear();
    showCurrent();
}

bool ConfigWizard::apply(const Step& step, QString* error)
{
    if (step.typedLine) {
        const auto outcome = m_session.answerLine(step.line);
        if (!outcome.accepted) {
            // Accelerate re-asks some questions silently; a form must say why nothing happened.
            if (error)
                *error = !outcome.message.empty() ? qs(outcome.message)
                         : m_session.current() && m_session.current()->kind == config::QuestionKind::Int
                             ? tr("Please enter an integer.")
                             : tr("Please enter a number.");
            return false;
        }
    } else if (auto r = m_session.answer(step.value); !r && !m_session.abortError()) {
        if (error)
            *error = qs(r.error().message);
        return false;
    }
    m_steps.push_back(step);
    return true;
}

void ConfigWizard::acceptAnswer()
{
    const config::Question* q = m_session.current();
    if (!q)
        return;
    Step step;
    if (q->kind == config::QuestionKind::Choice || q->kind == config::QuestionKind::YesNo) {
        const QListWidgetItem* item = m_choices->currentItem();
        if (!item)
            return;
        if (q->kind == config::QuestionKind::YesNo) {
            step.value = config::Value(item->data(kValueIndexRole).toInt() == 1);
        } else {
            const auto choices = m_session.choicesFor(*q);
            step.value = choices.at(static_cast<std::size_t>(item->data(kValueIndexRole).toInt())).value;
        }
    } else {
        step.typedLine = true;
        step.line = m_line->text().toStdString();
    }
    const std::string id = q->id;
    QString error;
    if (!apply(step, &error)) {
        m_error->setText(error);
        return;
    }
    m_error->clear();
    emit answered(qs(id));
    showCurrent();
}

void ConfigWizard::resetTypeAhead()
{
    // Letters typed for the previous question must not prefix this one's type-ahead search (an
    // empty search restarts it; it needs rows, and the caller sets the current row afterwards).
    m_choices->keyboardSearch(QString());
    m_typed.clear();
}

void ConfigWizard::showCurrent()
{
    const config::Question* q = m_session.current();
    m_back->setEnabled(!m_steps.empty());
    m_progress->setText(tr("Question %1").arg(m_steps.size() + 1));
    if (!q) {
        m_preamble->clear();
        m_prompt->clear();
        m_next->setEnabled(false);
        m_inputs->setCurrentWidget(m_done);
        if (m_session.abortError()) {
            m_progress->setText(tr("Stopped"));
            m_done->setText(qs(*m_session.abortError()));
            return;
        }
        m_progress->setText(tr("Done: %1 answers").arg(m_steps.size()));
        QString notes;
        for (const auto& n : m_session.closingNotes())
            notes += QStringLiteral("<p>%1</p>").arg(qs(n).toHtmlEscaped());
        m_done->setText(tr("<p>The questionnaire is complete; the config is in the form and the preview.</p>") + notes);
        if (auto cfg = m_session.result())
            emit configFinished(*cfg);
        else
            m_done->setText(qs(cfg.error().message));
        return;
    }
    m_next->setEnabled(true);
    m_preamble->setText(qs(q->preamble));
    m_preamble->setVisible(!q->preamble.empty());
    // Terminal prompts carry their "[yes/NO]: " hints; the list shows the default instead.
    m_prompt->setText(qs(m_session.promptFor(*q)).trimmed());
    m_choices->clear();
    switch (q->kind) {
    case config::QuestionKind::Choice: {
        const auto choices = m_session.choicesFor(*q);
        for (std::size_t i = 0; i < choices.size(); ++i) {
            auto* item = new QListWidgetItem(qs(choices[i].label), m_choices);
            item->setData(kValueIndexRole, static_cast<int>(i));
            item->setToolTip(qs(choices[i].value.pyStr()));
        }
        resetTypeAhead();
        m_choices->setCurrentRow(std::min(q->defaultChoice, m_choices->count() - 1));
        m_inputs->setCurrentWidget(m_choices);
        m_choices->setFocus();
        break;
    }
    case config::QuestionKind::YesNo: {
        for (int yes : {1, 0}) {
            auto* item = new QListWidgetItem(yes ? tr("Yes") : tr("No"), m_choices);
            item->setData(kValueIndexRole, yes);
        }
        resetTypeAhead();
        m_choices->setCurrentRow(q->defaultValue.truthy() ? 0 : 1);
        m_inputs->setCurrentWidget(m_choices);
        m_choices->setFocus();
        break;
    }
    case config::QuestionKind::Int:
    case config::QuestionKind::Float:
    case config::QuestionKind::Text:
        m_line->clear();
        m_line->setPlaceholderText(q->defaultValue.isNull() ? QString()
                                                            : tr("Enter for the default: %1").arg(qs(q->defaultValue.pyStr())));
        m_inputs->setCurrentWidget(m_line);
        m_line->setFocus();
        break;
    }
}

} // namespace shardscope::ui
