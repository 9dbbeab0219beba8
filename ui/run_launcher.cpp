#include "ui/run_launcher.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QProcess>

namespace shardscope::ui {

QString launcherProgram()
{
    const QString fromEnv = qEnvironmentVariable("SHARDSCOPE_LAUNCHER");
    if (!fromEnv.isEmpty())
        return fromEnv;
    return QDir(QCoreApplication::applicationDirPath()).filePath(QStringLiteral("shardscope"));
}

QStringList launchArguments(const LaunchRequest& request)
{
    QStringList args{QStringLiteral("launch"), QStringLiteral("--num_processes"), QString::number(request.numProcesses),
                     QStringLiteral("--recipe"), QFileInfo(request.recipeFile).absoluteFilePath()};
    if (!request.configFile.isEmpty())
        args << QStringLiteral("--config_file") << QFileInfo(request.configFile).absoluteFilePath();
    if (!request.runName.isEmpty())
        args << QStringLiteral("--run_name") << request.runName;
    if (request.maxSteps)
        args << QStringLiteral("--max_steps") << QString::number(*request.maxSteps);
    if (!request.mixedPrecision.isEmpty())
        args << QStringLiteral("--mixed_precision") << request.mixedPrecision;
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
    QProcess process;
    process.setProgram(program);
    process.setArguments(launchArguments(request));
    // The launcher's own output goes to the run directory's logs; nothing to read here.
    process.setStandardOutputFile(QProcess::nullDevice());
    process.setStandardErrorFile(QProcess::nullDevice());
    result.started = process.startDetached(&result.pid);
    if (!result.started)
        result.error = process.errorString();
    return result;
}

QStringList sweepPrecisionModes(bool includeFp8)
{
    QStringList modes{QStringLiteral("no"), QStringLiteral("fp16"), QStringLiteral("bf16"), QStringLiteral("bf16-pure")};
    if (includeFp8)
        modes << QStringLiteral("fp8");
    return modes;
}

} // namespace shardscope::ui
