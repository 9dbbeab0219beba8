#pragma once

// Starting runs from the GUI: `shardscope launch ...` as a detached process (argument vector, no
// shell), so the run outlives the window; the launcher records it in the history, where the
// Runs and Run pages find it.

#include <QString>
#include <QStringList>

#include <optional>

namespace shardscope::ui {

struct LaunchRequest {
    QString recipeFile; // an engine run's recipe; or, with scriptFile set, unused
    // A user's Accelerate script (`shardscope launch --script`), run by `python`'s accelerate
    // (empty: the launcher's choice, the active virtual environment or python3); workerArgs are
    // the script's arguments.
    QString scriptFile;
    QString python;
    QString configFile; // empty: none
    QString runName; // empty: the launcher's default
    int numProcesses = 2;
    std::optional<int> maxSteps;
    QString mixedPrecision; // empty: the config's
    QStringList workerArgs; // after "--"
    bool profile = false; // an engine run's --profile: trace steps 3-7 (or the recipe's window)
    QStringList tags; // --tag each: the run's tags in the history
    // Where it runs: empty for this machine, "slurm:NAME" for a SLURM cluster profile of
    // $SHARDSCOPE_HOME/clusters.ini (`shardscope launch --target`); dryRun: print the batch
    // script, submit nothing.
    QString target;
    bool dryRun = false;
    // Where the launcher's own output (stdout and stderr) goes, so that a launch refused before
    // any rank started can show its message; empty: discarded.
    QString outputFile;
    // Set: `shardscope launch --continue_run RUN` (the history's run by id or name goes on from its
    // newest checkpoint as its next attempt); the fields above but outputFile are unused then.
    QString continueRun;
};

struct LaunchResult {
    bool started = false;
    qint64 pid = 0;
    QString error;
};

// The launcher's output file for a run started from the GUI (see LaunchRequest::outputFile).
QString launcherOutputFile(const QString& homeDir, const QString& runName);
// What a launcher that exited early said: the lines of its output that name an error (all of it
// when none does), for the window.
QString launcherErrorText(const QString& outputFile);

// A script's arguments typed as on a shell's command line: words split at blanks, '…' and "…"
// quoting, backslash escapes (outside single quotes). No expansion of any kind: nothing runs
// through a shell. An unclosed quote runs to the end.
QStringList splitCommandLine(const QString& text);

// The `shardscope` executable: $SHARDSCOPE_LAUNCHER when set, else the one next to this program.
QString launcherProgram();
QStringList launchArguments(const LaunchRequest& request);
// `shardscope launch` started detached (ShardscopeCommand::startDetached): the run outlives the window.
LaunchResult launchDetached(const LaunchRequest& request);

// The tag a precision sweep's runs share in the history: Runs filters a sweep by it.
QString sweepTag(const QString& sweepName);

// The precision modes a sweep offers: every mode the engine runs. fp8 runs on the CPU too
// (emulated, slowly), so fp8 against bf16 can be compared on any machine.
QStringList sweepPrecisionModes();

} // namespace shardscope::ui
