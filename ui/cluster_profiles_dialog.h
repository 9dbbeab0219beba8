#pragma once

// The cluster profiles (clusters.ini, the file `shardscope launch --target slurm:NAME` reads) edited
// in the workbench: each profile's partition offered from what SLURM's `sinfo` lists where the
// profile runs its commands (this machine or its login node), its time limit, account, QoS, CPUs,
// extra #SBATCH lines, shared folder and login node. Everything goes through `shardscope clusters`
// (--json to read, --save / --remove to change one profile; the rest of the file stays as the user
// wrote it), in the background: the workbench never reads or writes the file itself.

#include <QDialog>
#include <QJsonArray>
#include <QJsonObject>
#include <QString>
#include <QStringList>

#include <optional>

class QComboBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QPlainTextEdit;
class QSpinBox;

namespace shardscope::ui {

struct CommandAnswer;
class ShardscopeCommand;

class ClusterProfilesDialog : public QDialog {
    Q_OBJECT

public:
    explicit ClusterProfilesDialog(QWidget* parent = nullptr);
    ~ClusterProfilesDialog() override;

    // Asks `shardscope clusters --json` again; profilesLoaded when it has answered.
    void reload();
    QStringList profileNames() const;
    bool selectProfile(const QString& name);
    QString currentProfile() const;
    // The partitions the partition choice offers now (SLURM's, where the profile runs its commands).
    QStringList offeredPartitions() const;
    // A new profile of that name in the list (not in the file until saved); false when taken or blank.
    bool newProfile(const QString& name);
    // Saves the profile shown (or removes it): empty when started (saved() tells how it ended), else
    // why not.
    QString saveCurrent();
    QString removeCurrent();
    QString message() const;

signals:
    void profilesLoaded();
    void saved(bool ok, const QString& message);
    void profilesChanged(); // the file changed: targets are listed again

private:
    void showProfile(int row);
    QJsonObject formProfile() const; // the form as `clusters --json` writes a profile
    void runChange(const QStringList& args, const QByteArray& input, const QString& selectAfter);
    void commandFinished(const CommandAnswer& answer); // a listing's or a change's answer
    void listed(const CommandAnswer& answer); // `clusters --json`
    void changed(const CommandAnswer& answer, const QString& selectAfter); // `clusters --save/--remove`

    QListWidget* m_list = nullptr;
    QComboBox* m_partition = nullptr;
    QLineEdit* m_time = nullptr;
    QSpinBox* m_warning = nullptr;
    QLineEdit* m_account = nullptr;
    QLineEdit* m_qos = nullptr;
    QSpinBox* m_cpus = nullptr;
    QPlainTextEdit* m_sbatch = nullptr;
    QLineEdit* m_sharedFolder = nullptr;
    QLineEdit* m_login = nullptr;
    QLineEdit* m_sshOptions = nullptr;
    QLabel* m_message = nullptr;
    QLabel* m_file = nullptr;
    ShardscopeCommand* m_command = nullptr; // a `shardscope clusters` on its way
    std::optional<QString> m_changeSelects; // set while the command is a change: the profile to select after it
    QJsonArray m_profiles; // as --json printed them, plus new ones not saved yet
    QString m_selectAfterLoad;
};

} // namespace shardscope::ui
