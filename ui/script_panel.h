#pragma once

// The Configure page's row for "Run my Accelerate script": the script, its arguments (as on a
// command line), the Python whose accelerate runs it, and the exact command the launcher will run,
// checked as the launcher's planScriptRun checks it on this machine.

#include "engine/accelerate/accelerate_config.h"
#include "engine/accelerate/validation.h"

#include <QWidget>

#include <vector>

class QLineEdit;

namespace shardscope::ui {

class ScriptPanel : public QWidget {
    Q_OBJECT
public:
    explicit ScriptPanel(QWidget* parent = nullptr);

    QString script() const;
    QString arguments() const;
    QString python() const; // empty: the active virtual environment, else python3
    void setScript(const QString& path, const QString& arguments = {}, const QString& python = {});
    QString command() const; // as checked last; empty when the launch would be refused

    // The script run's problems with `config` (from `configPath`, empty: unsaved) on `machine`,
    // each also as the text the page shows (`texts`). The Python is not probed here (that runs a
    // process; the launcher does it).
    std::vector<config::Diagnostic> check(const config::AccelerateConfig& config, const QString& configPath,
                                          const config::MachineInfo& machine, QStringList& texts);

signals:
    void edited();

private:
    QLineEdit* m_scriptPath = nullptr;
    QLineEdit* m_scriptArgs = nullptr;
    QLineEdit* m_python = nullptr;
    QLineEdit* m_command = nullptr; // read-only, selectable: the exact command
};

} // namespace shardscope::ui
