#pragma once

// One `shardscope` subcommand run in the background for the workbench, as Hotspot's PerfRecord
// runs perf: every page and dialog that asks the command line something asks through this class,
// the one place the GUI starts a process. The answer comes back on the GUI thread as one value:
// the `--json` document parsed (Output::Json), or the text the command said, for a window that
// shows it as it is (Output::Text), or why it could not be run. The GUI never waits on it.
//
// The executable is launcherProgram() (ui/run_launcher.h): $SHARDSCOPE_LAUNCHER, else the
// `shardscope` beside the workbench.

#include <QByteArray>
#include <QJsonDocument>
#include <QMetaType>
#include <QObject>
#include <QString>
#include <QStringList>

#include <optional>

class QProcess;

namespace shardscope::ui {

// What a `shardscope` subcommand answered.
struct CommandAnswer {
    QString program; // the executable it ran
    QStringList arguments;
    bool started = false; // false: it could not be run; `error` says why (the system's words)
    bool crashed = false; // it ended by a signal
    int exitCode = -1;
    // Output::Json: standard output as a JSON document: the whole of it, else its last line (a
    // command may print a note before); null when it printed none.
    QJsonDocument json;
    // Output::Text: standard output and standard error as the command said them, in order.
    QString text;
    // Output::Json: standard error, trimmed (the command's own words when it fails). Not started:
    // why it could not be.
    QString error;

    bool succeeded() const { return started && !crashed && exitCode == 0; }
};

class ShardscopeCommand : public QObject {
    Q_OBJECT
public:
    enum class Output {
        Json, // standard output is the --json answer; standard error the command's messages
        Text, // standard output and error merged: what it says is shown as it is
    };

    explicit ShardscopeCommand(QObject* parent = nullptr);
    // A command still running is killed; its answer is dropped.
    ~ShardscopeCommand() override;

    // Starts `shardscope arguments...`; false, and nothing started, while one is running. With
    // `input`, that is written to its standard input, which is then closed. The answer comes by
    // `finished`, also when the program cannot be run.
    bool start(const QStringList& arguments, Output output = Output::Json, const std::optional<QByteArray>& input = {});
    bool running() const { return m_process != nullptr; }
    // Drops the answer of the command running (nothing is emitted) and lets it end by itself for up
    // to `msecs` (a change being written finishes), then kills it.
    void dropAnswer(int msecs);

    // `shardscope arguments...` started detached, so that it outlives the workbench (a launch). Its
    // standard output and error go to `outputFile` (truncated first), or nowhere when empty. True
    // when started (*pid set), else false with why in *error.
    static bool startDetached(const QStringList& arguments, const QString& outputFile, qint64* pid, QString* error);

signals:
    void finished(const shardscope::ui::CommandAnswer& answer);

private:
    void finish(bool started);

    QProcess* m_process = nullptr; // the command running; null when none runs
    Output m_output = Output::Json;
};

} // namespace shardscope::ui

Q_DECLARE_METATYPE(shardscope::ui::CommandAnswer)
