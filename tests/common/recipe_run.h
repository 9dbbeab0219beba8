#pragma once

// Launching a recipe for real from a test: `shardscope launch` on N ranks with the recipe text
// written to a file, waited for, and the run's events read back. The multi-process suites build
// their own views (losses, per-rank steps, memory) from `events`.

#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QList>
#include <QProcess>
#include <QString>
#include <QStringList>
#include <QVector>

#include <algorithm>
#include <cmath>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace shardscope::testing {

inline const QString& shardscopeBinary()
{
    static const QString path = QStringLiteral(SHARDSCOPE_BINARY_DIR "/app/shardscope");
    return path;
}

// `shardscope ARGS` with SHARDSCOPE_HOME=home, waited for: its exit code (-1 when it did not exit
// normally) and its output, stdout and stderr together.
struct CliRun {
    int exitCode = -1;
    QString output;
};
inline CliRun runShardscope(const QString& home, const QStringList& args, int timeoutMs = 60000)
{
    QProcess p;
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("SHARDSCOPE_HOME"), home);
    p.setProcessEnvironment(env);
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(shardscopeBinary(), args);
    p.waitForFinished(timeoutMs);
    return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromUtf8(p.readAll())};
}

// A loopback port free at the time of asking (for launchers that must agree on one in advance).
inline int freeLoopbackPort()
{
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    int port = -1;
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0
        && getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
        port = ntohs(addr.sin_port);
    close(fd);
    return port;
}

// Every event of a run's events.jsonl, in order (none when the file does not exist).
inline QList<QJsonObject> readEvents(const QString& path)
{
    QList<QJsonObject> events;
    QFile file(path);
    if (file.open(QIODevice::ReadOnly))
        while (!file.atEnd())
            events << QJsonDocument::fromJson(file.readLine()).object();
    return events;
}

struct RecipeRun {
    int exitCode = -1; // -1 when the launcher did not exit normally
    QString output; // stdout and stderr together
    QString runDir;
    QList<QJsonObject> events;
};

// Writes `recipe` to <root>/<name>.yaml and runs it as run <name> under <root>/runs:
// shardscope launch --num_processes <ranks> --recipe ... [launchArgs] [-- workerArgs].
inline RecipeRun launchRecipe(const QString& root, const QString& name, const QString& recipe, int ranks,
                              const QStringList& launchArgs = {}, const QStringList& workerArgs = {}, int timeoutMs = 180000)
{
    const QString recipePath = root + "/" + name + ".yaml";
    QFile file(recipePath);
    file.open(QIODevice::WriteOnly);
    file.write(recipe.toUtf8());
    file.close();
    QStringList args{"launch",     "--num_processes", QString::number(ranks), "--recipe", recipePath,
                     "--runs_dir", root + "/runs",    "--run_name",           name};
    args << launchArgs;
    if (!workerArgs.isEmpty())
        args << "--" << workerArgs;
    QProcess process;
    process.setProcessChannelMode(QProcess::MergedChannels);
    process.start(shardscopeBinary(), args);
    process.waitForFinished(timeoutMs);
    RecipeRun run;
    run.exitCode = process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -1;
    run.output = QString::fromUtf8(process.readAll());
    run.runDir = root + "/runs/" + name;
    run.events = readEvents(run.runDir + "/events.jsonl");
    return run;
}

// Rank 0's step losses, in order.
inline QVector<double> rankZeroLosses(const RecipeRun& run)
{
    QVector<double> losses;
    for (const auto& e : run.events)
        if (e["type"].toString() == "step" && e["rank"].toInt() == 0)
            losses.push_back(e["loss"].toDouble());
    return losses;
}

// max |a - b| / max(|b|, 1) over the steps: relative for large values, absolute near zero;
// infinite when the curves have different lengths.
inline double maxRelativeDifference(const QVector<double>& a, const QVector<double>& b)
{
    double worst = a.size() == b.size() ? 0 : INFINITY;
    for (int i = 0; i < std::min(a.size(), b.size()); ++i)
        worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(std::abs(b[i]), 1.0));
    return worst;
}

} // namespace shardscope::testing
