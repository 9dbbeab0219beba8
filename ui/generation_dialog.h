#pragma once

// "Try the model": continues a prompt with a finished run's exported model. The text comes from
// `shardscope runs generate --json` (shardscope-worker on the export, with the run's tokenizer),
// run in the background: the workbench never loads torch, and never waits on it.

#include <QDialog>

class QDoubleSpinBox;
class QLabel;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;
class QTextBrowser;

namespace shardscope::ui {

struct CommandAnswer;
class ShardscopeCommand;

class GenerationDialog : public QDialog {
    Q_OBJECT
public:
    explicit GenerationDialog(QWidget* parent = nullptr);

    void setRun(const QString& runDir, const QString& runName); // the run whose export is tried
    void generate(); // as the Generate button
    bool busy() const;
    QString continuation() const { return m_continuation; } // the last text generated, without the prompt
    QString status() const; // the line under the text: what was done, or what went wrong

    QPlainTextEdit* promptEdit() const { return m_prompt; }
    QSpinBox* maxNewTokens() const { return m_maxNewTokens; }
    QDoubleSpinBox* temperature() const { return m_temperature; }
    QSpinBox* seed() const { return m_seed; }

signals:
    void generated(); // a continuation, or an error, is shown

private:
    void finish(const CommandAnswer& answer);

    QString m_runDir;
    QPlainTextEdit* m_prompt = nullptr;
    QSpinBox* m_maxNewTokens = nullptr;
    QDoubleSpinBox* m_temperature = nullptr;
    QSpinBox* m_seed = nullptr;
    QPushButton* m_generate = nullptr;
    QTextBrowser* m_output = nullptr;
    QLabel* m_status = nullptr;
    ShardscopeCommand* m_command = nullptr; // `shardscope runs generate --json`
    QString m_askedPrompt;
    QString m_continuation;
};

} // namespace shardscope::ui
