#pragma once

// A SLURM target's batch script before it is submitted: `shardscope launch --dry-run` writes it
// for a launch request (in the background), the dialog shows it, and its Submit submits exactly
// that request (same run name, same files) through the Configure page's launch controller.

#include "ui/run_launcher.h"

#include <QDialog>

class QPlainTextEdit;

namespace shardscope::ui {

struct CommandAnswer;
class LaunchController;
class ShardscopeCommand;

class BatchScriptDialog : public QDialog {
    Q_OBJECT
public:
    // `launcher`: what Submit submits with.
    explicit BatchScriptDialog(LaunchController* launcher, QWidget* parent = nullptr);

    // Asks for `request`'s batch script (with --dry-run); the dialog shows itself with it
    // (scriptShown), or says why not (failed). False, and nothing asked, while one is being written.
    bool showScriptOf(const LaunchRequest& request);
    bool writing() const;
    QString scriptText() const;
    // Submit: the request last asked for, once; the dialog closes. Empty, or why not (also failed).
    QString submit();

signals:
    void scriptShown();
    void failed(const QString& said); // the launcher's words

private:
    void answered(const CommandAnswer& answer);

    LaunchController* m_launcher = nullptr;
    ShardscopeCommand* m_dryRun = nullptr; // `shardscope launch --dry-run`
    QPlainTextEdit* m_view = nullptr;
    LaunchRequest m_request; // what Submit submits (runName empty: none, or submitted)
};

} // namespace shardscope::ui
