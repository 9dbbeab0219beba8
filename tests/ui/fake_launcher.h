#pragma once

// A shell script standing in for `shardscope` (its body after "#!/bin/sh"), made the program the
// workbench starts (SHARDSCOPE_LAUNCHER) while the object lives; the variable is put back as it
// was when it goes, pass or fail. "$ARGS" in the body names a file the script may write its
// arguments to (argsFile, one a line).

#include "tests/common/files.h"

#include <QByteArray>
#include <QDir>
#include <QFile>
#include <QString>
#include <QStringList>

namespace shardscope::testing {

class FakeLauncher {
public:
    FakeLauncher(const QString& dir, const QByteArray& body, const QString& name = QStringLiteral("fake-shardscope"))
        : m_path(QDir(dir).filePath(name)), m_argsFile(m_path + QStringLiteral(".args")),
          m_before(qgetenv("SHARDSCOPE_LAUNCHER")), m_wasSet(qEnvironmentVariableIsSet("SHARDSCOPE_LAUNCHER"))
    {
        QByteArray script = "#!/bin/sh\nARGS='" + m_argsFile.toUtf8() + "'\n" + body;
        writeFile(m_path, script);
        QFile::setPermissions(m_path, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
        qputenv("SHARDSCOPE_LAUNCHER", m_path.toUtf8());
    }
    ~FakeLauncher()
    {
        if (m_wasSet)
            qputenv("SHARDSCOPE_LAUNCHER", m_before);
        else
            qunsetenv("SHARDSCOPE_LAUNCHER");
    }
    FakeLauncher(const FakeLauncher&) = delete;
    FakeLauncher& operator=(const FakeLauncher&) = delete;

    QString path() const { return m_path; }
    QString argsFile() const { return m_argsFile; }
    // What the script wrote to $ARGS with `printf '%s\n' "$@" > "$ARGS"`: its arguments.
    QStringList arguments() const { return QString::fromUtf8(readFile(m_argsFile)).split(QLatin1Char('\n'), Qt::SkipEmptyParts); }

private:
    QString m_path;
    QString m_argsFile;
    QByteArray m_before;
    bool m_wasSet = false;
};

// The line a fake writes its arguments with.
inline QByteArray recordArguments() { return "printf '%s\\n' \"$@\" > \"$ARGS\"\n"; }

} // namespace shardscope::testing
