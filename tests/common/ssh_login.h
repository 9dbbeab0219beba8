#pragma once

// A real SSH login node on this machine for a test: OpenSSH's sshd on 127.0.0.1 with its own port,
// host key, client key and configuration under the test's folder, started by the test and
// stopped by it (the process it started). Every command a session runs is appended to a log
// (ForceCommand), so a test can tell what ran there and not here. The sessions get the
// environment given (SetEnv: a test cluster's SLURM_CONF, as a real login node has its own).

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QStandardPaths>
#include <QString>
#include <QStringList>
#include <QTest>

#include <unistd.h>

namespace shardscope::testing {

class SshLogin {
public:
    // Empty when an sshd can be started here; else why not (the test skips with it).
    static QString unavailable()
    {
        if (!QFile::exists(QStringLiteral("/usr/sbin/sshd")) || QStandardPaths::findExecutable(QStringLiteral("ssh")).isEmpty()
            || QStandardPaths::findExecutable(QStringLiteral("ssh-keygen")).isEmpty())
            return QStringLiteral("OpenSSH's server and client are not installed (./scripts/setup.sh installs "
                                  "openssh-server, openssh-client)");
        if (::geteuid() != 0)
            return QStringLiteral("an sshd that logs in as this user needs root here (CI runs as root)");
        return {};
    }

    // sshd on 127.0.0.1:`port`, its files in <folder>/ssh; `environment` ("KEY=value") for every
    // session. False with what went wrong.
    bool start(const QString& folder, int port, const QStringList& environment, QString* said)
    {
        m_dir = folder + QStringLiteral("/ssh");
        m_port = port;
        QDir().mkpath(m_dir);
        QDir().mkpath(QStringLiteral("/run/sshd")); // sshd's privilege separation folder
        for (const QString& key : {QStringLiteral("host_key"), QStringLiteral("client_key")})
            if (QProcess::execute(QStringLiteral("ssh-keygen"), {"-q", "-t", "ed25519", "-N", "", "-f", m_dir + "/" + key})
                != 0) {
                *said = QStringLiteral("ssh-keygen failed");
                return false;
            }
        QFile::copy(m_dir + "/client_key.pub", m_dir + "/authorized_keys");
        writeText(m_dir + "/logged-command", "#!/bin/bash\nprintf '%s\\n' \"$SSH_ORIGINAL_COMMAND\" >> " + m_dir
                                                 + "/commands.log\nexec bash -c \"$SSH_ORIGINAL_COMMAND\"\n");
        QFile::setPermissions(m_dir + "/logged-command", QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
        QString config = QStringLiteral("Port %1\nListenAddress 127.0.0.1\nHostKey %2/host_key\nPidFile %2/sshd.pid\n"
                                        "AuthorizedKeysFile %2/authorized_keys\nPermitRootLogin prohibit-password\n"
                                        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
                                        "StrictModes no\nForceCommand %2/logged-command\n")
                             .arg(port)
                             .arg(m_dir);
        if (!environment.isEmpty())
            config += QStringLiteral("SetEnv ") + environment.join(QLatin1Char(' ')) + QLatin1Char('\n');
        writeText(m_dir + "/sshd_config", config);
        m_sshd.setProcessChannelMode(QProcess::MergedChannels);
        m_sshd.start(QStringLiteral("/usr/sbin/sshd"), {"-D", "-f", m_dir + "/sshd_config", "-E", m_dir + "/sshd.log"});
        if (!m_sshd.waitForStarted(10000)) {
            *said = QStringLiteral("sshd did not start: ") + m_sshd.errorString();
            return false;
        }
        QElapsedTimer clock;
        clock.start();
        while (clock.elapsed() < 15000) {
            QProcess probe;
            probe.start(QStringLiteral("ssh"),
                        QStringList{"-o", "BatchMode=yes"} + options() + QStringList{destination(), "true"});
            if (probe.waitForFinished(10000) && probe.exitCode() == 0) {
                QFile::remove(commandLog()); // the probe's `true` is not the test's
                return true;
            }
            if (m_sshd.state() != QProcess::Running)
                break;
            QTest::qWait(200);
        }
        *said = QStringLiteral("no SSH login to 127.0.0.1:%1: %2 %3")
                    .arg(port)
                    .arg(QString::fromUtf8(m_sshd.readAll()), readText(m_dir + "/sshd.log"));
        stop();
        return false;
    }

    void stop()
    {
        if (m_sshd.state() == QProcess::NotRunning)
            return;
        m_sshd.terminate();
        if (!m_sshd.waitForFinished(10000)) {
            m_sshd.kill();
            m_sshd.waitForFinished(5000);
        }
    }

    ~SshLogin() { stop(); }

    QString destination() const { return QStringLiteral("root@127.0.0.1"); }
    // ssh's options to log in: the port, the client key, no host key kept (a new one each test).
    QStringList options() const
    {
        return {"-p", QString::number(m_port),    "-i", m_dir + "/client_key",
                "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"};
    }
    // Every command the sessions ran, a line each.
    QString commandLog() const { return m_dir + "/commands.log"; }

private:
    static void writeText(const QString& path, const QString& text)
    {
        QFile file(path);
        if (file.open(QIODevice::WriteOnly | QIODevice::Truncate))
            file.write(text.toUtf8());
    }
    static QString readText(const QString& path)
    {
        QFile file(path);
        return file.open(QIODevice::ReadOnly) ? QString::fromUtf8(file.readAll()) : QString();
    }

    QString m_dir;
    int m_port = 0;
    QProcess m_sshd;
};

} // namespace shardscope::testing
