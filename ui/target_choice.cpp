#include "ui/target_choice.h"

#include "ui/cluster_profiles_dialog.h"
#include "ui/shardscope_command.h"

#include <QJsonArray>
#include <QMap>
#include <QSignalBlocker>

#include <algorithm>

namespace shardscope::ui {

namespace {

// The choice's last item: it opens the cluster profiles' editor.
constexpr const char* kEditProfiles = "edit-cluster-profiles";

QString orDefault(const QString& value, const QString& fallback) { return value.isEmpty() ? fallback : value; }

} // namespace

QStringList slurmTargets(const QJsonObject& clusters)
{
    QStringList targets;
    for (const auto& p : clusters.value(QStringLiteral("profiles")).toArray())
        targets << QStringLiteral("slurm:") + p.toObject().value(QStringLiteral("name")).toString();
    return targets;
}

QString describeClusters(const QJsonObject& clusters)
{
    const QString file = clusters.value(QStringLiteral("file")).toString();
    const QJsonArray profiles = clusters.value(QStringLiteral("profiles")).toArray();
    if (profiles.isEmpty())
        return TargetChoice::tr("No cluster profiles in %1: Cluster profiles… makes one.").arg(file);
    QStringList lines{TargetChoice::tr("# profiles of %1").arg(file)};
    QMap<QString, QString> places; // SLURM's partitions by the login node that runs its commands ("": here)
    for (const auto& value : profiles) {
        const QJsonObject p = value.toObject();
        const QString login = p.value(QStringLiteral("login")).toString();
        lines << TargetChoice::tr("[%1] partition %2, time %3, shared folder %4%5")
                     .arg(p.value(QStringLiteral("name")).toString(),
                          orDefault(p.value(QStringLiteral("partition")).toString(), TargetChoice::tr("(the cluster's default)")),
                          orDefault(p.value(QStringLiteral("time")).toString(), TargetChoice::tr("(the partition's)")),
                          orDefault(p.value(QStringLiteral("shared_folder")).toString(),
                                    TargetChoice::tr("(none: set shared_folder)")),
                          login.isEmpty() ? QString() : TargetChoice::tr(", SLURM on %1 over SSH").arg(login));
        const QString on = login.isEmpty() ? QString() : TargetChoice::tr(" on login node %1").arg(login);
        QStringList names;
        for (const auto& name : p.value(QStringLiteral("partitions")).toArray())
            names << name.toString();
        places.insert(login,
                      p.contains(QStringLiteral("partitions_error"))
                          ? TargetChoice::tr("# partitions%1: %2").arg(on, p.value(QStringLiteral("partitions_error")).toString())
                          : TargetChoice::tr("# partitions (sinfo%1): %2").arg(on, names.join(QLatin1Char(' '))));
    }
    return (lines + places.values()).join(QLatin1Char('\n'));
}

TargetChoice::TargetChoice(QWidget* parent) : QComboBox(parent), m_clusters(new ShardscopeCommand(this))
{
    setObjectName(QStringLiteral("runTarget"));
    addItem(tr("This machine"), QString());
    addItem(tr("Cluster profiles…"), QString::fromLatin1(kEditProfiles));
    setToolTip(tr("Where Launch runs: this machine, or a SLURM cluster profile of clusters.ini "
                  "(`shardscope launch --target slurm:NAME`)"));
    connect(this, &QComboBox::currentIndexChanged, this, [this] {
        if (currentData().toString() == QLatin1String(kEditProfiles)) {
            const QSignalBlocker blocker(this);
            setCurrentIndex(m_lastIndex); // an action, not a target
            editProfiles();
            return;
        }
        m_lastIndex = currentIndex();
        emit targetChosen(target());
    });
    connect(m_clusters, &ShardscopeCommand::finished, this, &TargetChoice::listed);
}

QString TargetChoice::target() const { return currentData().toString(); }

bool TargetChoice::setTarget(const QString& target)
{
    const int index = findData(target);
    if (index < 0)
        return false;
    setCurrentIndex(index);
    return true;
}

QStringList TargetChoice::targets() const
{
    QStringList all;
    for (int i = 0; i < count(); ++i)
        if (itemData(i).toString() != QLatin1String(kEditProfiles))
            all << itemData(i).toString();
    return all;
}

ClusterProfilesDialog* TargetChoice::editProfiles()
{
    auto* dialog = new ClusterProfilesDialog(this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    connect(dialog, &ClusterProfilesDialog::profilesChanged, this, &TargetChoice::refresh);
    dialog->open();
    return dialog;
}

void TargetChoice::refresh() { m_clusters->start({QStringLiteral("clusters"), QStringLiteral("--json")}); }

void TargetChoice::listed(const CommandAnswer& answer)
{
    const QString chosen = target();
    QSignalBlocker blocker(this); // a listing chooses no target
    while (count() > 1)
        removeItem(1);
    const QJsonObject clusters = answer.json.object();
    if (answer.succeeded())
        for (const QString& t : slurmTargets(clusters))
            addItem(tr("SLURM: %1").arg(t.mid(QStringLiteral("slurm:").size())), t);
    addItem(tr("Cluster profiles…"), QString::fromLatin1(kEditProfiles));
    // What `shardscope clusters` said (each profile, SLURM's partitions, or why there are none).
    const QString said = answer.succeeded() ? describeClusters(clusters) : answer.started ? answer.error : QString();
    setToolTip(tr("Where Launch runs: this machine, or a SLURM cluster profile "
                  "(`shardscope launch --target slurm:NAME`).\n\n%1")
                   .arg(said.isEmpty() ? tr("No cluster profiles.") : said));
    setCurrentIndex(std::max(0, findData(chosen)));
    m_lastIndex = currentIndex();
    blocker.unblock();
    emit targetsLoaded();
}

} // namespace shardscope::ui
