#pragma once

// The GUI front end of `accelerate config`: the same question tree and QuestionnaireSession as
// the terminal front end (engine/accelerate/questionnaire_terminal.h), one question at a time. Menus
// and yes/no questions are lists (arrows, a typed prefix, or a choice's label or value typed in
// full, Enter accepts); numbers and text are
// typed and parsed by the session exactly as the terminal parses a line, so the same answers
// write the same file.

#include "engine/accelerate/accelerate_config.h"
#include "engine/accelerate/questionnaire.h"

#include <QElapsedTimer>
#include <QWidget>

#include <string>
#include <vector>

class QLabel;
class QLineEdit;
class QListWidget;
class QPushButton;
class QStackedWidget;

namespace shardscope::ui {

class ConfigWizard : public QWidget {
    Q_OBJECT
public:
    explicit ConfigWizard(config::Hardware hardware = {}, QWidget* parent = nullptr);

    const config::QuestionnaireSession& session() const { return m_session; }
    // The id of the question shown, empty when finished or aborted.
    QString currentQuestionId() const;

public slots:
    void restart();
    void back();
    // Accepts the answer in the visible input (the selected list item, or the typed line).
    void acceptAnswer();

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

signals:
    void configFinished(const shardscope::config::AccelerateConfig& config);
    void answered(const QString& questionId);

private:
    // One accepted answer, replayed to go back (the session itself only moves forward).
    struct Step {
        bool typedLine = false;
        std::string line;
        config::Value value;
    };
    bool apply(const Step& step, QString* error);
    void showCurrent();
    void resetTypeAhead();
    // Typed text in a menu: the choice whose label or value it spells (as the terminal reads a
    // typed answer) is selected; otherwise the list's own prefix search goes on.
    bool selectTypedChoice(const QString& typed);

    config::Hardware m_hardware;
    config::QuestionnaireSession m_session;
    std::vector<Step> m_steps;
    QLabel* m_progress = nullptr;
    QLabel* m_preamble = nullptr;
    QLabel* m_prompt = nullptr;
    QLabel* m_error = nullptr;
    QStackedWidget* m_inputs = nullptr;
    QListWidget* m_choices = nullptr;
    QLineEdit* m_line = nullptr;
    QLabel* m_done = nullptr;
    QPushButton* m_back = nullptr;
    QPushButton* m_next = nullptr;
    QString m_typed; // what was typed into the menu since the last pause
    QElapsedTimer m_sinceTyped; // a pause restarts it, as the list's own type-ahead does
};

} // namespace shardscope::ui
