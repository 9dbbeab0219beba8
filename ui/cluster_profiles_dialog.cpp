#include "ui/cluster_profiles_dialog.h"

#include "ui/run_launcher.h"
#include "ui/shardscope_command.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QJsonDocument>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMessageBox>
#include <QInputDialog>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

#include <utility>

namespace shardscope::ui {

namespace {

QLineEdit* lineEdit(QWidget* parent, const char* name, const QString& placeholder)
{
    auto* edit = new QLineEdit(parent);
    edit->setObjectName(QLatin1String(name));
    edit->setPlaceholderText(placeholder);
    return edit;
}

} // namespace

ClusterProfilesDialog::ClusterProfilesDialog(QWidget* parent) : QDialog(parent)
{
    setObjectName(QStringLiteral("clusterProfilesDialog"));
    setWindowTitle(tr("Cluster profiles"));
    auto* layout = new QVBoxLayout(this);
    m_file = new QLabel(this);
    m_file->setTextFormat(Qt::PlainText);
    m_file->setWordWrap(true);
    layout->addWidget(m_file);
    auto* body = new QHBoxLayout;
    auto* left = new QVBoxLayout;
    m_list = new QListWidget(this);
    m_list->setObjectName(QStringLiteral("profileList"));
    left->addWidget(m_list, 1);
    auto* add = new QPushButton(tr("New…"), this);
    add->setObjectName(QStringLiteral("newProfileButton"));
    connect(add, &QPushButton::clicked, this, [this] {
        bool ok = false;
        const QString name = QInputDialog::getText(this, tr("New cluster profile"), tr("Name (--target slurm:NAME):"),
                                                   QLineEdit::Normal, QString(), &ok);
        if (ok && !newProfile(name))
            m_message->setText(tr("A profile needs a name of its own (no brackets)."));
    });
    auto* remove = new QPushButton(tr("Remove"), this);
    remove->setObjectName(QStringLiteral("removeProfileButton"));
    connect(remove, &QPushButton::clicked, this, [this] {
        if (currentProfile().isEmpty()
            || QMessageBox::question(this, tr("Remove profile"), tr("Remove [%1] from the profiles file?").arg(currentProfile()))
                   != QMessageBox::Yes)
            return;
        if (const QString why = removeCurrent(); !why.isEmpty())
            m_message->setText(why);
    });
    auto* listButtons = new QHBoxLayout;
    listButtons->addWidget(add);
    listButtons->addWidget(remove);
    left->addLayout(listButtons);
    body->addLayout(left, 1);

    auto* form = new QFormLayout;
    m_partition = new QComboBox(this);
    m_partition->setObjectName(QStringLiteral("profilePartition"));
    m_partition->setEditable(true); // a partition sinfo does not list here may still be the user's
    m_partition->setToolTip(tr("The partitions SLURM's sinfo lists where this profile runs its commands; empty: the "
                               "cluster's default partition"));
    form->addRow(tr("Partition"), m_partition);
    m_time = lineEdit(this, "profileTime", tr("e.g. 02:00:00 (empty: the partition's)"));
    form->addRow(tr("Time limit"), m_time);
    m_warning = new QSpinBox(this);
    m_warning->setObjectName(QStringLiteral("profileWarning"));
    m_warning->setRange(1, 86400);
    m_warning->setSuffix(tr(" s"));
    m_warning->setToolTip(tr("SIGUSR1 this long before the time limit: the ranks save a checkpoint and the job requeues"));
    form->addRow(tr("Warning before the limit"), m_warning);
    m_account = lineEdit(this, "profileAccount", QString());
    form->addRow(tr("Account"), m_account);
    m_qos = lineEdit(this, "profileQos", QString());
    form->addRow(tr("QoS"), m_qos);
    m_cpus = new QSpinBox(this);
    m_cpus->setObjectName(QStringLiteral("profileCpus"));
    m_cpus->setRange(0, 100000);
    m_cpus->setSpecialValueText(tr("SLURM's default"));
    form->addRow(tr("CPUs per node's task"), m_cpus);
    m_sbatch = new QPlainTextEdit(this);
    m_sbatch->setObjectName(QStringLiteral("profileSbatch"));
    m_sbatch->setPlaceholderText(tr("More #SBATCH lines, one a line (e.g. --gres=gpu:8)"));
    m_sbatch->setFixedHeight(70);
    form->addRow(tr("#SBATCH lines"), m_sbatch);
    m_sharedFolder = lineEdit(this, "profileSharedFolder", tr("seen by this machine and every node at the same path"));
    form->addRow(tr("Shared folder"), m_sharedFolder);
    m_login = lineEdit(this, "profileLogin", tr("user@login-node (empty: SLURM's commands on this machine)"));
    form->addRow(tr("Login node"), m_login);
    m_sshOptions = lineEdit(this, "profileSshOptions", tr("e.g. -p 22 -i ~/.ssh/cluster"));
    form->addRow(tr("SSH options"), m_sshOptions);
    body->addLayout(form, 2);
    layout->addLayout(body, 1);

    m_message = new QLabel(this);
    m_message->setObjectName(QStringLiteral("profileMessage"));
    m_message->setTextFormat(Qt::PlainText);
    m_message->setWordWrap(true);
    layout->addWidget(m_message);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Save | QDialogButtonBox::Close, this);
    connect(buttons->button(QDialogButtonBox::Save), &QPushButton::clicked, this, [this] {
        if (const QString why = saveCurrent(); !why.isEmpty())
            m_message->setText(why);
    });
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    layout->addWidget(buttons);
    connect(m_list, &QListWidget::currentRowChanged, this, &ClusterProfilesDialog::showProfile);
    resize(760, 480);
    m_command = new ShardscopeCommand(this);
    connect(m_command, &ShardscopeCommand::finished, this, &ClusterProfilesDialog::commandFinished);
    reload();
}

ClusterProfilesDialog::~ClusterProfilesDialog()
{
    m_command->dropAnswer(10000); // its answer must not reach a dialog being torn down; a save finishes first
}

void ClusterProfilesDialog::reload()
{
    if (m_command->running())
        return;
    m_changeSelects.reset();
    m_command->start({QStringLiteral("clusters"), QStringLiteral("--json")});
}

void ClusterProfilesDialog::commandFinished(const CommandAnswer& answer)
{
    const std::optional<QString> change = std::exchange(m_changeSelects, std::nullopt);
    if (!answer.started) {
        m_message->setText(tr("Cannot start %1 (set SHARDSCOPE_LAUNCHER).").arg(launcherProgram()));
        if (change)
            emit saved(false, m_message->text());
        else
            emit profilesLoaded();
    } else if (change) {
        changed(answer, *change);
    } else {
        listed(answer);
    }
}

void ClusterProfilesDialog::listed(const CommandAnswer& answer)
{
    const QJsonObject all = answer.json.object();
    m_profiles = all.value(QStringLiteral("profiles")).toArray();
    m_file->setText(tr("Profiles of %1 (`shardscope launch --target slurm:NAME` reads them)")
                        .arg(all.value(QStringLiteral("file")).toString()));
    if (!answer.succeeded())
        m_message->setText(answer.error.isEmpty() ? tr("shardscope clusters failed") : answer.error);
    QSignalBlocker blocker(m_list);
    m_list->clear();
    for (const auto& p : m_profiles)
        m_list->addItem(p.toObject().value(QStringLiteral("name")).toString());
    blocker.unblock();
    if (!selectProfile(m_selectAfterLoad) && m_list->count() > 0)
        m_list->setCurrentRow(0);
    m_selectAfterLoad.clear();
    emit profilesLoaded();
}

QStringList ClusterProfilesDialog::profileNames() const
{
    QStringList names;
    for (int i = 0; i < m_list->count(); ++i)
        names << m_list->item(i)->text();
    return names;
}

bool ClusterProfilesDialog::selectProfile(const QString& name)
{
    const auto found = m_list->findItems(name, Qt::MatchExactly);
    if (name.isEmpty() || found.isEmpty())
        return false;
    m_list->setCurrentItem(found.first());
    return true;
}

QString ClusterProfilesDialog::currentProfile() const
{
    return m_list->currentItem() ? m_list->currentItem()->text() : QString();
}

QStringList ClusterProfilesDialog::offeredPartitions() const
{
    QStringList items;
    for (int i = 0; i < m_partition->count(); ++i)
        if (!m_partition->itemText(i).isEmpty())
            items << m_partition->itemText(i);
    return items;
}

void ClusterProfilesDialog::showProfile(int row)
{
    const QJsonObject p = row >= 0 && row < m_profiles.size() ? m_profiles.at(row).toObject() : QJsonObject();
    m_partition->clear();
    m_partition->addItem(QString()); // the cluster's default
    QStringList partitions;
    for (const auto& name : p.value(QStringLiteral("partitions")).toArray())
        partitions << name.toString();
    m_partition->addItems(partitions);
    m_partition->setCurrentText(p.value(QStringLiteral("partition")).toString());
    const QString partitionsError = p.value(QStringLiteral("partitions_error")).toString();
    m_partition->setToolTip(partitionsError.isEmpty() ? tr("SLURM's partitions (sinfo) where this profile runs its commands")
                                                      : tr("No partitions from sinfo: %1").arg(partitionsError));
    m_time->setText(p.value(QStringLiteral("time")).toString());
    m_warning->setValue(p.value(QStringLiteral("warning_seconds")).toInt(120));
    m_account->setText(p.value(QStringLiteral("account")).toString());
    m_qos->setText(p.value(QStringLiteral("qos")).toString());
    m_cpus->setValue(p.value(QStringLiteral("cpus_per_task")).toInt());
    QStringList sbatch;
    for (const auto& line : p.value(QStringLiteral("sbatch")).toArray())
        sbatch << line.toString();
    m_sbatch->setPlainText(sbatch.join(QLatin1Char('\n')));
    m_sharedFolder->setText(p.value(QStringLiteral("shared_folder")).toString());
    m_login->setText(p.value(QStringLiteral("login")).toString());
    m_sshOptions->setText(p.value(QStringLiteral("ssh_options")).toString());
}

bool ClusterProfilesDialog::newProfile(const QString& nameIn)
{
    const QString name = nameIn.trimmed();
    if (name.isEmpty() || name.contains(QLatin1Char('[')) || name.contains(QLatin1Char(']')) || profileNames().contains(name))
        return false;
    // Offered the partitions of this machine's SLURM, as a profile without a login node sees them.
    QJsonObject fresh{{QStringLiteral("name"), name}, {QStringLiteral("warning_seconds"), 120}};
    for (const auto& p : m_profiles)
        if (p.toObject().value(QStringLiteral("login")).toString().isEmpty()
            && p.toObject().contains(QStringLiteral("partitions"))) {
            fresh.insert(QStringLiteral("partitions"), p.toObject().value(QStringLiteral("partitions")));
            break;
        }
    m_profiles.append(fresh);
    m_list->addItem(name);
    m_list->setCurrentRow(m_list->count() - 1);
    m_message->setText(tr("[%1] is saved into the profiles file by Save.").arg(name));
    return true;
}

QJsonObject ClusterProfilesDialog::formProfile() const
{
    QJsonArray sbatch;
    for (const QString& line : m_sbatch->toPlainText().split(QLatin1Char('\n'), Qt::SkipEmptyParts))
        if (!line.trimmed().isEmpty())
            sbatch.append(line.trimmed());
    return {{QStringLiteral("partition"), m_partition->currentText().trimmed()},
            {QStringLiteral("time"), m_time->text().trimmed()},
            {QStringLiteral("warning_seconds"), m_warning->value()},
            {QStringLiteral("account"), m_account->text().trimmed()},
            {QStringLiteral("qos"), m_qos->text().trimmed()},
            {QStringLiteral("cpus_per_task"), m_cpus->value()},
            {QStringLiteral("sbatch"), sbatch},
            {QStringLiteral("shared_folder"), m_sharedFolder->text().trimmed()},
            {QStringLiteral("login"), m_login->text().trimmed()},
            {QStringLiteral("ssh_options"), m_sshOptions->text().trimmed()}};
}

QString ClusterProfilesDialog::saveCurrent()
{
    if (currentProfile().isEmpty())
        return tr("No profile to save: New… makes one.");
    if (m_sharedFolder->text().trimmed().isEmpty())
        return tr("A profile needs its shared folder: the folder this machine and every node see, where runs go.");
    if (m_command->running())
        return tr("Busy: the last change is still being written.");
    runChange({QStringLiteral("--save"), currentProfile()}, QJsonDocument(formProfile()).toJson(), currentProfile());
    return {};
}

QString ClusterProfilesDialog::removeCurrent()
{
    if (currentProfile().isEmpty())
        return tr("No profile to remove.");
    if (m_command->running())
        return tr("Busy: the last change is still being written.");
    runChange({QStringLiteral("--remove"), currentProfile()}, {}, {});
    return {};
}

void ClusterProfilesDialog::runChange(const QStringList& args, const QByteArray& input, const QString& selectAfter)
{
    if (m_command->running())
        return;
    m_changeSelects = selectAfter;
    // The profile's JSON on standard input for --save; nothing for --remove.
    m_command->start(QStringList{QStringLiteral("clusters")} + args, ShardscopeCommand::Output::Text, input);
}

void ClusterProfilesDialog::changed(const CommandAnswer& answer, const QString& selectAfter)
{
    const QString said = answer.text.trimmed();
    m_message->setText(said);
    const bool ok = answer.succeeded();
    if (ok) {
        m_selectAfterLoad = selectAfter;
        reload();
        emit profilesChanged();
    }
    emit saved(ok, said);
}

QString ClusterProfilesDialog::message() const { return m_message->text(); }

} // namespace shardscope::ui
