#pragma once

// The Configure page's target choice: where Launch runs. "This machine" first, then each SLURM
// cluster profile `shardscope clusters --json` lists ($SHARDSCOPE_HOME/clusters.ini) as
// "slurm:NAME", and last "Cluster profiles…", which opens the profiles' editor: an action, not a
// target (the choice stays where it was), and what the editor saves is listed again at once. The
// profiles are listed in the background; the tooltip says what the command said of them (each
// profile, SLURM's partitions, or why there are none).

#include <QComboBox>
#include <QJsonObject>
#include <QStringList>

namespace shardscope::ui {

struct CommandAnswer;
class ClusterProfilesDialog;
class ShardscopeCommand;

// The targets of a `clusters --json` answer: "slurm:NAME" for each profile, in its order.
QStringList slurmTargets(const QJsonObject& clusters);
// The same answer in words, for the tooltip: the profiles file, each profile (partition, time
// limit, shared folder, login node) and SLURM's partitions where each profile runs its commands.
QString describeClusters(const QJsonObject& clusters);

class TargetChoice : public QComboBox {
    Q_OBJECT
public:
    explicit TargetChoice(QWidget* parent = nullptr);

    QString target() const; // "" (this machine) or "slurm:NAME"
    bool setTarget(const QString& target); // false when no such target is offered
    QStringList targets() const; // the targets offered, "" first
    // Asks `shardscope clusters --json` again; targetsLoaded when it has answered. Nothing while a
    // listing is on its way.
    void refresh();
    ClusterProfilesDialog* editProfiles(); // the profiles' editor, opened

signals:
    void targetChosen(const QString& target); // another target was chosen (not by a listing)
    void targetsLoaded();

private:
    void listed(const CommandAnswer& answer);

    ShardscopeCommand* m_clusters = nullptr; // `shardscope clusters --json`
    int m_lastIndex = 0; // chosen before the editor's item was picked
};

} // namespace shardscope::ui
