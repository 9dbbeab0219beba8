#pragma once

// Runs one of the reference scripts in tests/tools with the project's venv (the Python that has
// the pinned torch, transformers, tokenizers and Accelerate).

#include <QByteArray>
#include <QProcess>
#include <QString>
#include <QStringList>

namespace shardscope::testing {

inline const QString& toolsPython()
{
    static const QString path = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/.venv/bin/python");
    return path;
}

inline const QString& toolsDir()
{
    static const QString path = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/tests/tools/");
    return path;
}

// The script's standard output; empty, with `why` set (the end of its standard error), when it
// did not exit 0 within the time.
inline QByteArray runTool(const QStringList& args, QString& why, int timeoutMs = 600000)
{
    QProcess python;
    python.start(toolsPython(), args);
    if (!python.waitForFinished(timeoutMs) || python.exitStatus() != QProcess::NormalExit || python.exitCode() != 0) {
        why = args.front() + " failed: " + QString::fromUtf8(python.readAllStandardError().right(3000));
        return {};
    }
    why.clear();
    return python.readAllStandardOutput();
}

} // namespace shardscope::testing
