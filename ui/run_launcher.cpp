#include "ui/run_launcher.h"

#include "ui/shardscope_command.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>

namespace shardscope::ui {

QString launcherProgram()
{
    const QString fromEnv = qEnvironmentVariable("SHARDSCOPE_LAUNCHER");
    if (!fromEnv.isEmpty())
        return fromEnv;
    return QDir(QCoreApplication::applicationDirPath()).filePath(QStringLiteral("shardscope"));
}

QStringList splitCommandLine(const QString& text)
{
    QStringList words;
    QString word;
    bool inWord = false;
    QChar quote; // '\'' or '"' while inside quotes
    for (qsizetype i = 0; i < text.size(); ++i) {
        const QChar c = text.at(i);
        if (quote.isNull() && c.isSpace()) {
            if (inWord)
                words << word;
            word.clear();
            inWord = false;
            continue;
        }
        inWord = true;
        if (c == QLatin1Char('\\') && quote != QLatin1Char('\'') && i + 1 < text.size()) {
            word += text.at(++i);
        } else if (quote.isNull() && (c == QLatin1Char('\'') || c == QLatin1Char('"'))) {
            quote = c;
        } else if (!quote.isNull() && c == quote) {
            quote = QChar();
        } else {
            word += c;
        }
    }
    if (inWord)
        words << word;
    return words;
}

QString sweepTag(const QString& sweepName) { return QStringLiteral("sweep:") + sweepName; }

QStringList launchArguments(const LaunchRequest& request)
{
    if (!request.continueRun.isEmpty())
        return {QStringLiteral("launch"), QStringLiteral("--continue_run"), request.continueRun};
    QStringList args{QStringLiteral("launch"), QStringLiteral("--num_processes"), QString::number(request.numProcesses)};
    if (request.scriptFile.isEmpty()) {
        args << QStringLiteral("--recipe") << QFileInfo(request.recipeFile).absoluteFilePath();
    } else {
        args << QStringLiteral("--script") << QFileInfo(request.scriptFile).absoluteFilePath();
        if (!request.python.isEmpty())
            args << QStringLiteral("--python") << request.python;
    }
    if (!request.configFile.isEmpty())
        args << QStringLiteral("--config_file") << QFileInfo(request.configFile).absoluteFilePath();
    if (!request.runName.isEmpty())
        args << QStringLiteral("--run_name") << request.runName;
    if (request.maxSteps)
        args << QStringLiteral("--max_steps") << QString::number(*request.maxSteps);
    if (!request.mixedPrecision.isEmpty())
        args << QStringLiteral("--mixed_precision") << request.mixedPrecision;
    if (request.profile)
        args << QStringLiteral("--profile");
    for (const auto& tag : request.tags)
        args << QStringLiteral("--tag") << tag;
    if (!request.target.isEmpty())
        args << QStringLiteral("--target") << request.target;
    if (request.dryRun)
        args << QStringLiteral("--dry-run");
    if (!request.workerArgs.isEmpty())
        args << QStringLiteral("--") << request.workerArgs;
    return args;
}

LaunchResult launchDetached(const LaunchRequest& request)
{
    LaunchResult result;
    const QString program = launcherProgram();
    if (!QFileInfo(program).isExecutable()) {
        result.error = QCoreApplication::translate("RunLauncher", "No launcher at %1 (set SHARDSCOPE_LAUNCHER).").arg(program);
        return result;
    }
    // The ranks' output goes to the run directory's logs; the launcher's own to outputFile, read
    // back when it stops before the run appears in the history.
    if (!request.outputFile.isEmpty())
        QDir().mkpath(QFileInfo(request.outputFile).absolutePath());
    result.started = ShardscopeCommand::startDetached(launchArguments(request), request.outputFile, &result.pid, &result.error);
    return result;
}

QString launcherOutputFile(const QString& homeDir, const QString& runName)
{
    return QDir(homeDir).filePath(QStringLiteral("launches/%1.log").arg(runName));
}

QString launcherErrorText(const QString& outputFile)
{
    QFile file(outputFile);
    if (!file.open(QIODevice::ReadOnly))
        return {};
    const QString text = QString::fromUtf8(file.read(64 * 1024)).trimmed();
    QStringList errors;
    for (const QString& line : text.split(QLatin1Char('\n')))
        if (line.contains(QLatin1String("error")))
            errors << line.trimmed();
    return errors.isEmpty() ? text : errors.join(QLatin1Char('\n'));
}

QStringList sweepPrecisionModes()
{
    return {QStringLiteral("no"), QStringLiteral("fp16"), QStringLiteral("bf16"), QStringLiteral("bf16-pure"),
            QStringLiteral("fp8")};
}

} // namespace shardscope::ui
