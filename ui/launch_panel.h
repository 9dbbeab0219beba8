#pragma once

// The bottom of the Configure page: the problems the launcher would raise (a click goes to the
// field) with the one-click fix, the script's row ("Run my Accelerate script"), the message line,
// and the launch row: what runs (the recipe in the engine, or the user's script), Profile, where
// it runs (the target choice), Batch script… (for a cluster target), Tune… and Launch, enabled
// while no error remains. What the buttons do is the page's (the signals).

#include "ui/configure_check.h"
#include "ui/run_launcher.h"

#include <QWidget>

class QCheckBox;
class QComboBox;
class QLabel;
class QListView;
class QPushButton;

namespace shardscope::ui {

class DiagnosticModel;
class ScriptPanel;
class TargetChoice;

class LaunchPanel : public QWidget {
    Q_OBJECT
public:
    explicit LaunchPanel(QWidget* parent = nullptr);

    DiagnosticModel* diagnostics() const { return m_diagnostics; }
    ScriptPanel* scriptPanel() const { return m_scriptPanel; }
    TargetChoice* targetChoice() const { return m_target; }
    bool scriptMode() const; // "Run my Accelerate script" chosen
    void setScriptMode(bool script);
    bool profile() const; // Profile checked
    bool canLaunch() const;
    // What Launch starts as the panel shows it: the target; a script run's script, its arguments
    // and Python; an engine run's Profile (on this machine only).
    void fillRequest(LaunchRequest& request) const;

    void showMessage(const QString& text, bool error);
    QString message() const;
    // What the check found: the problems and their summary (after `openError`, a config that did
    // not open), the fix offered, and Launch enabled while no error remains.
    void showCheck(const ConfigureCheck& check, const QString& openError);

signals:
    void launchRequested();
    void fixRequested();
    void diagnosticChosen(const QString& keyPath); // clicked or activated: go to its field
    void runChanged(); // what Launch runs changed: the run kind, the script's row, or the target
    void batchScriptRequested();
    void tuneRequested();
    void targetsLoaded(); // the target choice listed the cluster profiles again

private:
    void buildLaunchRow();
    void targetChanged(); // Batch script… and Profile apply to where Launch runs

    DiagnosticModel* m_diagnostics = nullptr;
    QListView* m_diagnosticView = nullptr;
    QLabel* m_problems = nullptr;
    QLabel* m_message = nullptr;
    QPushButton* m_launch = nullptr;
    QPushButton* m_fixButton = nullptr; // "Fix: …", shown when a problem has a one-click fix
    QComboBox* m_runKind = nullptr; // "Engine recipe" / "Accelerate script"
    QCheckBox* m_profile = nullptr; // an engine run's --profile
    ScriptPanel* m_scriptPanel = nullptr;
    TargetChoice* m_target = nullptr; // this machine, or a SLURM profile; last, the profiles' editor
    QPushButton* m_batchScriptButton = nullptr; // shown for a SLURM target
    QPushButton* m_tuneButton = nullptr;
};

} // namespace shardscope::ui
