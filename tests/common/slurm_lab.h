#pragma once

// A real SLURM cluster of several nodes on this machine for a test (scripts/slurm-cluster.sh:
// munged, slurmctld and one slurmd per node, loopback addresses, its own ports and state folder
// under the test's folder), stopped by PID at the end. Tests that run at the same time use
// different port bases. SLURM_CONF is set for this process and what it starts (sbatch, squeue,
// shardscope).

#include <QFile>
#include <QProcess>
#include <QStandardPaths>
#include <QString>

namespace shardscope::testing {

class SlurmLab {
public:
    // Empty when SLURM's daemons can be started here; else why not (the test skips with it).
    static QString unavailable()
    {
        if (QStandardPaths::findExecutable(QStringLiteral("slurmctld"), {"/usr/sbin", "/usr/bin"}).isEmpty())
            return QStringLiteral("SLURM's daemons are not installed (./scripts/setup.sh installs slurmctld, slurmd, "
                                  "slurm-client, munge)");
        return {};
    }

    // Starts `nodes` nodes of `cpus` CPUs in <folder>/slurm; false with what the script said.
    // `hiddenFromLastNode`: a folder the last node does not see (a shared folder not mounted there).
    bool start(const QString& folder, int nodes, int cpus, int portBase, QString* said, const QString& hiddenFromLastNode = {})
    {
        // munged wants its socket's every parent folder searchable by all.
        QFile::setPermissions(folder, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner | QFile::ReadGroup | QFile::ExeGroup
                                          | QFile::ReadOther | QFile::ExeOther);
        m_lab = folder + QStringLiteral("/slurm");
        m_nodes = nodes;
        m_cpus = cpus;
        m_portBase = portBase;
        m_hidden = hiddenFromLastNode;
        m_started = run(QStringLiteral("start"), said);
        if (m_started)
            qputenv("SLURM_CONF", (m_lab + "/slurm.conf").toUtf8());
        return m_started;
    }

    // Stops every daemon it started, by PID; false with what the script said.
    bool stop(QString* said)
    {
        if (!m_started)
            return true;
        m_started = false;
        return run(QStringLiteral("stop"), said);
    }

    // The controller killed (SIGKILL: the jobs go on on the nodes), and started again (it recovers
    // its state from its state folder; returns once it answers). False with what the script said.
    bool killController(QString* said) const { return run(QStringLiteral("kill-controller"), said); }
    bool startController(QString* said) const { return run(QStringLiteral("start-controller"), said); }

    // Node `node`'s slurmd killed (its tasks run on, but SLURM hears no more of the node and marks it
    // down after SlurmdTimeout), and started again (returns once the node is idle).
    bool killNode(const QString& node, QString* said) const { return run(QStringLiteral("kill-node"), said, {node}); }
    bool startNode(const QString& node, QString* said) const { return run(QStringLiteral("start-node"), said, {node}); }

    ~SlurmLab()
    {
        QString said;
        stop(&said);
    }

private:
    bool run(const QString& verb, QString* output, const QStringList& arguments = {}) const
    {
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("SLURM_LAB"), m_lab);
        env.insert(QStringLiteral("NODES"), QString::number(m_nodes));
        env.insert(QStringLiteral("CPUS"), QString::number(m_cpus));
        env.insert(QStringLiteral("PORT_BASE"), QString::number(m_portBase));
        if (!m_hidden.isEmpty())
            env.insert(QStringLiteral("HIDE_FROM_LAST_NODE"), m_hidden);
        p.setProcessEnvironment(env);
        p.setProcessChannelMode(QProcess::MergedChannels);
        p.start(QStringLiteral(SHARDSCOPE_SOURCE_DIR "/scripts/slurm-cluster.sh"), QStringList{verb} + arguments);
        p.waitForFinished(120000);
        if (output)
            *output = QString::fromUtf8(p.readAll());
        return p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0;
    }

    QString m_lab, m_hidden;
    int m_nodes = 0, m_cpus = 0, m_portBase = 0;
    bool m_started = false;
};

} // namespace shardscope::testing
