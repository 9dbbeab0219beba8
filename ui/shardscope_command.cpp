#include "ui/shardscope_command.h"

#include "ui/run_launcher.h"

#include <QProcess>

namespace shardscope::ui {

namespace {

// The --json answer: the whole of standard output, else its last line (a note printed before it).
QJsonDocument parseAnswer(const QByteArray& out)
{
    QJsonParseError error{};
    const QJsonDocument whole = QJsonDocument::fromJson(out, &error);
    if (error.error == QJsonParseError::NoError)
        return whole;
    const QByteArray trimmed = out.trimmed();
    return QJsonDocument::fromJson(trimmed.mid(trimmed.lastIndexOf('\n') + 1));
}

} // namespace

ShardscopeCommand::ShardscopeCommand(QObject* parent) : QObject(parent) { }

ShardscopeCommand::~ShardscopeCommand()
{
    if (!m_process)
        return;
    m_process->disconnect(this);
    m_process->kill();
    m_process->waitForFinished(5000);
}

bool ShardscopeCommand::start(const QStringList& arguments, Output output, const std::optional<QByteArray>& input)
{
    if (m_process)
        return false;
    m_output = output;
    auto* process = new QProcess(this);
    m_process = process;
    process->setProcessChannelMode(output == Output::Text ? QProcess::MergedChannels : QProcess::SeparateChannels);
    connect(process, &QProcess::finished, this, [this] { finish(true); });
    // A program that cannot start never finishes: its answer says why.
    connect(process, &QProcess::errorOccurred, this, [this](QProcess::ProcessError error) {
        if (error == QProcess::FailedToStart)
            finish(false);
    });
    if (input)
        connect(process, &QProcess::started, this, [process, data = *input] {
            process->write(data);
            process->closeWriteChannel();
        });
    process->start(launcherProgram(), arguments);
    return true;
}

void ShardscopeCommand::finish(bool started)
{
    QProcess* process = m_process;
    m_process = nullptr; // a receiver may start the next one
    process->disconnect(this);
    process->deleteLater();
    CommandAnswer answer;
    answer.program = process->program();
    answer.arguments = process->arguments();
    answer.started = started;
    if (!started) {
        answer.error = process->errorString();
    } else {
        answer.crashed = process->exitStatus() == QProcess::CrashExit;
        answer.exitCode = process->exitCode();
        if (m_output == Output::Text) {
            answer.text = QString::fromUtf8(process->readAll());
        } else {
            answer.json = parseAnswer(process->readAllStandardOutput());
            answer.error = QString::fromUtf8(process->readAllStandardError()).trimmed();
        }
    }
    emit finished(answer);
}

void ShardscopeCommand::dropAnswer(int msecs)
{
    if (!m_process)
        return;
    QProcess* process = m_process;
    m_process = nullptr;
    process->disconnect(this);
    if (!process->waitForFinished(msecs)) {
        process->kill();
        process->waitForFinished(5000);
    }
    delete process;
}

bool ShardscopeCommand::startDetached(const QStringList& arguments, const QString& outputFile, qint64* pid, QString* error)
{
    QProcess process;
    process.setProgram(launcherProgram());
    process.setArguments(arguments);
    if (outputFile.isEmpty()) {
        process.setStandardOutputFile(QProcess::nullDevice());
        process.setStandardErrorFile(QProcess::nullDevice());
    } else {
        process.setStandardOutputFile(outputFile, QIODevice::Truncate);
        process.setStandardErrorFile(outputFile, QIODevice::Append);
    }
    if (process.startDetached(pid))
        return true;
    if (error)
        *error = process.errorString();
    return false;
}

} // namespace shardscope::ui
